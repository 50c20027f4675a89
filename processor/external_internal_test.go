package processor

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/sink"
)

// TestXIDsFitTheContract: the longest id sluice can make (the widest task
// id, the largest sequence) is within sink.MaxXIDLength and of its
// characters; prefixes of different sinks, apps and tasks differ, and no
// task's prefix is a prefix of another's (task 0_1 against 0_10).
func TestXIDsFitTheContract(t *testing.T) {
	id := task.ID{Sub: math.MaxInt32, Partition: math.MaxInt32}
	xid := xidPrefix("an-application-id-of-some-length", "sink", id) + strings.Repeat("f", 2*xidNonceLen) + "-" + strconv.FormatUint(math.MaxUint64, 36)
	if len(xid) > sink.MaxXIDLength {
		t.Errorf("%q is %d bytes, over %d", xid, len(xid), sink.MaxXIDLength)
	}
	for _, r := range xid {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			t.Errorf("%q has %q", xid, r)
		}
	}
	prefixes := map[string]bool{}
	for _, app := range []string{"a", "b", "a-b"} {
		for _, name := range []string{"s", "b-s", "t"} {
			for _, id := range []task.ID{{Sub: 0, Partition: 1}, {Sub: 0, Partition: 10}, {Sub: 1, Partition: 0}, {Sub: 10, Partition: 0}, {Sub: 1, Partition: 1}} {
				prefixes[xidPrefix(app, name, id)] = true
			}
		}
	}
	for p := range prefixes {
		for q := range prefixes {
			if p != q && strings.HasPrefix(q, p) {
				t.Errorf("prefix %q lists %q's transactions", p, q)
			}
		}
	}
	if len(prefixes) != 3*3*5 {
		t.Errorf("%d distinct prefixes, want %d", len(prefixes), 3*3*5)
	}
}
