package examples

import (
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"testing"

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

func codecValues() (bills []AcceptedBill, totals []Totals) {
	for i, s := range codecStrings() {
		n := codecNums[i%len(codecNums)]
		m := codecNums[(i+3)%len(codecNums)]
		bills = append(bills, AcceptedBill{Bill: Bill{BillID: s, Account: "a" + s, AmountCents: n, TS: m}, Topic: s, Partition: int32(i - 7), Offset: m})
		totals = append(totals, Totals{Count: n, SumCents: m, MinCents: -n, MaxCents: int64(i), LastBillID: s})
	}
	return bills, totals
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

// strictBill is BillSerde without its fast path: the reference.
var strictBill = serde.Funcs(func(b Bill) ([]byte, error) { return stdjson.Marshal(b) }, decodeBillStrict)

// TestBillingCodecsMatchJSON holds billing's hand-written codecs to
// serde.JSON (and BillSerde to its strict decoding alone): the same bytes
// for every value, the same value or failure for every input.
func TestBillingCodecsMatchJSON(t *testing.T) {
	bills, totals := codecValues()
	var encoded [][]byte
	var plain []Bill
	for i := range bills {
		a, _ := stdjson.Marshal(bills[i])
		b, _ := stdjson.Marshal(totals[i])
		c, _ := stdjson.Marshal(bills[i].Bill)
		encoded = append(encoded, a, b, c)
		plain = append(plain, bills[i].Bill)
	}
	inputs := decodeInputs(encoded)
	if err := sameAs(AcceptedBillJSON, serde.JSON[AcceptedBill](), bills, inputs); err != nil {
		t.Error("AcceptedBillJSON:", err)
	}
	if err := sameAs(TotalsJSON, serde.JSON[Totals](), totals, inputs); err != nil {
		t.Error("TotalsJSON:", err)
	}
	if err := sameAs(BillSerde, strictBill, plain, inputs); err != nil {
		t.Error("BillSerde:", err)
	}
	// The IDs savepoints compare are serde.JSON's.
	if serde.ID(AcceptedBillJSON) != serde.ID(serde.JSON[AcceptedBill]()) || serde.ID(TotalsJSON) != serde.ID(serde.JSON[Totals]()) {
		t.Errorf("IDs %s, %s", serde.ID(AcceptedBillJSON), serde.ID(TotalsJSON))
	}
}

// TestBillingCodecCheckCatchesMistakes is the negative control of the
// check: codecs each with one plausible mistake are caught.
func TestBillingCodecCheckCatchesMistakes(t *testing.T) {
	_, totals := codecValues()
	var encoded [][]byte
	for i := range totals {
		b, _ := stdjson.Marshal(totals[i])
		encoded = append(encoded, b)
	}
	inputs := decodeInputs(encoded)
	good := TotalsJSON.(jsonFast[Totals])
	naiveQuote := good
	naiveQuote.append = func(dst []byte, v Totals) []byte { // no escaping
		dst = strconv.AppendInt(append(dst, `{"count":`...), v.Count, 10)
		dst = strconv.AppendInt(append(dst, `,"sum_cents":`...), v.SumCents, 10)
		dst = strconv.AppendInt(append(dst, `,"min_cents":`...), v.MinCents, 10)
		dst = strconv.AppendInt(append(dst, `,"max_cents":`...), v.MaxCents, 10)
		return append(append(append(dst, `,"last_bill_id":"`...), v.LastBillID...), `"}`...)
	}
	lenient := good
	lenient.set = func(v *Totals, f int, s []byte, n int64) bool { // a string where a number belongs
		if f < 4 && s != nil {
			n, _ = strconv.ParseInt(string(s), 10, 64)
			s = nil
		}
		return good.set(v, f, s, n)
	}
	for name, c := range map[string]jsonFast[Totals]{"no escaping": naiveQuote, "lenient types": lenient} {
		if err := sameAs[Totals](c, serde.JSON[Totals](), totals, inputs); err == nil {
			t.Errorf("%s: not caught", name)
		}
	}
	if err := sameAs[Totals](good, serde.JSON[Totals](), totals, inputs); err != nil {
		t.Error("the codec itself:", err)
	}
}

// FuzzBillingCodecsMatchJSON: any input decodes with the hand-written
// codecs as with serde.JSON (BillSerde: as with its strict decoding).
func FuzzBillingCodecsMatchJSON(f *testing.F) {
	for _, in := range decodeInputs(nil) {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := sameAs(AcceptedBillJSON, serde.JSON[AcceptedBill](), nil, [][]byte{in}); err != nil {
			t.Error(err)
		}
		if err := sameAs(TotalsJSON, serde.JSON[Totals](), nil, [][]byte{in}); err != nil {
			t.Error(err)
		}
		if err := sameAs(BillSerde, strictBill, nil, [][]byte{in}); err != nil {
			t.Error(err)
		}
	})
}
