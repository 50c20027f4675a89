package serde

import (
	"encoding"
	stdjson "encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	jsonv2 "github.com/go-json-experiment/json"
)

// The fast path of JSON for flat structs: a struct whose JSON fields
// (its own, and those of the structs it embeds) are all integers, floats,
// strings, booleans, encoding/json.Number, time.Time, structs of such
// fields (by value or by pointer, not containing themselves), or slices
// of any of these, is encoded and decoded here, without the general
// machinery, in the common shapes; any other shape goes to the general
// path, which decides it exactly as before. Records of events and rows
// (a bid, a page view, a bill) are such structs, and JSON was most of the
// CPU of the jobs that carry them.
//
// The encoder writes what the general path writes, byte for byte, for
// every value whose strings are valid UTF-8 without control characters
// or U+2028/U+2029, whose floats are finite, whose Numbers are plain
// decimals and whose times' years are 0 to 9999; it hands any other
// value to the general path. The decoder takes an object of the struct's
// own field names, each at most once, in any order, with strings whose
// escapes are the simple ones (no surrogates), plain integers within the
// field's size, numbers within a float's range, true or false, RFC 3339
// times without escapes, objects for structs, arrays for slices and null
// for pointers and slices; anything else (another spelling of a name, an
// unknown field, null elsewhere, a fraction for an integer, malformed
// input) goes to the general path, from a zero value.
// TestJSONFlatMatchesEncodingJSON and FuzzJSONFlatMatchesEncodingJSON
// hold both paths to encoding/json.
//
// Fields are reached through their offsets (package unsafe): a struct
// qualifies only if every field's kind is one of those, so each load
// and store is of the field's own representation.

type flatKind uint8

const (
	flatInt flatKind = iota
	flatString
	flatBool
	flatNumber // encoding/json.Number: a string holding a number literal
	flatFloat  // float32 or float64 (size)
	flatStruct // a struct of the fast path's fields (sub)
	flatPtr    // a pointer to one (sub, of elem)
	flatTime   // time.Time: its RFC 3339 text, as its MarshalJSON writes it
	flatSlice  // a slice of any of these but slices and bytes (item, of typ)
)

type flatField struct {
	name      string // the JSON name
	key       string // `"name":`
	off       uintptr
	size      uintptr // of the value: an integer's or float's width, a slice element's stride
	kind      flatKind
	omitEmpty bool
	sub       *flatCodec   // of a struct or a pointer's struct
	elem      reflect.Type // the struct a pointer points to
	item      *flatField   // a slice's elements (their kind, size, sub...)
	typ       reflect.Type // the slice type
}

// sliceHeader is a slice's representation.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// flatCodec encodes and decodes one struct type.
type flatCodec struct {
	fields []flatField
}

var flatCodecs sync.Map // reflect.Type → *flatCodec (nil: the type does not qualify)

// flatCodecFor is t's flat codec, or nil if t does not qualify.
func flatCodecFor(t reflect.Type) *flatCodec {
	if c, ok := flatCodecs.Load(t); ok {
		return c.(*flatCodec)
	}
	c := newFlatCodec(t, map[reflect.Type]bool{})
	flatCodecs.Store(t, c)
	return c
}

var (
	numberType = reflect.TypeFor[stdjson.Number]()
	timeType   = reflect.TypeFor[time.Time]()
	// Types with any of these methods encode or decode themselves.
	ownCodecs = []reflect.Type{
		reflect.TypeFor[stdjson.Marshaler](), reflect.TypeFor[stdjson.Unmarshaler](),
		reflect.TypeFor[encoding.TextMarshaler](), reflect.TypeFor[encoding.TextUnmarshaler](),
		reflect.TypeFor[jsonv2.MarshalerTo](), reflect.TypeFor[jsonv2.UnmarshalerFrom](),
	}
)

func hasOwnCodec(t reflect.Type) bool {
	for _, m := range ownCodecs {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return true
		}
	}
	return false
}

// newFlatCodec builds t's codec; within holds the struct types it is
// being built inside, so that a type that contains itself (through a
// pointer) goes to the general path.
func newFlatCodec(t reflect.Type, within map[reflect.Type]bool) *flatCodec {
	if t.Kind() != reflect.Struct || hasOwnCodec(t) || within[t] {
		return nil
	}
	within[t] = true
	defer delete(within, t)
	c := &flatCodec{}
	if !c.addFields(t, 0, map[string]bool{}, within) || len(c.fields) > 64 {
		return nil
	}
	return c
}

