package ops

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
)

var errBad = errors.New("bad")

// picky is a serde of strings that fails on "bad", without an Appender (so
// the arena encoder falls back to Encode).
var picky = serde.Funcs(func(s string) ([]byte, error) {
	if s == "bad" {
		return nil, errBad
	}
	return []byte(s), nil
}, func(b []byte) (string, error) {
	if string(b) == "bad" {
		return "", errBad
	}
	return string(b), nil
})

// sinkEntry links SinkTyped(n, ks, vs) to send, checking the frame.
func sinkEntry[K, V any](t *testing.T, ks serde.Serde[K], vs serde.Serde[V], send func(k, v []byte) error) func(K, V) error {
	t.Helper()
	n := &exec.Node{Name: "sink"}
	f := &exec.Frame{}
	entry := SinkTyped(n, ks, vs).Sink(f, &exec.Arena{}, send).(func(K, V) error)
	return func(k K, v V) error {
		f.Node, f.Class = nil, ""
		err := entry(k, v)
		if f.Node != n || f.Class != exec.Production {
			t.Fatalf("frame names %v/%v, not the sink", f.Node, f.Class)
		}
		return err
	}
}

// sourceEntry links SourceTyped(n, ks, vs) to emit, checking the frame.
func sourceEntry[K, V any](t *testing.T, ks serde.Serde[K], vs serde.Serde[V], emit func(K, V) error) func(kb, vb []byte) error {
	t.Helper()
	n := &exec.Node{Name: "source"}
	f := &exec.Frame{}
	ty := SourceTyped(n, ks, vs)
	if ty.Link(f, nil, func(int, int) error { return nil }) != nil {
		t.Fatal("source linked to an entry of other types")
	}
	entry := ty.Link(f, nil, emit).(func(kb, vb []byte) error)
	return func(kb, vb []byte) error {
		f.Node, f.Class = nil, ""
		err := entry(kb, vb)
		if f.Node != n || f.Class != exec.Deserialization {
			t.Fatalf("frame names %v/%v, not the source", f.Node, f.Class)
		}
		return err
	}
}

// TestCodecEveryKeyLength: keys of every encoded length (and UUIDs) come
// out of the erased and the typed sink as the serde's own bytes, with an
// appending serde (arena) and without, and decode back to themselves
// through the erased and the typed source.
func TestCodecEveryKeyLength(t *testing.T) {
	for _, s := range []struct {
		name string
		s    serde.Serde[string]
	}{{"appender", serde.String}, {"encode", picky}} {
		t.Run(s.name, func(t *testing.T) {
			if _, ok := s.s.(serde.Appender[string]); ok != (s.name == "appender") {
				t.Fatalf("serde %s: Appender %v", s.name, ok)
			}
			enc := Encoder(s.s, s.s)
			a := &exec.Arena{}
			var sent [][2][]byte
			sink := sinkEntry(t, s.s, s.s, func(k, v []byte) error { sent = append(sent, [2][]byte{k, v}); return nil })
			dec, tdec := Decoder(s.s, s.s), TombstoneDecoder(s.s, s.s)
			var got []string
			src := sourceEntry(t, s.s, s.s, func(k, v string) error { got = append(got, k, v); return nil })
			for i, k := range testkeys.All() {
				v := testkeys.Len(i%(testkeys.MaxLen+1), 1)
				want, _ := s.s.Encode(k)
				wantV, _ := s.s.Encode(v)
				kb, vb, err := enc(a, k, v)
				if err != nil || !bytes.Equal(kb, want) || !bytes.Equal(vb, wantV) {
					t.Fatalf("Encoder(%q, %q) = %q, %q, %v", k, v, kb, vb, err)
				}
				if s.name == "appender" && len(kb) > 0 && cap(kb) != len(kb) {
					t.Fatalf("arena key of %d bytes has capacity %d: an append would reach the next", len(kb), cap(kb))
				}
				if err := sink(k, v); err != nil {
					t.Fatal(err)
				}
				if last := sent[len(sent)-1]; !bytes.Equal(last[0], want) || !bytes.Equal(last[1], wantV) {
					t.Fatalf("SinkTyped(%q, %q) sent %q, %q", k, v, last[0], last[1])
				}
				kb2, vb2, err := enc(a, k, exec.Tombstone)
				if err != nil || !bytes.Equal(kb2, want) || vb2 != nil {
					t.Fatalf("Encoder(%q, tombstone) = %q, %q, %v, want a null value", k, kb2, vb2, err)
				}
				for _, d := range []func(k, v []byte) (any, any, error){dec, tdec} {
					dk, dv, err := d(kb, vb)
					if err != nil || dk != k || dv != v {
						t.Fatalf("decoding %q, %q: %v, %v, %v", kb, vb, dk, dv, err)
					}
				}
				if err := src(kb, vb); err != nil || got[len(got)-2] != k || got[len(got)-1] != v {
					t.Fatalf("SourceTyped(%q, %q): %v, %q", kb, vb, err, got[len(got)-2:])
				}
				dk, dv, err := tdec(kb, nil)
				if err != nil || dk != k || dv != exec.Tombstone {
					t.Fatalf("TombstoneDecoder(%q, nil) = %v, %v, %v, want a tombstone", kb, dk, dv, err)
				}
			}
			if acc := Accepts(tdec); !acc([]byte("k"), nil) || !acc([]byte("k"), []byte("v")) {
				t.Fatal("Accepts refused a record its decoder decodes")
			}
			// An empty value is a value, not a delete.
			if _, dv, err := tdec([]byte("k"), []byte{}); err != nil || dv != "" {
				t.Fatalf("TombstoneDecoder of an empty value: %v, %v", dv, err)
			}
		})
	}
}

