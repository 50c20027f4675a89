package ops

import (
	"bytes"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
)

// TestKVQuery reads a key-value store the erased way, as interactive
// queries do: keys from their text form, of every length, and keys and
// values decoded from the store's bytes.
func TestKVQuery(t *testing.T) {
	if KVQuery[string, int64](nil, serde.Int64) != nil || KVQuery[string, int64](serde.String, nil) != nil {
		t.Fatal("a query without serdes")
	}
	q := KVQuery(serde.String, serde.Int64)
	for _, k := range testkeys.All() {
		kb, err := q.KeyFromText(k)
		if err != nil || !bytes.Equal(kb, []byte(k)) {
			t.Fatalf("string key of %d bytes: %x, %v", len(k), kb, err)
		}
		back, err := q.Key(kb)
		if err != nil || back != k {
			t.Fatalf("string key of %d bytes came back as %q, %v", len(k), back, err)
		}
	}
	vb, _ := serde.Int64.Encode(-7)
	if v, err := q.Value(vb); err != nil || v != int64(-7) {
		t.Fatalf("value %v, %v", v, err)
	}
	if _, err := q.Value([]byte("x")); err == nil {
		t.Fatal("a bad value decoded")
	}

	bq := KVQuery(serde.Bytes, serde.Bytes)
	for _, k := range testkeys.All() {
		if kb, err := bq.KeyFromText(k); err != nil || !bytes.Equal(kb, []byte(k)) {
			t.Fatalf("[]byte key of %d bytes: %x, %v", len(k), kb, err)
		}
	}

	nq := KVQuery(serde.Int64, serde.Int64)
	kb, err := nq.KeyFromText("-42")
	if want, _ := serde.Int64.Encode(-42); err != nil || !bytes.Equal(kb, want) {
		t.Fatalf("int64 key: %x, %v", kb, err)
	}
	if _, err := nq.KeyFromText("forty-two"); err == nil {
		t.Fatal("an int64 key from text that is not JSON")
	}

	type pair struct{ A, B string }
	jq := KVQuery(serde.JSON[pair](), serde.Int64)
	kb, err = jq.KeyFromText(`{"A":"x","B":"y"}`)
	if want, _ := serde.JSON[pair]().Encode(pair{"x", "y"}); err != nil || !bytes.Equal(kb, want) {
		t.Fatalf("struct key: %s, %v", kb, err)
	}
}
