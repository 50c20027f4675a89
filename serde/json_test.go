package serde

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

// jsonDoc exercises what a JSON value of a user's may hold: embedded
// structs, omitempty, pointers, slices and maps (whose keys encoding/json
// sorts), numbers at their limits, and strings of every shape.
type jsonDoc struct {
	jsonInner
	S     string            `json:"s"`
	B     []byte            `json:"b"`
	I     int64             `json:"i"`
	U     uint64            `json:"u"`
	F     float64           `json:"f"`
	P     *string           `json:"p"`
	Opt   string            `json:"opt,omitempty"`
	Str   int64             `json:"str,string"`
	List  []string          `json:"list"`
	M     map[string]int    `json:"m"`
	Any   any               `json:"any"`
	Raw   json.RawMessage   `json:"raw,omitempty"`
	Inner *jsonInner        `json:"inner,omitempty"`
	Tags  map[string]string `json:"tags,omitempty"`
	Num   json.Number       `json:"num"`
	NumS  json.Number       `json:"nums,string"`
	skip  int
}

type jsonInner struct {
	Name string `json:"name"`
	N    int32
}

// jsonStrings are strings of every shape: every key length from
// testkeys, unicode, every escape, HTML characters (which encoding/json
// escapes), U+2028/9, control characters and invalid UTF-8 (which it
// replaces).
func jsonStrings() []string {
	ss := []string{"", "a", "grüße", "日本語", "🎉", "\"quoted\"", `back\slash`, "tab\tnew\nline\r",
		"<script>&amp;</script>", "\u2028\u2029", "\x00\x01\x1f\x7f", "\xff\xfe", "a\xc3", "\ufffd", strings.Repeat("x", 1000)}
	for _, k := range testkeys.Bytes() {
		ss = append(ss, string(k))
	}
	return ss
}

// TestJSONMatchesEncodingJSON is a differential test: JSON encodes every
// value to the bytes encoding/json gives, and decodes those bytes (and
// malformed ones) to what encoding/json decodes, failing where it fails.
func TestJSONMatchesEncodingJSON(t *testing.T) {
	s := JSON[jsonDoc]()
	nums := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 1 << 53, -(1 << 53) - 1}
	floats := []float64{0, -0.5, 1e21, 1e-7, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64}
	var docs []jsonDoc
	for i, str := range jsonStrings() {
		p := str
		d := jsonDoc{jsonInner: jsonInner{Name: str, N: int32(i)}, S: str, B: []byte(str), I: nums[i%len(nums)],
			U: math.MaxUint64 - uint64(i), F: floats[i%len(floats)], Opt: str, Str: nums[(i+1)%len(nums)],
			List: []string{str, "x"}, M: map[string]int{str: i, "z": 1, "a": 2}, Any: map[string]any{"k": str, "n": 1.5},
			Num: json.Number([]string{"0", "-12.5", "206761.588", "1e21", "12345678901234567890"}[i%5]), NumS: json.Number("3.25")}
		if i%2 == 0 {
			d.P, d.Inner, d.Tags, d.Raw = &p, &jsonInner{Name: "in"}, map[string]string{"b": str, "a": ""}, json.RawMessage(`{"x": [1, 2]}`)
		}
		docs = append(docs, d)
	}
	docs = append(docs, jsonDoc{}) // nil slices and maps: null
	for i, d := range docs {
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Encode(d)
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		if utf8.ValidString(d.S) && string(got) != string(want) {
			t.Fatalf("doc %d: Encode = %s;\nencoding/json %s", i, got, want)
		}
		if !utf8.ValidString(d.S) {
			// The one difference (see JSON): the same value, its
			// replacement characters written as UTF-8, not escaped.
			if string(got) == string(want) || strings.ReplaceAll(string(got), "\ufffd", `\ufffd`) != string(want) {
				t.Fatalf("doc %d: Encode = %s;\nencoding/json %s", i, got, want)
			}
			sameDecode(t, s, got)
		}
		app, err := AppendEncode(s, []byte("prefix"), d)
		if err != nil || string(app) != "prefix"+string(got) {
			t.Fatalf("doc %d: AppendEncode = %s, %v", i, app, err)
		}
		sameDecode(t, s, want)
	}
	for _, in := range []string{
		`{"S":"case-insensitive","NAME":"n","unknown":{"deep":[1,2,{"x":null}]},"i":-9223372036854775808}`,
		`{"s":"dup","s":"last wins"}`,
		`{"i":9223372036854775808}`, // overflow
		`{"i":1.5}`, `{"i":"1"}`, `{"str":"12"}`, `{"str":12}`, `{"u":-1}`, `{"f":1e400}`,
		`{"s":"\ud800"}`, `{"s":"\u00e9\n"}`, "{\"s\":\"\xff\"}",
		``, `{`, `}`, `{"s":}`, `{"s":"x"} trailing`, `[1,2]`, `null`, `{"s":"x",}`, `{'s':'x'}`, `{"s":nul}`,
		`{"b":"not base64!"}`, `{"b":"aGk="}`, `{"list":"x"}`, `{"m":{"a":"1"}}`, strings.Repeat("[", 20000),
	} {
		sameDecode(t, s, []byte(in))
	}
}

