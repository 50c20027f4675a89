package examples

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/serde"
)

func TestExamplesBuild(t *testing.T) {
	for _, name := range Names() {
		e, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := e.Build(e.Defaults(nil)).Build()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		t.Logf("%s:\n%s", name, b.Describe())
	}
	if _, err := Get("nope"); err == nil {
		t.Error("an unknown example was found")
	}
}

func TestBillSerdeIsStrict(t *testing.T) {
	good := `{"bill_id":"b1","account":"a","amount_cents":-5,"ts":1}`
	if b, err := BillSerde.Decode([]byte(good)); err != nil || b.AmountCents != -5 {
		t.Fatalf("valid bill: %+v, %v", b, err)
	}
	for _, bad := range []string{
		`{"bill_id":"b1","account":"a","amount_cents":1}`,          // no ts
		`{"bill_id":"","account":"a","amount_cents":1,"ts":1}`,     // empty id
		`{"bill_id":"b1","account":"a","amount_cents":"1","ts":1}`, // wrong type
		`{"bill_id":"b1"`, // truncated
		`not json`,
	} {
		_, err := BillSerde.Decode([]byte(bad))
		if !errors.Is(err, serde.ErrDecode) || !errors.Is(err, ErrInvalidBill) {
			t.Errorf("%s: got %v, want a decode error", bad, err)
		}
	}
}

func TestWords(t *testing.T) {
	if got := strings.Join(Words("  The quick\tTHE fox "), ","); got != "the,quick,the,fox" {
		t.Errorf("Words = %q", got)
	}
}
