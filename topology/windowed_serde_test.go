package topology_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// TestWindowedSerdeAppends: a windowed key appended to a buffer (what a
// sink does, serde.Appender) is the bytes Encode returns, after what the
// buffer held, for keys of every length and with key serdes that append and
// that do not; it decodes back; a key that fails to encode fails to append
// and leaves the buffer as it was.
func TestWindowedSerdeAppends(t *testing.T) {
	noAppender := serde.Funcs(func(s string) ([]byte, error) { return []byte(s), nil },
		func(b []byte) (string, error) { return string(b), nil })
	for name, ks := range map[string]serde.Serde[string]{"appends": serde.String, "does not append": noAppender} {
		ws := topology.WindowedSerde(ks)
		ap, ok := ws.(serde.Appender[topology.Windowed[string]])
		if !ok {
			t.Fatal("the windowed serde is not a serde.Appender")
		}
		for _, k := range testkeys.All() {
			w := topology.Windowed[string]{Key: k, Window: window.Bounds{Start: -60_000, End: 1 << 40}}
			want, err := ws.Encode(w)
			if err != nil {
				t.Fatal(err)
			}
			prefix := []byte("held")
			got, err := ap.AppendEncode(bytes.Clone(prefix), w)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, append(prefix, want...)) {
				t.Fatalf("%s: key of %d bytes appended as %x, want %x after the buffer's %x", name, len(k), got, want, prefix)
			}
			back, err := ws.Decode(got[len(prefix):])
			if err != nil || back != w {
				t.Fatalf("%s: key of %d bytes decoded back as %+v, %v", name, len(k), back, err)
			}
		}
	}
	bad := errors.New("no")
	failing := topology.WindowedSerde(serde.Funcs(func(string) ([]byte, error) { return nil, bad },
		func(b []byte) (string, error) { return string(b), nil }))
	buf := []byte("held")
	got, err := failing.(serde.Appender[topology.Windowed[string]]).AppendEncode(buf, topology.Windowed[string]{Key: "k"})
	if !errors.Is(err, bad) || !bytes.Equal(got, buf) {
		t.Fatalf("a failing key: %x, %v; want the buffer unchanged and its error", got, err)
	}
}
