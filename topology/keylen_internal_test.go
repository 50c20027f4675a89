package topology

import (
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
)

// TestTableOpSerdeEveryLength round-trips the group operations with values
// of every length, and decodes the one-sided forms written before updates
// in place existed (flag 0: subtract, 1: add).
func TestTableOpSerdeEveryLength(t *testing.T) {
	s := tableOpSerde[string]{serde.String}
	keys := testkeys.All()
	for i, v := range keys {
		old := keys[(i*7+3)%len(keys)]
		for _, op := range []tableOp[string]{{add: true, v: v}, {sub: true, old: old}, {add: true, sub: true, v: v, old: old}} {
			b, err := s.Encode(op)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Decode(b)
			if err != nil || got != op {
				t.Fatalf("%+v came back as %+v, %v", op, got, err)
			}
		}
		if got, err := s.Decode(append([]byte{0}, v...)); err != nil || got != (tableOp[string]{sub: true, old: v}) {
			t.Fatalf("old subtraction decoded as %+v, %v", got, err)
		}
	}
	for _, b := range [][]byte{nil, {3}, {2}, {2, 5, 'a'}, {2, 0x80}} {
		if _, err := s.Decode(b); err == nil {
			t.Fatalf("%q decoded", b)
		}
	}
}