// sameDecode checks that JSON decodes in as encoding/json does: the same
// value, or an error (wrapping ErrDecode) where it errs.
func sameDecode[T any](t *testing.T, s Serde[T], in []byte) {
	t.Helper()
	var want T
	werr := json.Unmarshal(in, &want)
	got, err := s.Decode(in)
	switch {
	case werr != nil && err == nil:
		t.Errorf("Decode(%.60q) = %+v; encoding/json: %v", in, got, werr)
	case werr == nil && err != nil:
		t.Errorf("Decode(%.60q): %v; encoding/json decodes it", in, err)
	case err != nil && !errors.Is(err, ErrDecode):
		t.Errorf("Decode(%.60q): %v does not wrap ErrDecode", in, err)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Errorf("Decode(%.60q) = %+v;\nencoding/json %+v", in, got, want)
	}
}

// TestJSONEncodeErrors: values encoding/json refuses are refused, with
// ErrEncode, never a panic.
func TestJSONEncodeErrors(t *testing.T) {
	if _, err := JSON[float64]().Encode(math.NaN()); !errors.Is(err, ErrEncode) {
		t.Errorf("NaN: %v", err)
	}
	if _, err := AppendEncode(JSON[float64](), nil, math.Inf(1)); !errors.Is(err, ErrEncode) {
		t.Errorf("Inf: %v", err)
	}
	if _, err := JSON[chan int]().Encode(make(chan int)); !errors.Is(err, ErrEncode) {
		t.Errorf("chan: %v", err)
	}
	type loop struct{ Next *loop }
	l := &loop{}
	l.Next = l
	if _, err := JSON[*loop]().Encode(l); !errors.Is(err, ErrEncode) {
		t.Errorf("cycle: %v", err)
	}
}

// TestJSONKeepsItsID: savepoints name a store's serde by ID; moving JSON
// onto another library must not change it.
func TestJSONKeepsItsID(t *testing.T) {
	if id := ID(JSON[jsonInner]()); id != "serde.jsonSerde[github.com/sluice-streams/sluice/serde.jsonInner]" {
		t.Errorf("ID %s", id)
	}
}

// FuzzJSONMatchesEncodingJSON decodes arbitrary bytes with JSON and with
// encoding/json: both fail, or both give the same value, which then
// encodes to the same bytes.
func FuzzJSONMatchesEncodingJSON(f *testing.F) {
	f.Add([]byte(`{"s":"x","i":1,"name":"n","m":{"b":1,"a":2},"list":["\u2028"]}`))
	f.Add([]byte(`{"S":"<&>","F":1e21,"any":[{"k":null}]}`))
	f.Add([]byte("{\"s\":\"\xff\"}"))
	s := JSON[jsonDoc]()
	f.Fuzz(func(t *testing.T, in []byte) { sameRoundTrip(t, s, in) })
}

// sameRoundTrip checks that s decodes in as encoding/json does and, if it
// decodes, encodes the value to encoding/json's bytes.
func sameRoundTrip[T any](t *testing.T, s Serde[T], in []byte) {
	t.Helper()
	sameDecode(t, s, in)
	if v, err := s.Decode(in); err == nil {
		want, werr := json.Marshal(v)
		got, err := s.Encode(v)
		if (werr == nil) != (err == nil) || string(got) != string(want) {
			t.Errorf("Encode(%+v) = %s, %v; encoding/json %s, %v", v, got, err, want, werr)
		}
	}
}
