package topology

import (
	"testing"

	"github.com/sluice-streams/sluice/internal/names"
)

// TestTimeStoreSuffixIsTheRuntimes keeps the public constant, written out so
// that go doc shows its value rather than an internal name, equal to the
// suffix the runtime names the time store with.
func TestTimeStoreSuffixIsTheRuntimes(t *testing.T) {
	if TimeStoreSuffix != names.TimeStoreSuffix {
		t.Fatalf("topology.TimeStoreSuffix %q, names.TimeStoreSuffix %q", TimeStoreSuffix, names.TimeStoreSuffix)
	}
}
