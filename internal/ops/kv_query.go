package ops

import (
	"encoding/json"
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
)

// KVQuery is the erased read side of a key-value store (exec.StoreQuery),
// nil without serdes (the DSL reports that when it registers the store).
func KVQuery[K, V any](ks serde.Serde[K], vs serde.Serde[V]) *exec.StoreQuery {
	if ks == nil || vs == nil {
		return nil
	}
	return &exec.StoreQuery{
		KeyFromText: KeyFromText(ks),
		Key:         func(b []byte) (any, error) { return ks.Decode(b) },
		Value:       func(b []byte) (any, error) { return vs.Decode(b) },
	}
}

// KeyFromText parses the text form of a key: the text itself for string and
// []byte keys, JSON otherwise (a number for int64 keys, an object for
// struct keys). Its error names topology, the package whose stores the
// user queries.
func KeyFromText[K any](ks serde.Serde[K]) func(string) ([]byte, error) {
	return func(text string) ([]byte, error) {
		var k K
		switch p := any(&k).(type) {
		case *string:
			*p = text
		case *[]byte:
			*p = []byte(text)
		default:
			if err := json.Unmarshal([]byte(text), &k); err != nil {
				return nil, fmt.Errorf("topology: key %q is not the JSON of a %T: %w", text, k, err)
			}
		}
		return ks.Encode(k)
	}
}
