package layout

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
)

// TestTableOpEveryLength lays out operations with values of every length
// and splits them back.
func TestTableOpEveryLength(t *testing.T) {
	vals := testkeys.Bytes()
	for i, nb := range vals {
		ob := vals[(i*11+5)%len(vals)]
		for _, c := range []struct {
			flag   byte
			old, n []byte
		}{{TableOpSub, ob, nil}, {TableOpAdd, nil, nb}, {TableOpBoth, ob, nb}} {
			b := append(append(AppendTableOpHead(nil, c.flag, len(c.old)), c.old...), c.n...)
			flag, old, n, err := ParseTableOp(b)
			if err != nil || flag != c.flag || !bytes.Equal(old, c.old) || !bytes.Equal(n, c.n) {
				t.Fatalf("flag %d, old of %d bytes, new of %d: came back as %d, %x, %x, %v", c.flag, len(c.old), len(c.n), flag, old, n, err)
			}
		}
	}
	for _, b := range [][]byte{nil, {}, {3}, {0xff}, {TableOpBoth}, {TableOpBoth, 5, 'a'}, {TableOpBoth, 0x80}} {
		if _, _, _, err := ParseTableOp(b); !errors.Is(err, serde.ErrDecode) {
			t.Fatalf("%x: %v, want serde.ErrDecode", b, err)
		}
	}
}