// addFields adds the JSON fields of struct type t, at offset base in the
// value, to c, in encoding/json's order (an embedded struct's fields
// where it is embedded); false if t does not qualify.
func (c *flatCodec) addFields(t reflect.Type, base uintptr, names map[string]bool, within map[reflect.Type]bool) bool {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, tagged := sf.Tag.Lookup("json")
		if sf.Anonymous {
			// An untagged embedded struct's fields are promoted;
			// other embeddings (pointers, tags, other kinds) take
			// encoding/json's rules: the general path.
			if tagged || sf.Type.Kind() != reflect.Struct || !c.addFields(sf.Type, base+sf.Offset, names, within) {
				return false
			}
			continue
		}
		if !sf.IsExported() || tag == "-" {
			continue
		}
		f := flatField{name: sf.Name, off: base + sf.Offset, size: sf.Type.Size()}
		if tagged {
			name, opts, _ := strings.Cut(tag, ",")
			switch opts {
			case "":
			case "omitempty":
				f.omitEmpty = true
			default:
				return false // ,string, omitzero and the rest
			}
			if name != "" {
				f.name = name
			}
		}
		// Names that need quoting, or that fold together (which
		// encoding/json resolves by depth and tags).
		if !plainName(f.name) || names[strings.ToLower(f.name)] {
			return false
		}
		names[strings.ToLower(f.name)] = true
		if !f.setType(sf.Type, within) {
			return false
		}
		f.key = `"` + f.name + `":`
		c.fields = append(c.fields, f)
	}
	return true
}

// setType sets f's kind (and size, sub, elem, item, typ) for a value of
// type ft; false if ft does not qualify.
func (f *flatField) setType(ft reflect.Type, within map[reflect.Type]bool) bool {
	f.size = ft.Size()
	switch {
	case ft == numberType:
		f.kind = flatNumber
	case ft == timeType:
		f.kind = flatTime
	case ft.NumMethod() > 0 || reflect.PointerTo(ft).NumMethod() > 0:
		return false // a named type with methods may encode itself
	case ft.Kind() == reflect.String:
		f.kind = flatString
	case ft.Kind() == reflect.Bool:
		f.kind = flatBool
	case ft.Kind() >= reflect.Int && ft.Kind() <= reflect.Int64:
		f.kind = flatInt
	case ft.Kind() == reflect.Float32 || ft.Kind() == reflect.Float64:
		f.kind = flatFloat
	case ft.Kind() == reflect.Struct:
		if f.kind, f.sub = flatStruct, newFlatCodec(ft, within); f.sub == nil {
			return false
		}
	case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
		if f.kind, f.elem, f.sub = flatPtr, ft.Elem(), newFlatCodec(ft.Elem(), within); f.sub == nil {
			return false
		}
	case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Slice:
		// ([]byte is base64 in JSON: its elements are not a kind here.)
		f.kind, f.typ, f.item = flatSlice, ft, &flatField{}
		return f.item.setType(ft.Elem(), within)
	default:
		return false
	}
	return true
}

// plainName: letters, digits and '_', which every encoder writes as they
// are and every decoder matches as they are.
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// appendValue appends the JSON of the struct at p to dst, or returns
// ok=false (and dst as it was) if the value needs the general path.
func (c *flatCodec) appendValue(dst []byte, p unsafe.Pointer) (_ []byte, ok bool) {
	start := len(dst)
	sep := byte('{')
	for i := range c.fields {
		f := &c.fields[i]
		fp := unsafe.Add(p, f.off)
		if f.omitEmpty && f.empty(fp) {
			continue
		}
		dst = append(append(dst, sep), f.key...)
		if dst, ok = f.appendTo(dst, fp); !ok {
			return dst[:start], false
		}
		sep = ','
	}
	if sep == '{' {
		return append(dst, '{', '}'), true
	}
	return append(dst, '}'), true
}

