package examples

import (
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
)

// codecStrings are strings of every shape: every key length from
// testkeys, unicode, escapes, HTML characters (escaped by encoding/json),
// control characters, U+2028 and invalid UTF-8.
func codecStrings() []string {
	ss := []string{"", "b1", "acct-42", "grüße", "日本", "🎉", `"q"`, `back\slash`, "tab\tnl\n", "<a>&b", "\u2028", "\x00\x7f", "\xff", "~ !#"}
	for _, k := range testkeys.Bytes() {
		ss = append(ss, string(k))
	}
	return ss
}

var codecNums = []int64{0, 1, -1, 42, math.MaxInt64, math.MinInt64, math.MaxInt32 + 1, math.MinInt32}

// codecBills are bills of every shape of string and number. (Strings of
// invalid UTF-8 are left out: serde.JSON writes their replacement
// characters as UTF-8 where encoding/json escapes them; see serde.JSON.)
func codecBills() []Bill {
	var bills []Bill
	for i, s := range codecStrings() {
		if utf8.ValidString(s) {
			n, m := codecNums[i%len(codecNums)], codecNums[(i+3)%len(codecNums)]
			bills = append(bills, Bill{BillID: s, Account: "a" + s, AmountCents: n, TS: m})
		}
	}
	return bills
}

// decodeInputs are JSON texts around what the encoder writes: whitespace,
// escapes, other spellings of a name, repeated and unknown fields, nulls,
// numbers of every form and range, wrong types, and malformed text.
func decodeInputs(encoded [][]byte) [][]byte {
	ins := append([][]byte(nil), encoded...)
	for _, s := range []string{
		``, ` `, `{}`, ` { } `, `{`, `}`, `[]`, `null`, `"x"`, `1`, `{} x`, `{},`, `{"bill_id":"a",}`, `{,}`,
		`{"bill_id":"a","account":"b","amount_cents":1,"ts":2}`,
		` {"bill_id" : "a" , "account":"b","amount_cents" :1,"ts": 2 } `,
		"{\n\t\"bill_id\":\"a\",\r\"account\":\"b\",\"amount_cents\":-0,\"ts\":0}",
		`{"bill_id":"a","account":"b","amount_cents":1,"ts":2,"topic":"t","partition":2147483648,"offset":1}`,
		`{"bill_id":"a","account":"b","amount_cents":1,"ts":2,"topic":"t","partition":-2147483648,"offset":1}`,
		`{"BILL_ID":"a","account":"b","amount_cents":1,"ts":2}`,
		`{"bill_id":"a","bill_id":"c","account":"b","amount_cents":1,"ts":2}`,
		`{"bill_id":"a","account":"b","amount_cents":1,"ts":2,"extra":{"x":[1,{"y":null}]}}`,
		`{"bill_id":null,"account":"b","amount_cents":null,"ts":2}`,
		`{"bill_id":"a\u0062","account":"b\n","amount_cents":1,"ts":2}`,
		`{"bill_id":"","account":"b","amount_cents":1,"ts":2}`,
		`{"bill_id":"a","account":"b","amount_cents":1}`,
		`{"bill_id":"a","account":"b","amount_cents":1.0,"ts":2}`,
		`{"bill_id":"a","account":"b","amount_cents":1e3,"ts":2}`,
		`{"bill_id":"a","account":"b","amount_cents":01,"ts":2}`,
		`{"bill_id":"a","account":"b","amount_cents":-,"ts":2}`,
		`{"bill_id":"a","account":"b","amount_cents":9223372036854775808,"ts":2}`,
		`{"bill_id":"a","account":"b","amount_cents":-9223372036854775809,"ts":2}`,
		`{"bill_id":"a","account":"b","amount_cents":"1","ts":2}`,
		`{"bill_id":1,"account":"b","amount_cents":1,"ts":2}`,
		`{"bill_id":"a","account":"b","amount_cents":true,"ts":2}`,
		`{"count":1,"sum_cents":2,"min_cents":-3,"max_cents":4,"last_bill_id":"x"}`,
		`{"count":1,"sum_cents":2,"min_cents":-3,"max_cents":4,"last_bill_id":"x"`,
		`{"count":1,"count":2}`, `{"count":"1","sum_cents":2}`, `{"Count":1}`, `{"last_bill_id":"\u00e9"}`, "{\"last_bill_id\":\"\xff\"}",
		"{\"last_bill_id\":\"é\"}", `{"last_bill_id":"a"b"}`, `{"count":--1}`, `{"count":1 2}`,
	} {
		ins = append(ins, []byte(s))
	}
	return ins
}

