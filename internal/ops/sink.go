package ops

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
)

// Encoder is a sink's exec.Node Encode: ks and vs encode key and value, a
// tombstone becomes a Kafka null value.
func Encoder[K, V any](ks serde.Serde[K], vs serde.Serde[V]) func(a *exec.Arena, k, v any) ([]byte, []byte, error) {
	encK, encV := ArenaEncoder(ks), ArenaEncoder(vs)
	return func(a *exec.Arena, k, v any) ([]byte, []byte, error) {
		if v == exec.Tombstone {
			kb, err := encK(a, k.(K))
			if err != nil {
				return nil, nil, fmt.Errorf("key: %w", err)
			}
			return kb, nil, nil // Kafka null
		}
		return Encode(encK, encV, a, k.(K), v.(V))
	}
}

// SinkTyped is the Typed of sink n, which encodes with ks and vs.
func SinkTyped[K, V any](n *exec.Node, ks serde.Serde[K], vs serde.Serde[V]) *exec.Typed {
	encK, encV := ArenaEncoder(ks), ArenaEncoder(vs)
	return &exec.Typed{Sink: func(f *exec.Frame, a *exec.Arena, send func(k, v []byte) error) any {
		return func(k K, v V) error {
			f.At(n, exec.Production)
			kb, vb, err := Encode(encK, encV, a, k, v)
			if err != nil {
				return err
			}
			return send(kb, vb)
		}
	}}
}
