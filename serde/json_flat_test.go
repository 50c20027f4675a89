package serde

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

// jsonFlat is a flat struct (json_flat.go): every field kind the fast
// path takes, with and without tags and omitempty, and fields JSON skips.
type jsonFlat struct {
	ID int64 `json:"id"`
	flatBase
	FlatMore

	Small  int8         `json:"small"`
	Mid    int16        `json:"mid,omitempty"`
	N32    int32        // no tag: the Go name, matched case-insensitively by the general path
	N      int          `json:"n,omitempty"`
	S      string       `json:"s"`
	Opt    string       `json:"opt,omitempty"`
	OK     bool         `json:"ok"`
	Maybe  bool         `json:"maybe,omitempty"`
	Price  json.Number  `json:"price"`
	F      float64      `json:"f"`
	F32    float32      `json:"f32,omitempty"`
	Loc    flatPoint    `json:"loc,omitempty"` // a struct is never empty
	Ref    *flatPoint   `json:"ref,omitempty"`
	Nil    *flatPoint   `json:"nil"`
	At     time.Time    `json:"at,omitempty"` // a struct: never empty
	Tags   []string     `json:"tags"`
	Nums   []int32      `json:"nums,omitempty"`
	Pts    []flatPoint  `json:"pts"`
	Refs   []*flatPoint `json:"refs,omitempty"`
	Kind   flatName     `json:"kind"`
	Skip   string       `json:"-"`
	hidden int
}

type flatName string // a named type without methods qualifies

// Embedded structs' fields are promoted, where they are embedded,
// whether the struct's type is exported or not.
type flatBase struct {
	Seq   int64  `json:"seq"`
	Topic string `json:"topic,omitempty"`
	inner int
}

type FlatMore struct {
	Part int32
}

// flatPoint is a struct in a struct, by value and by pointer.
type flatPoint struct {
	X, Y  float64
	Label string `json:"label,omitempty"`
}

type flatNode struct { // contains itself: the general path
	V    int64
	Next *flatNode
}

type flatTaggedEmbed struct {
	FlatMore `json:"more"` // a field named more, not promoted fields
}

type flatShadowed struct {
	FlatMore
	Part int64 // shadows FlatMore's by depth
}

type textInt int // with methods it does not: it may encode itself

func (t textInt) MarshalText() ([]byte, error) { return []byte("t"), nil }

func TestJSONFlatQualifies(t *testing.T) {
	if flatCodecFor(reflect.TypeFor[jsonFlat]()) == nil {
		t.Fatal("jsonFlat does not take the fast path")
	}
	for name, typ := range map[string]reflect.Type{
		"embedded": reflect.TypeFor[jsonDoc](),
		",string": reflect.TypeFor[struct {
			N int64 `json:"n,string"`
		}](),
		"omitzero": reflect.TypeFor[struct {
			N int64 `json:"n,omitzero"`
		}](),
		"methods":    reflect.TypeFor[struct{ T textInt }](),
		"own codec":  reflect.TypeFor[json.RawMessage](),
		"complex":    reflect.TypeFor[struct{ C complex128 }](),
		"uint":       reflect.TypeFor[struct{ U uint32 }](),
		"pointer":    reflect.TypeFor[*jsonFlat](),
		"not struct": reflect.TypeFor[int64](),
		"fold case": reflect.TypeFor[struct {
			A int64 `json:"x"`
			B int64 `json:"X"`
		}](),
		"odd name": reflect.TypeFor[struct {
			A int64 `json:"a-b"`
		}](),
		"embedded pointer":    reflect.TypeFor[struct{ *FlatMore }](),
		"tagged embedded":     reflect.TypeFor[flatTaggedEmbed](),
		"shadowed":            reflect.TypeFor[flatShadowed](),
		"embedded non-struct": reflect.TypeFor[struct{ flatName }](),
		"recursive":           reflect.TypeFor[flatNode](),
		"bytes":               reflect.TypeFor[struct{ B []byte }](),
		"slice of slices":     reflect.TypeFor[struct{ S [][]int64 }](),
		"array":               reflect.TypeFor[struct{ A [3]int64 }](),
		"map":                 reflect.TypeFor[struct{ M map[string]int64 }](),
		"slice not flat":      reflect.TypeFor[struct{ D []jsonDoc }](),
		"slice of methods":    reflect.TypeFor[struct{ T []textInt }](),
		"nested not flat":     reflect.TypeFor[struct{ D jsonDoc }](),
		"pointer not flat":    reflect.TypeFor[struct{ D *jsonDoc }](),
		"pointer to pointer":  reflect.TypeFor[struct{ P **flatPoint }](),
	} {
		if flatCodecFor(typ) != nil {
			t.Errorf("%s (%v) takes the fast path", name, typ)
		}
	}
}