// TestCodecErrorsNameTheHalf: every encode and decode path says whether
// the key or the value failed, and wraps the serde's error.
func TestCodecErrorsNameTheHalf(t *testing.T) {
	a := &exec.Arena{}
	enc, dec, tdec := Encoder(picky, picky), Decoder(picky, picky), TombstoneDecoder(picky, picky)
	sink := sinkEntry(t, picky, picky, func(k, v []byte) error { t.Fatal("sent a record that failed"); return nil })
	src := sourceEntry(t, picky, picky, func(k, v string) error { t.Fatal("emitted a record that failed"); return nil })
	check := func(what, half string, err error) {
		t.Helper()
		if !errors.Is(err, errBad) || !strings.HasPrefix(err.Error(), half+": ") {
			t.Errorf("%s: %v, want %q wrapping the serde's error", what, err, half+": ")
		}
	}
	for _, c := range []struct{ k, v, half string }{{"bad", "ok", "key"}, {"ok", "bad", "value"}, {"bad", "bad", "key"}} {
		_, _, err := enc(a, c.k, c.v)
		check("Encoder", c.half, err)
		check("SinkTyped", c.half, sink(c.k, c.v))
		_, _, err = Encode(ArenaEncoder(picky), ArenaEncoder(picky), a, c.k, c.v)
		check("Encode", c.half, err)
		_, _, err = dec([]byte(c.k), []byte(c.v))
		check("Decoder", c.half, err)
		_, _, err = tdec([]byte(c.k), []byte(c.v))
		check("TombstoneDecoder", c.half, err)
		check("SourceTyped", c.half, src([]byte(c.k), []byte(c.v)))
		_, _, err = Decode(picky, picky, []byte(c.k), []byte(c.v))
		check("Decode", c.half, err)
	}
	if acc := Accepts(tdec); acc([]byte("bad"), nil) || acc([]byte("ok"), []byte("bad")) {
		t.Error("Accepts took a record its decoder fails on")
	}
	_, _, err := enc(a, "bad", exec.Tombstone)
	check("Encoder of a tombstone", "key", err)
	_, _, err = tdec([]byte("bad"), nil)
	check("TombstoneDecoder of a tombstone", "key", err)
}

// TestPayloadTime: the user's extractor gets the typed record; a
// tombstone keeps its record's time without calling it.
func TestPayloadTime(t *testing.T) {
	ex := PayloadTime(func(k string, v int64, ts int64) int64 { return int64(len(k)) + v + ts })
	for i, k := range testkeys.All() {
		if got := ex(k, int64(i), 1000); got != int64(len(k)+i+1000) {
			t.Fatalf("extract(%q, %d) = %d", k, i, got)
		}
	}
	calls := 0
	ex = PayloadTime(func(string, int64, int64) int64 { calls++; return 0 })
	if got := ex("k", exec.Tombstone, 42); got != 42 || calls != 0 {
		t.Fatalf("extract of a tombstone = %d after %d calls, want 42 after none", got, calls)
	}
}
