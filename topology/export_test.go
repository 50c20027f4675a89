package topology

import "github.com/sluice-streams/sluice/internal/exec"

// Plan is the built plan, for the tests of package topology_test (users
// have no use for it, and the runtimes reach it through exec.BuiltPlan).
func (b *Built) Plan() *exec.Plan { return b.plan }
