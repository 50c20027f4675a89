package ops

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
)

// Decode decodes a record's key and value, naming the half that failed;
// the erased path (Decoder) and typed chains (SourceTyped) share it.
func Decode[K, V any](ks serde.Serde[K], vs serde.Serde[V], kb, vb []byte) (k K, v V, err error) {
	if k, err = ks.Decode(kb); err != nil {
		return k, v, fmt.Errorf("key: %w", err)
	}
	if v, err = vs.Decode(vb); err != nil {
		return k, v, fmt.Errorf("value: %w", err)
	}
	return k, v, nil
}

// Encode encodes a key and a value, naming the half that failed; the
// erased path (Encoder) and typed chains (SinkTyped) share it.
func Encode[K, V any](encK func(*exec.Arena, K) ([]byte, error), encV func(*exec.Arena, V) ([]byte, error), a *exec.Arena, k K, v V) ([]byte, []byte, error) {
	kb, err := encK(a, k)
	if err != nil {
		return nil, nil, fmt.Errorf("key: %w", err)
	}
	vb, err := encV(a, v)
	if err != nil {
		return nil, nil, fmt.Errorf("value: %w", err)
	}
	return kb, vb, nil
}

// ArenaEncoder encodes with s into the arena when s can append (no
// allocation of its own per value), else with its Encode.
func ArenaEncoder[T any](s serde.Serde[T]) func(a *exec.Arena, v T) ([]byte, error) {
	ap, ok := s.(serde.Appender[T])
	if !ok {
		return func(_ *exec.Arena, v T) ([]byte, error) { return s.Encode(v) }
	}
	return func(a *exec.Arena, v T) ([]byte, error) {
		return a.Append(func(dst []byte) ([]byte, error) { return ap.AppendEncode(dst, v) })
	}
}
