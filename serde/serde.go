package serde

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ErrDecode is wrapped by every decoding error.
var ErrDecode = errors.New("serde: cannot decode")

// ErrEncode is wrapped by every encoding error.
var ErrEncode = errors.New("serde: cannot encode")

// Serde encodes values of T to bytes and decodes them back.
type Serde[T any] interface {
	Encode(v T) ([]byte, error)
	Decode(b []byte) (T, error)
}

// Appender is implemented by serdes that can encode into a buffer the caller
// owns. The runtime uses it to encode store keys into a reused buffer and
// output records into shared chunks, instead of allocating per value.
type Appender[T any] interface {
	// AppendEncode appends the encoding of v to dst, as Encode would
	// return it.
	AppendEncode(dst []byte, v T) ([]byte, error)
}

// AppendEncode appends the encoding of v by s to dst: through s's Appender
// when it has one, else by appending what Encode returns.
func AppendEncode[T any](s Serde[T], dst []byte, v T) ([]byte, error) {
	if a, ok := s.(Appender[T]); ok {
		return a.AppendEncode(dst, v)
	}
	b, err := s.Encode(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// Funcs makes a Serde from two functions.
func Funcs[T any](enc func(T) ([]byte, error), dec func([]byte) (T, error)) Serde[T] {
	return funcs[T]{enc, dec}
}

type funcs[T any] struct {
	enc func(T) ([]byte, error)
	dec func([]byte) (T, error)
}

func (f funcs[T]) Encode(v T) ([]byte, error) { return f.enc(v) }
func (f funcs[T]) Decode(b []byte) (T, error) { return f.dec(b) }

// String is UTF-8 text. Decoding rejects invalid UTF-8 rather than passing
// replacement characters on, so a wrong-format input is caught at the source.
var String Serde[string] = stringSerde{}

type stringSerde struct{}

func (stringSerde) Encode(v string) ([]byte, error) {
	if !utf8.ValidString(v) {
		return nil, fmt.Errorf("%w: string is not valid UTF-8", ErrEncode)
	}
	return []byte(v), nil
}

func (stringSerde) AppendEncode(dst []byte, v string) ([]byte, error) {
	if !utf8.ValidString(v) {
		return dst, fmt.Errorf("%w: string is not valid UTF-8", ErrEncode)
	}
	return append(dst, v...), nil
}

func (stringSerde) Decode(b []byte) (string, error) {
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%w: string is not valid UTF-8", ErrDecode)
	}
	return string(b), nil
}

// Bytes passes bytes through unchanged (and uncopied).
var Bytes Serde[[]byte] = bytesSerde{}

type bytesSerde struct{}

func (bytesSerde) Encode(v []byte) ([]byte, error) { return v, nil }
func (bytesSerde) Decode(b []byte) ([]byte, error) { return b, nil }

// Int64 is an 8-byte big-endian integer, Kafka's LongSerializer format; its
// byte order sorts like the numbers for non-negative values.
var Int64 Serde[int64] = int64Serde{}

type int64Serde struct{}

func (int64Serde) Encode(v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(v)), nil
}

func (int64Serde) AppendEncode(dst []byte, v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(dst, uint64(v)), nil
}

func (int64Serde) Decode(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: int64 needs 8 bytes, got %d", ErrDecode, len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// Int64Text is an integer in decimal text ("42"), readable by kcat and any
// console consumer.
var Int64Text Serde[int64] = int64Text{}

type int64Text struct{}

func (int64Text) Encode(v int64) ([]byte, error) {
	return strconv.AppendInt(make([]byte, 0, 20), v, 10), nil
}

func (int64Text) AppendEncode(dst []byte, v int64) ([]byte, error) {
	return strconv.AppendInt(dst, v, 10), nil
}

func (int64Text) Decode(b []byte) (int64, error) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: int64 text: %v", ErrDecode, err)
	}
	return n, nil
}

// Exact is implemented by a serde whose Encode never fails and whose
// Decode returns exactly the value encoded, whatever the value: Int64 and
// Int64Text. A runtime may keep such values decoded between records where
// it would otherwise encode them at once (the windows a transaction opens,
// held in memory), with the same results: no error it would have met
// earlier, no value the bytes would have changed.
type Exact interface {
	ExactRoundTrip()
}

func (int64Serde) ExactRoundTrip() {}
func (int64Text) ExactRoundTrip()  {}

// Identified is implemented by a serde that names its encoding. The name
// is recorded in savepoints beside each store (ID), so that a topology
// started from a savepoint whose store's serde changed is refused unless it
// migrates the store (topology.MigrateStore). Give a serde a new ID when its
// bytes change meaning: "bill/json/v2".
type Identified interface {
	SerdeID() string
}

// ID is the identity of serde s: its SerdeID if it is Identified, else its
// Go type ("serde.int64Serde", "serde.jsonSerde[examples.Bill]"). Two
// serdes built by Funcs share a type: give them SerdeIDs to tell them
// apart.
func ID(s any) string {
	if s == nil {
		return ""
	}
	if id, ok := s.(Identified); ok {
		return id.SerdeID()
	}
	return fmt.Sprintf("%T", s)
}
