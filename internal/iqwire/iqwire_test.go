package iqwire

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

// TestPathKeyRoundTrips: every key, of every length and any bytes, the
// empty one included, survives the path segment and DecodeB64, and never
// makes an empty segment (which no route matches).
func TestPathKeyRoundTrips(t *testing.T) {
	keys := testkeys.Bytes()
	for _, k := range testkeys.All() {
		keys = append(keys, []byte(k))
	}
	for _, k := range keys {
		seg := PathKey(k)
		if seg == "" || url.PathEscape(seg) != seg {
			t.Fatalf("key of %d bytes: segment %q", len(k), seg)
		}
		got, err := DecodeB64(seg)
		if err != nil || !bytes.Equal(got, k) {
			t.Errorf("key of %d bytes: %x %v, want %x", len(k), got, err, k)
		}
		// Standard, padded base64 is accepted too.
		if got, err := DecodeB64(base64.StdEncoding.EncodeToString(k)); err != nil || !bytes.Equal(got, k) {
			t.Errorf("key of %d bytes, standard base64: %x %v", len(k), got, err)
		}
	}
}