// sameAs checks that c encodes every value to ref's bytes and decodes
// every input to ref's value, failing (with serde.ErrDecode) where ref
// fails; it returns the first difference.
func sameAs[T any](c, ref serde.Serde[T], values []T, inputs [][]byte) error {
	for _, v := range values {
		want, werr := stdjson.Marshal(v)
		got, err := c.Encode(v)
		if werr != nil || err != nil || string(got) != string(want) {
			return fmt.Errorf("Encode(%+v) = %s, %v; encoding/json %s, %v", v, got, err, want, werr)
		}
		app, err := serde.AppendEncode(c, []byte("x"), v)
		if err != nil || string(app) != "x"+string(want) {
			return fmt.Errorf("AppendEncode(%+v) = %s, %v", v, app, err)
		}
	}
	for _, in := range inputs {
		want, werr := ref.Decode(in)
		got, err := c.Decode(in)
		switch {
		case (werr == nil) != (err == nil):
			return fmt.Errorf("Decode(%q) = %+v, %v; reference %+v, %v", in, got, err, want, werr)
		case err != nil && !errors.Is(err, serde.ErrDecode):
			return fmt.Errorf("Decode(%q): %v does not wrap serde.ErrDecode", in, err)
		case err == nil && !reflect.DeepEqual(got, want):
			return fmt.Errorf("Decode(%q) = %+v; reference %+v", in, got, want)
		}
	}
	return nil
}

// billCases are codecBills, and decodeInputs around their encodings.
func billCases() ([]Bill, [][]byte) {
	bills := codecBills()
	var encoded [][]byte
	for _, b := range bills {
		e, _ := stdjson.Marshal(b)
		encoded = append(encoded, e)
	}
	return bills, decodeInputs(encoded)
}

// strictBill is BillSerde without its fast path: the reference.
var strictBill = serde.Funcs(func(b Bill) ([]byte, error) { return stdjson.Marshal(b) }, decodeBillStrict)

// TestBillSerdeMatchesStrictDecoding holds BillSerde to its strict
// decoding alone: encoding/json's bytes for every value, the same value
// or failure for every input.
func TestBillSerdeMatchesStrictDecoding(t *testing.T) {
	bills, inputs := billCases()
	if err := sameAs(BillSerde, strictBill, bills, inputs); err != nil {
		t.Error(err)
	}
}

// TestBillSerdeCheckCatchesMistakes is the negative control of the check:
// fast paths each with one plausible mistake in what they take as a
// complete bill are caught.
func TestBillSerdeCheckCatchesMistakes(t *testing.T) {
	bills, inputs := billCases()
	for name, complete := range map[string]func(Bill) bool{
		"any decoded bill": func(Bill) bool { return true },
		"ts not checked":   func(b Bill) bool { return b.BillID != "" && b.Account != "" && b.AmountCents != 0 },
		"strings only":     func(b Bill) bool { return b.BillID != "" && b.Account != "" },
	} {
		mistaken := serde.Funcs(billJSON.Encode, func(data []byte) (Bill, error) {
			if b, err := billJSON.Decode(data); err == nil && complete(b) {
				return b, nil
			}
			return decodeBillStrict(data)
		})
		if err := sameAs(mistaken, strictBill, bills, inputs); err == nil {
			t.Errorf("%s: not caught", name)
		}
	}
}

// FuzzBillSerdeMatchesStrictDecoding: any input decodes with BillSerde as
// with its strict decoding.
func FuzzBillSerdeMatchesStrictDecoding(f *testing.F) {
	for _, in := range decodeInputs(nil) {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := sameAs(BillSerde, strictBill, nil, [][]byte{in}); err != nil {
			t.Error(err)
		}
	})
}
