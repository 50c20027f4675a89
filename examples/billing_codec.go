package examples

import (
	"encoding/json"
	"strconv"

	"github.com/sluice-streams/sluice/serde"
)

// Billing's JSON, written out by hand for its three types: JSON was most
// of the job's cost per record even on the faster library behind
// serde.JSON, and a job that reads and writes a few flat records per
// input is where a user would write the codec out.
//
// The bytes are serde.JSON's (encoding/json's), field for field, so the
// topics and the account-totals store hold exactly what they held, and
// the serdes keep serde.JSON's IDs (savepoints compare them). Decoding
// takes a fast path only for the shape the encoder writes — a flat
// object of the type's own field names, each once, printable ASCII
// strings without escapes, plain integers — and hands anything else
// (escapes, other spellings of a name, unknown fields, nulls, malformed
// input) to serde.JSON, so every input decodes, or fails, exactly as
// there. FuzzBillingCodecsMatchJSON holds both paths to it.

// jsonFast is a serde of T with a hand-written encoder and a fast path
// of decoding, falling back to serde.JSON.
type jsonFast[T any] struct {
	id     string
	append func(dst []byte, v T) []byte
	// fields are the JSON names of T's fields, in order; set stores the
	// i-th field's value: a string (s) or an integer (n, ok=false if it
	// does not fit the field).
	fields []string
	set    func(v *T, i int, s []byte, n int64) bool
	slow   serde.Serde[T]
}

func newJSONFast[T any](fields []string, append func([]byte, T) []byte, set func(*T, int, []byte, int64) bool) jsonFast[T] {
	slow := serde.JSON[T]()
	return jsonFast[T]{id: serde.ID(slow), append: append, fields: fields, set: set, slow: slow}
}

func (c jsonFast[T]) SerdeID() string { return c.id }

func (c jsonFast[T]) Encode(v T) ([]byte, error) { return c.append(make([]byte, 0, 128), v), nil }

func (c jsonFast[T]) AppendEncode(dst []byte, v T) ([]byte, error) { return c.append(dst, v), nil }

func (c jsonFast[T]) Decode(b []byte) (T, error) {
	if v, _, ok := c.decodeFast(b); ok {
		return v, nil
	}
	return c.slow.Decode(b)
}

