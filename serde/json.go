package serde

import (
	stdjson "encoding/json"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// JSON encodes T as encoding/json does, byte for byte, and decodes it as
// encoding/json does (field names matched case-insensitively, unknown
// fields ignored, invalid UTF-8 replaced, map keys sorted).
//
// It runs on github.com/go-json-experiment/json, the Go team's prototype
// of encoding/json/v2, in its v1 mode (jsonv1.DefaultOptionsV1): the same
// output and the same accepted inputs, but without encoding/json's
// per-call reflection and its scan of the whole input before decoding it,
// which made JSON most of the cost of a JSON job's records. The type keeps
// its name, so savepoints that name it (ID) still match.
//
// One difference in the bytes, never in the value: a Go string that is
// not valid UTF-8 has each invalid byte replaced by U+FFFD as before, but
// written as UTF-8, where encoding/json writes the escape \ufffd. Strings
// a decoder produced are valid UTF-8 (decoding replaces invalid bytes
// too), so a value read from JSON encodes exactly as before.
//
// A flat struct (integer, float, string, boolean, json.Number and
// time.Time fields, structs of them and slices of all these: the shape of
// most events and rows) takes a faster path in its common shapes, with
// the same bytes and the same values (json_flat.go).
func JSON[T any]() Serde[T] { return jsonSerde[T]{flat: flatCodecFor(reflect.TypeFor[T]())} }

type jsonSerde[T any] struct {
	flat *flatCodec // the fast path of a flat struct (json_flat.go), or nil
}

// jsonOptions are encoding/json's behaviours (see JSON). The prototype's v1
// mode knows its own Number type, not encoding/json's, which it would
// write as a string: encoding/json.Number is handled as the prototype's.
// It decodes a time.Time from its string unescaped, where encoding/json
// hands the raw text to the time's UnmarshalJSON, which refuses escapes:
// a time.Time is decoded by its UnmarshalJSON here too.
var jsonOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(),
	jsonv2.WithMarshalers(jsonv2.MarshalToFunc(func(enc *jsontext.Encoder, n stdjson.Number) error {
		return jsonv1.Number(n).MarshalJSONTo(enc)
	})),
	jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(
		jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, n *stdjson.Number) error {
			m := jsonv1.Number(*n)
			if err := m.UnmarshalJSONFrom(dec); err != nil {
				return err
			}
			*n = stdjson.Number(m)
			return nil
		}),
		jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, t *time.Time) error {
			v, err := dec.ReadValue()
			if err != nil {
				return err
			}
			return t.UnmarshalJSON(v)
		}))))

func (s jsonSerde[T]) Encode(v T) ([]byte, error) {
	if s.flat != nil {
		if b, ok := s.flat.appendValue(make([]byte, 0, 128), unsafe.Pointer(&v)); ok {
			return b, nil
		}
	}
	b, err := jsonv2.Marshal(v, jsonOptions)
	if err != nil {
		return nil, fmt.Errorf("%w: json: %v", ErrEncode, err)
	}
	return b, nil
}

// AppendEncode encodes into dst without a buffer of its own: the runtime
// hands it the chunk an output record or a store key is built in.
func (s jsonSerde[T]) AppendEncode(dst []byte, v T) ([]byte, error) {
	if s.flat != nil {
		if b, ok := s.flat.appendValue(dst, unsafe.Pointer(&v)); ok {
			return b, nil
		}
	}
	w := appendWriter{dst}
	if err := jsonv2.MarshalWrite(&w, v, jsonOptions); err != nil {
		return dst, fmt.Errorf("%w: json: %v", ErrEncode, err)
	}
	return w.b, nil
}

func (s jsonSerde[T]) Decode(b []byte) (T, error) {
	var v T
	if s.flat != nil {
		if s.flat.decode(b, unsafe.Pointer(&v)) {
			return v, nil
		}
		v = *new(T) // the general path starts from zero
	}
	if err := jsonv2.Unmarshal(b, &v, jsonOptions); err != nil {
		var zero T
		return zero, fmt.Errorf("%w: json: %v", ErrDecode, err)
	}
	return v, nil
}

// appendWriter is an io.Writer appending to a slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