// empty says whether the value at fp is what omitempty leaves out: zero,
// false, "", a nil pointer, an empty slice; a struct never is.
func (f *flatField) empty(fp unsafe.Pointer) bool {
	switch f.kind {
	case flatInt:
		return loadInt(fp, f.size) == 0
	case flatBool:
		return !*(*bool)(fp)
	case flatString, flatNumber:
		return *(*string)(fp) == ""
	case flatFloat:
		return loadFloat(fp, f.size) == 0
	case flatPtr:
		return *(*unsafe.Pointer)(fp) == nil
	case flatSlice:
		return (*sliceHeader)(fp).len == 0
	}
	return false
}

// appendTo appends the JSON of the value at fp, or returns ok=false if it
// needs the general path.
func (f *flatField) appendTo(dst []byte, fp unsafe.Pointer) (_ []byte, ok bool) {
	switch f.kind {
	case flatInt:
		return strconv.AppendInt(dst, loadInt(fp, f.size), 10), true
	case flatBool:
		return strconv.AppendBool(dst, *(*bool)(fp)), true
	case flatString:
		return appendFlatString(dst, *(*string)(fp))
	case flatFloat:
		v := loadFloat(fp, f.size)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return dst, false // the general path's error
		}
		return appendFlatFloat(dst, v, int(f.size*8)), true
	case flatNumber:
		s := *(*string)(fp)
		if n, ok := scanDecimal(s); !ok || n != len(s) {
			return dst, false // "" (written as 0), exponents, or invalid
		}
		return append(dst, s...), true
	case flatTime:
		dst = append(dst, '"')
		var err error
		if dst, err = (*time.Time)(fp).AppendText(dst); err != nil {
			return dst, false // a year past 9999: the general path's error
		}
		return append(dst, '"'), true
	case flatStruct:
		return f.sub.appendValue(dst, fp)
	case flatPtr:
		ptr := *(*unsafe.Pointer)(fp)
		if ptr == nil {
			return append(dst, "null"...), true
		}
		return f.sub.appendValue(dst, ptr)
	case flatSlice:
		h := (*sliceHeader)(fp)
		if h.data == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for k := range h.len {
			if k > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = f.item.appendTo(dst, unsafe.Add(h.data, uintptr(k)*f.item.size)); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	}
	return dst, false
}

func loadInt(p unsafe.Pointer, size uintptr) int64 {
	switch size {
	case 1:
		return int64(*(*int8)(p))
	case 2:
		return int64(*(*int16)(p))
	case 4:
		return int64(*(*int32)(p))
	}
	return *(*int64)(p)
}

func loadFloat(p unsafe.Pointer, size uintptr) float64 {
	if size == 4 {
		return float64(*(*float32)(p))
	}
	return *(*float64)(p)
}

func storeFloat(p unsafe.Pointer, size uintptr, v float64) {
	if size == 4 {
		*(*float32)(p) = float32(v)
	} else {
		*(*float64)(p) = v
	}
}

// appendFlatFloat appends f as encoding/json writes a float of bits bits:
// the shortest decimal that reads back as f, in exponent form below 1e-6
// and from 1e21 on (as JavaScript does), its exponent without a leading
// zero.
func appendFlatFloat(dst []byte, f float64, bits int) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1] // e-09 → e-9
			dst = dst[:n-1]
		}
	}
	return dst
}

// scanNumber is the length of the JSON number at the start of b
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?), ok=false if b does not
// start with one.
func scanNumber(b []byte) (n int, ok bool) {
	i, ok := scanDecimal(b)
	if !ok {
		return 0, false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false
		}
	}
	return i, true
}

// storeInt stores n into an integer of size bytes at p, if it fits.
func storeInt(p unsafe.Pointer, size uintptr, n int64) bool {
	switch size {
	case 1:
		if int64(int8(n)) != n {
			return false
		}
		*(*int8)(p) = int8(n)
	case 2:
		if int64(int16(n)) != n {
			return false
		}
		*(*int16)(p) = int16(n)
	case 4:
		if int64(int32(n)) != n {
			return false
		}
		*(*int32)(p) = int32(n)
	default:
		*(*int64)(p) = n
	}
	return true
}