// decodeFast decodes b if it has the simple shape (see above), and says
// which fields it had (bit i: fields[i]); ok=false says nothing about b
// but that the slow path must decide.
func (c jsonFast[T]) decodeFast(b []byte) (v T, seen uint64, ok bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return v, 0, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return v, 0, skipWS(b, i+1) == len(b)
	}
	for {
		name, j, ok := simpleString(b, i)
		if !ok {
			return v, 0, false
		}
		f := -1
		for k, fn := range c.fields {
			if fn == string(name) {
				f = k
				break
			}
		}
		if f < 0 || seen&(1<<f) != 0 {
			return v, 0, false // unknown, another spelling, or repeated
		}
		seen |= 1 << f
		i = skipWS(b, j)
		if i >= len(b) || b[i] != ':' {
			return v, 0, false
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return v, 0, false
		}
		if b[i] == '"' {
			s, j, ok := simpleString(b, i)
			if !ok || !c.set(&v, f, s, 0) {
				return v, 0, false
			}
			i = j
		} else {
			j := i
			if j < len(b) && b[j] == '-' {
				j++
			}
			d := j
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			if j == d || b[d] == '0' && j-d > 1 {
				return v, 0, false
			}
			n, err := strconv.ParseInt(string(b[i:j]), 10, 64)
			if err != nil || !c.set(&v, f, nil, n) {
				return v, 0, false
			}
			i = j
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return v, 0, false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return v, seen, skipWS(b, i+1) == len(b)
		default:
			return v, 0, false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// simpleString reads the string at b[i] if it is printable ASCII without
// escapes, and returns its bytes and the index past it.
func simpleString(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// appendString appends s quoted as encoding/json quotes it: printable
// ASCII other than what it escapes ("\<>&) as it is, anything else by
// encoding/json itself.
func appendString(dst []byte, s string) []byte {
	if !plainString(s) {
		q, _ := json.Marshal(s) // a string always encodes
		return append(dst, q...)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// plainString says whether encoding/json writes s as it is, quoted.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func appendField(dst []byte, first bool, name string) []byte {
	if first {
		dst = append(dst, '{', '"')
	} else {
		dst = append(dst, ',', '"')
	}
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

func appendBill(dst []byte, b Bill) []byte {
	dst = appendString(appendField(dst, true, "bill_id"), b.BillID)
	dst = appendString(appendField(dst, false, "account"), b.Account)
	dst = strconv.AppendInt(appendField(dst, false, "amount_cents"), b.AmountCents, 10)
	return strconv.AppendInt(appendField(dst, false, "ts"), b.TS, 10)
}

var acceptedBillFields = []string{"bill_id", "account", "amount_cents", "ts", "topic", "partition", "offset"}

// AcceptedBillJSON is the serde of AcceptedBill: serde.JSON's bytes (see
// above).
var AcceptedBillJSON serde.Serde[AcceptedBill] = newJSONFast(acceptedBillFields,
	func(dst []byte, a AcceptedBill) []byte {
		dst = appendBill(dst, a.Bill)
		dst = appendString(appendField(dst, false, "topic"), a.Topic)
		dst = strconv.AppendInt(appendField(dst, false, "partition"), int64(a.Partition), 10)
		dst = strconv.AppendInt(appendField(dst, false, "offset"), a.Offset, 10)
		return append(dst, '}')
	},
	func(a *AcceptedBill, f int, s []byte, n int64) bool {
		if (f == 0 || f == 1 || f == 4) != (s != nil) {
			return false // a string for a number, or the reverse
		}
		switch f {
		case 0, 1, 2, 3:
			setBillField(&a.Bill, f, s, n)
		case 4:
			a.Topic = string(s)
		case 5:
			if int64(int32(n)) != n {
				return false
			}
			a.Partition = int32(n)
		case 6:
			a.Offset = n
		}
		return true
	})

var totalsFields = []string{"count", "sum_cents", "min_cents", "max_cents", "last_bill_id"}

// TotalsJSON is the serde of Totals: serde.JSON's bytes (see above).
var TotalsJSON serde.Serde[Totals] = newJSONFast(totalsFields,
	func(dst []byte, t Totals) []byte {
		dst = strconv.AppendInt(appendField(dst, true, "count"), t.Count, 10)
		dst = strconv.AppendInt(appendField(dst, false, "sum_cents"), t.SumCents, 10)
		dst = strconv.AppendInt(appendField(dst, false, "min_cents"), t.MinCents, 10)
		dst = strconv.AppendInt(appendField(dst, false, "max_cents"), t.MaxCents, 10)
		dst = appendString(appendField(dst, false, "last_bill_id"), t.LastBillID)
		return append(dst, '}')
	},
	func(t *Totals, f int, s []byte, n int64) bool {
		if (f == 4) != (s != nil) {
			return false
		}
		switch f {
		case 0:
			t.Count = n
		case 1:
			t.SumCents = n
		case 2:
			t.MinCents = n
		case 3:
			t.MaxCents = n
		case 4:
			t.LastBillID = string(s)
		}
		return true
	})

var billFields = []string{"bill_id", "account", "amount_cents", "ts"}

// billFast decodes the simple shape of a bill (see above), all four
// fields present; the slow path, BillSerde's strict checks on
// encoding/json's rules, decides everything else.
var billFast = newJSONFast(billFields,
	func(dst []byte, b Bill) []byte { return append(appendBill(dst, b), '}') },
	func(b *Bill, f int, s []byte, n int64) bool {
		if (f < 2) != (s != nil) {
			return false
		}
		setBillField(b, f, s, n)
		return true
	})

// setBillField sets field f of billFields from its string s or number n.
func setBillField(b *Bill, f int, s []byte, n int64) {
	switch f {
	case 0:
		b.BillID = string(s)
	case 1:
		b.Account = string(s)
	case 2:
		b.AmountCents = n
	case 3:
		b.TS = n
	}
}
