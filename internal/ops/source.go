package ops

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
)

// Decoder is a source's exec.Node Decode: ks and vs decode key and value.
func Decoder[K, V any](ks serde.Serde[K], vs serde.Serde[V]) func(k, v []byte) (any, any, error) {
	return func(kb, vb []byte) (any, any, error) {
		k, v, err := Decode(ks, vs, kb, vb)
		if err != nil {
			return nil, nil, err
		}
		return k, v, nil
	}
}

// TombstoneDecoder is Decoder for topics where a null value is a delete:
// repartition topics (a stream's tombstones) and table sources.
func TombstoneDecoder[K, V any](ks serde.Serde[K], vs serde.Serde[V]) func(k, v []byte) (any, any, error) {
	dec := Decoder(ks, vs)
	return func(kb, vb []byte) (any, any, error) {
		if vb != nil {
			return dec(kb, vb)
		}
		k, err := ks.Decode(kb)
		if err != nil {
			return nil, nil, fmt.Errorf("key: %w", err)
		}
		return k, exec.Tombstone, nil
	}
}

// SourceTyped is the Typed of source n, which decodes with ks and vs: its
// records start a typed chain. Only for a source whose timestamp does not
// need the decoded record (not exec.PayloadTime).
func SourceTyped[K, V any](n *exec.Node, ks serde.Serde[K], vs serde.Serde[V]) *exec.Typed {
	return Chain(func(f *exec.Frame, emit func(K, V) error) func(kb, vb []byte) error {
		return func(kb, vb []byte) error {
			f.At(n, exec.Deserialization)
			k, v, err := Decode(ks, vs, kb, vb)
			if err != nil {
				return err
			}
			return emit(k, v)
		}
	})
}

// PayloadTime is a source's exec.Node Extract for the user's timestamp
// extractor fn.
func PayloadTime[K, V any](fn func(K, V, int64) int64) func(k, v any, ts int64) int64 {
	return func(k, v any, ts int64) int64 {
		if v == exec.Tombstone {
			return ts // a table's delete has no payload: its record's time
		}
		return fn(k.(K), v.(V), ts)
	}
}

// Accepts reports whether dec decodes a record: a table source's
// SourceAccepts, so that its store keeps only what processing would.
func Accepts(dec func(k, v []byte) (any, any, error)) func(k, v []byte) bool {
	return func(k, v []byte) bool { _, _, err := dec(k, v); return err == nil }
}