// appendFlatString appends s quoted as encoding/json quotes it, for the
// strings whose quoting is certain: valid UTF-8 without control
// characters or U+2028/U+2029 (ok=false for the rest). '"' and '\' are
// escaped with a backslash, and '<', '>' and '&' as \u003c, \u003e and
// \u0026, as encoding/json's HTML-safe default does.
func appendFlatString(dst []byte, s string) (_ []byte, ok bool) {
	dst = append(dst, '"')
	from := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 || r == '\u2028' || r == '\u2029' {
				return dst, false
			}
			i += n
			continue
		}
		var esc string
		switch {
		case c < 0x20:
			return dst, false
		case c == '"':
			esc = `\"`
		case c == '\\':
			esc = `\\`
		case c == '<':
			esc = `\u003c`
		case c == '>':
			esc = `\u003e`
		case c == '&':
			esc = `\u0026`
		default:
			i++
			continue
		}
		dst = append(append(dst, s[from:i]...), esc...)
		i++
		from = i
	}
	return append(append(dst, s[from:]...), '"'), true
}

// scanDecimal is the length of the plain decimal number at the start of
// s (-?(0|[1-9][0-9]*)(\.[0-9]+)?), ok=false if s does not start with
// one.
func scanDecimal[B []byte | string](s B) (n int, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	d := i
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i == d || s[d] == '0' && i-d > 1 {
		return 0, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		f := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		if i == f {
			return 0, false
		}
	}
	return i, true
}

// decode decodes b into the zero struct at p if b has the simple shape
// (see above); ok=false says only that the general path must decide (p
// may then hold some fields).
func (c *flatCodec) decode(b []byte, p unsafe.Pointer) (ok bool) {
	end, ok := c.decodeObject(b, skipJSONSpace(b, 0), p)
	return ok && skipJSONSpace(b, end) == len(b)
}

// decodeObject decodes the object at b[i] into the zero struct at p and
// returns the index past it.
func (c *flatCodec) decodeObject(b []byte, i int, p unsafe.Pointer) (end int, ok bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i = skipJSONSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	var seen uint64
	next := 0 // the field expected next: names usually come in order
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		j := i + 1
		for j < len(b) && b[j] != '"' && b[j] != '\\' {
			j++
		}
		if j >= len(b) || b[j] != '"' {
			return 0, false
		}
		name := b[i+1 : j]
		k := -1
		if next < len(c.fields) && c.fields[next].name == string(name) {
			k = next
		} else {
			for n := range c.fields {
				if c.fields[n].name == string(name) {
					k = n
					break
				}
			}
		}
		if k < 0 || seen&(1<<k) != 0 {
			return 0, false // unknown, another spelling, or repeated
		}
		seen |= 1 << k
		next = k + 1
		i = skipJSONSpace(b, j+1)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = skipJSONSpace(b, i+1)
		f := &c.fields[k]
		if i, ok = f.decodeAt(b, i, unsafe.Add(p, f.off)); !ok {
			return 0, false
		}
		i = skipJSONSpace(b, i)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = skipJSONSpace(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false // also what follows a number: '.', 'e', another digit
		}
	}
}