// TestJSONFlatMatchesEncodingJSON is TestJSONMatchesEncodingJSON for a
// flat struct, and checks that the fast path, not the general one, is
// what encodes and decodes the common shapes.
func TestJSONFlatMatchesEncodingJSON(t *testing.T) {
	s := JSON[jsonFlat]()
	c := flatCodecFor(reflect.TypeFor[jsonFlat]())
	nums := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 1 << 53, 999999999999999999, 1000000000000000000, -1000000000000000000}
	floats := []float64{0, math.Copysign(0, -1), 1, -1.5, 0.1, 1e-6, 9.99e-7, 1e-7, 123456789.125, 1e20, 1e21, 1.5e300,
		math.MaxFloat64, math.SmallestNonzeroFloat64, math.MaxFloat32, math.SmallestNonzeroFloat32, 1.0 / 3, 2.5e-9, math.NaN(), math.Inf(-1)}
	floats32 := []float32{0, 1, -1.5, 0.1, 1e-6, 9.99e-7, 1e20, 1e21, math.MaxFloat32, math.SmallestNonzeroFloat32, 1.0 / 3}
	times := []time.Time{{}, time.Unix(0, 0).UTC(), time.Unix(1700000000, 123456789).UTC(), time.Unix(1700000000, 120000000).In(time.FixedZone("X", 5400)),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("Y", -3600)), time.Unix(1, 0).In(time.FixedZone("Z", 59)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} // refused by both
	prices := []json.Number{"0", "-12.5", "206761.588", "7", "1e21", "", "12345678901234567890", "-0.001"}
	// The strings the fast path encodes: valid UTF-8 without control
	// characters or U+2028/U+2029 (json_flat.go).
	fastString := func(s string) bool {
		return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x2028 || r == 0x2029 })
	}
	fastEncodes, fastDecodes := 0, 0
	strs := append(jsonStrings(), testkeys.All()...) // every length, UUIDs
	for i, str := range strs {
		d := jsonFlat{ID: nums[i%len(nums)], flatBase: flatBase{Seq: int64(i), Topic: []string{"", "t", "<&>"}[i%3], inner: i}, FlatMore: FlatMore{Part: int32(i)}, Small: int8(i * 37), Mid: int16(i % 3 * 1000), N32: int32(-i), N: i % 2,
			S: str, Opt: str, OK: i%2 == 0, Maybe: i%3 == 0, Price: prices[i%len(prices)], Kind: flatName(str), Skip: "skip", hidden: i}
		d.F, d.F32 = floats[i%len(floats)], floats32[i%len(floats32)]
		d.At = times[i%len(times)]
		switch i % 4 {
		case 1:
			d.Tags, d.Nums, d.Pts, d.Refs = []string{}, []int32{}, []flatPoint{}, []*flatPoint{}
		case 2:
			d.Tags, d.Nums = []string{str}, []int32{int32(i), -1, 0}
			d.Pts, d.Refs = []flatPoint{{X: 1}, {Y: -2, Label: "p"}}, []*flatPoint{nil, {X: 3}}
		case 3:
			d.Tags, d.Pts = []string{"a", "<b>", str, ""}, []flatPoint{{}}
		}
		d.Loc = flatPoint{X: float64(i), Y: -d.F, Label: str}
		if i%3 != 0 {
			d.Ref = &flatPoint{X: 0.5, Label: []string{"", "<ref>"}[i%2]}
		}
		want, err := json.Marshal(d)
		if err != nil { // NaN or infinity: refused by both
			if _, err := s.Encode(d); !errors.Is(err, ErrEncode) {
				t.Fatalf("doc %d: Encode: %v; encoding/json refuses it", i, err)
			}
			if _, ok := c.appendValue(nil, unsafe.Pointer(&d)); ok {
				t.Fatalf("doc %d: the fast path encodes what encoding/json refuses", i)
			}
			continue
		}
		got, err := s.Encode(d)
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		if utf8.ValidString(str) && string(got) != string(want) {
			t.Fatalf("doc %d: Encode = %s;\nencoding/json %s", i, got, want)
		}
		if app, err := AppendEncode(s, []byte("prefix"), d); err != nil || string(app) != "prefix"+string(got) {
			t.Fatalf("doc %d: AppendEncode = %s, %v", i, app, err)
		}
		_, simplePrice := scanDecimal(string(d.Price))
		simplePrice = simplePrice && !strings.Contains(string(d.Price), "e")
		b, ok := c.appendValue([]byte("p"), unsafe.Pointer(&d))
		switch {
		case ok && string(b) != "p"+string(want):
			t.Fatalf("doc %d: fast path %s;\nencoding/json %s", i, b, want)
		case ok != (fastString(str) && simplePrice):
			t.Errorf("doc %d (%q, price %q): fast path %v", i, str, d.Price, ok)
		case ok:
			fastEncodes++
		}
		sameDecode(t, s, want)
		var v jsonFlat
		if c.decode(want, unsafe.Pointer(&v)) {
			fastDecodes++
		} else if simplePrice {
			t.Errorf("doc %d: %s not decoded by the fast path", i, want)
		}
	}
	if fastEncodes < 20 || fastDecodes < len(strs)/2 { // not a vacuous run
		t.Errorf("fast path encoded %d and decoded %d values", fastEncodes, fastDecodes)
	}
	for _, in := range []string{
		`{}`, ` { "id" : 1 , "s" : "x" } `, "{\"s\":\"tab\\t\\n\\r\\b\\f\\/\\\\\\\"\",\"id\":-0}",
		`{"s":"\u00e9\u2028\u0000\u0041"}`, `{"s":"\ud83c\udf89"}`, `{"s":"\ud800"}`, `{"s":"\udc00x"}`, "{\"s\":\"\x01\"}",
		"{\"s\":\"\xff\"}", "{\"s\":\"gr\xc3\xbc\xc3\"}", `{"s":"a\u00"}`, `{"s":"\uZZZZ"}`, `{"s":"\a"}`, `{"s":"x\`,
		`{"id":1.5}`, `{"id":01}`, `{"id":-}`, `{"id":-0}`, `{"id":1e3}`, `{"id":9223372036854775807}`, `{"id":9223372036854775808}`,
		`{"id":-9223372036854775808}`, `{"id":-9223372036854775809}`, `{"id":00000000000000000001}`, `{"id":1234567890123456789}`,
		`{"id":12345678901234567890}`, `{"small":127}`, `{"small":128}`, `{"small":-128}`, `{"small":-129}`, `{"mid":40000}`,
		`{"ok":true,"maybe":false}`, `{"ok":tru}`, `{"ok":null}`, `{"ok":1}`, `{"s":null}`, `{"id":"1"}`, `{"s":1}`,
		`{"f":1.5e3,"f32":-0.25}`, `{"f":-0}`, `{"f":1E+2}`, `{"f":1e}`, `{"f":1e400}`, `{"f":1e-400}`, `{"f32":1e39}`, `{"f32":1e-50}`,
		`{"f":.5}`, `{"f":1.}`, `{"f":01.5}`, `{"f":"1"}`, `{"f":NaN}`, `{"f":0.30000000000000004}`, `{"f":123456789012345678901234567890}`,
		`{"loc":{"X":1,"Y":2,"label":"l"},"ref":{"X":3},"nil":null}`, `{"loc":{}}`, `{"loc":null}`, `{"ref":null}`, `{"ref":{}}`,
		`{"loc":{"X":1,"X":2}}`, `{"loc":{"x":1}}`, `{"loc":[1]}`, `{"loc":{"X":1}`, `{"ref":{"X":"1"}}`, `{"ref":nul}`, `{"nil":{"Y":1e400}}`,
		`{"loc":{"X":1},"loc":{"Y":2}}`, `{"ref":{"X":1} , "loc" : { "Y" : 2 } }`,
		`{"at":"2023-11-14T22:13:20Z"}`, `{"at":"2023-11-14T22:13:20.5+01:30"}`, `{"at":"2023-11-14T22:13:20z"}`, `{"at":"2023-11-14 22:13:20Z"}`,
		`{"at":"2023-11-14T24:00:00Z"}`, `{"at":"2023-11-14T22:13:20,5Z"}`, `{"at":null}`, `{"at":"0001-01-01T00:00:00Z"}`, `{"at":"2023-11-14T22:13:20+01:00"}`,
		`{"at":"2023-11-14T22:13:20\u005a"}`, `{"at":1700000000}`, `{"at":""}`, `{"at":"2023-02-30T00:00:00Z"}`, `{"at":"10000-01-01T00:00:00Z"}`,
		`{"tags":[]}`, `{"tags":null}`, `{"tags":["a","b"]}`, `{"tags":["a",]}`, `{"tags":[,]}`, `{"tags":["a" "b"]}`, `{"tags":"a"}`,
		`{"tags":[1]}`, `{"tags":[`, `{"tags":["a"`, `{"tags":[ "a" , "b" ] , "nums" : [ ] }`, `{"nums":[1,2,2147483648]}`, `{"nums":[1.5]}`,
		`{"pts":[{"X":1},{}]}`, `{"pts":[null]}`, `{"refs":[null,{"Y":2}]}`, `{"refs":[{"X":1,"X":2}]}`, `{"tags":["\ud83c\udf89"]}`, `{"tags":["a"],"tags":["b"]}`,
		`{"price":"1.5"}`, `{"price":1e3}`, `{"price":-0.0}`, `{"price":1.}`, `{"price":.5}`, `{"price":"x"}`,
		`{"n32":5}`, `{"N32":5}`, `{"seq":3,"topic":"t","Part":-2}`, `{"flatBase":{"seq":1}}`, `{"FlatMore":{"Part":1}}`, `{"part":2,"inner":1}`, `{"ID":5}`, `{"id":1,"id":2}`, `{"Skip":"x"}`, `{"-":"x"}`, `{"hidden":1}`, `{"other":[1,{"a":2}]}`,
		`{"id":1}x`, `{"id":1,}`, `{,}`, `{"id":1 "s":"x"}`, `{"id"1}`, `{"id":}`, `[{"id":1}]`, `null`, ``, `{`, `{"kind":"k"}`,
	} {
		sameDecode(t, s, []byte(in))
	}
}

// FuzzJSONFlatMatchesEncodingJSON: arbitrary bytes decode as encoding/json
// decodes them into a flat struct, and what decodes encodes back to
// encoding/json's bytes.
func FuzzJSONFlatMatchesEncodingJSON(f *testing.F) {
	f.Add([]byte(`{"id":1,"small":-3,"mid":7,"N32":2,"n":1,"s":"x\u0026y","opt":"o","ok":true,"maybe":true,"price":"1.5","kind":"k"}`))
	f.Add([]byte(`{"price":12.25,"s":"\ud83c\udf89<>","ID":9223372036854775807}`))
	f.Add([]byte("{\"s\":\"\xff\",\"id\":-0}"))
	s := JSON[jsonFlat]()
	f.Fuzz(func(t *testing.T, in []byte) { sameRoundTrip(t, s, in) })
}