// decodeAt decodes the value at b[i] into the zero value at fp and
// returns the index past it.
func (f *flatField) decodeAt(b []byte, i int, fp unsafe.Pointer) (end int, ok bool) {
	switch f.kind {
	case flatString:
		s, n, ok := readFlatString(b, i)
		if !ok {
			return 0, false
		}
		*(*string)(fp) = s
		i = n
	case flatInt:
		n, end, ok := readFlatInteger(b, i)
		if !ok || !storeInt(fp, f.size, n) {
			return 0, false
		}
		i = end
	case flatBool:
		switch {
		case hasLiteral(b, i, "true"):
			*(*bool)(fp), i = true, i+4
		case hasLiteral(b, i, "false"):
			i += 5
		default:
			return 0, false
		}
	case flatFloat:
		n, ok := scanNumber(b[i:])
		if !ok {
			return 0, false
		}
		v, err := strconv.ParseFloat(unsafe.String(&b[i], n), int(f.size*8))
		if err != nil {
			return 0, false // out of range: the general path's error
		}
		storeFloat(fp, f.size, v)
		i += n
	case flatNumber:
		n, ok := scanDecimal(b[i:])
		if !ok {
			return 0, false
		}
		*(*string)(fp) = string(b[i : i+n])
		i += n
	case flatTime:
		// Its own strict RFC 3339 parsing, on text without escapes.
		j := i + 1
		for j < len(b) && b[j] != '"' && b[j] != '\\' && b[j] >= 0x20 {
			j++
		}
		if i >= len(b) || b[i] != '"' || j >= len(b) || b[j] != '"' || (*time.Time)(fp).UnmarshalText(b[i+1:j]) != nil {
			return 0, false
		}
		i = j + 1
	case flatStruct:
		if i, ok = f.sub.decodeObject(b, i, fp); !ok {
			return 0, false
		}
	case flatPtr:
		if hasLiteral(b, i, "null") {
			i += 4 // stays nil
			break
		}
		ptr := reflect.New(f.elem).UnsafePointer()
		if i, ok = f.sub.decodeObject(b, i, ptr); !ok {
			return 0, false
		}
		*(*unsafe.Pointer)(fp) = ptr
	case flatSlice:
		if hasLiteral(b, i, "null") {
			return i + 4, true // stays nil
		}
		if i >= len(b) || b[i] != '[' {
			return 0, false
		}
		// A settable slice to grow, which [] leaves empty, not nil.
		v := reflect.New(f.typ).Elem()
		v.Set(reflect.MakeSlice(f.typ, 0, 0))
		i = skipJSONSpace(b, i+1)
		for n := 0; i >= len(b) || b[i] != ']' || n > 0; n++ {
			v.Grow(1)
			v.SetLen(n + 1)
			if i, ok = f.item.decodeAt(b, i, v.Index(n).Addr().UnsafePointer()); !ok {
				return 0, false
			}
			i = skipJSONSpace(b, i)
			if i < len(b) && b[i] == ']' {
				break
			}
			if i >= len(b) || b[i] != ',' {
				return 0, false
			}
			i = skipJSONSpace(b, i+1)
		}
		reflect.NewAt(f.typ, fp).Elem().Set(v)
		i++ // the ']'
	}
	return i, true
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// readFlatInteger reads the integer at b[i]: -?(0|[1-9][0-9]*) within int64.
func readFlatInteger(b []byte, i int) (n int64, end int, ok bool) {
	neg := i < len(b) && b[i] == '-'
	j := i
	if neg {
		j++
	}
	d := j
	var u uint64
	for j < len(b) && '0' <= b[j] && b[j] <= '9' {
		if j-d >= 18 {
			// 19 digits or more: near the limits, strconv decides.
			for j < len(b) && '0' <= b[j] && b[j] <= '9' {
				j++
			}
			if b[d] == '0' {
				return 0, 0, false
			}
			n, err := strconv.ParseInt(string(b[i:j]), 10, 64)
			return n, j, err == nil
		}
		u = u*10 + uint64(b[j]-'0')
		j++
	}
	if j == d || b[d] == '0' && j-d > 1 {
		return 0, 0, false
	}
	if neg {
		return -int64(u), j, true
	}
	return int64(u), j, true
}

// readFlatString reads the string at b[i] if its escapes are the simple ones
// and its bytes valid UTF-8 without control characters.
func readFlatString(b []byte, i int) (s string, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	j := i + 1
	ascii := true
	for j < len(b) && b[j] != '"' && b[j] != '\\' {
		if b[j] < 0x20 {
			return "", 0, false
		}
		ascii = ascii && b[j] < utf8.RuneSelf
		j++
	}
	if j >= len(b) {
		return "", 0, false
	}
	if b[j] == '"' {
		if !ascii && !utf8.Valid(b[i+1:j]) {
			return "", 0, false
		}
		return string(b[i+1 : j]), j + 1, true
	}
	// Escapes: unquote into a new slice.
	out := make([]byte, 0, j-i+16)
	out = append(out, b[i+1:j]...)
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(out) {
				return "", 0, false
			}
			return string(out), j + 1, true
		case c < 0x20:
			return "", 0, false
		case c != '\\':
			ascii = ascii && c < utf8.RuneSelf
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(b) {
			return "", 0, false
		}
		switch e := b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if j+6 > len(b) {
				return "", 0, false
			}
			r, ok := hex4(b[j+2 : j+6])
			if !ok || r >= 0xd800 && r < 0xe000 {
				return "", 0, false // surrogates: the general path pairs or replaces them
			}
			out = utf8.AppendRune(out, rune(r))
			j += 4
		default:
			return "", 0, false
		}
		j += 2
	}
	return "", 0, false
}

// hex4 is the value of four hexadecimal digits.
func hex4(h []byte) (rune, bool) {
	var r rune
	for _, c := range h {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
