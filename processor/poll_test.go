package processor_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// TestSlowProcessingStaysWithinTheTransactionTimeout runs an operator that
// takes 1ms a record over a backlog of 3,000 records with a transaction
// timeout of 2s. One poll can hold the whole backlog, 3s of work: a
// transaction that holds it times out on the broker, aborts, and the
// instance takes the same poll again, forever. The instance must bound
// what it polls by how fast it processes, and get every record through
// exactly once.
func TestSlowProcessingStaysWithinTheTransactionTimeout(t *testing.T) {
	const n = 3000
	addrs := testBrokers(t)
	in, out := uniq(t, "slow-in"), uniq(t, "slow-out")
	setup(t, addrs, 1, in, out)
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("v%05d", i)
	}
	produceTo(t, addrs, in, 0, vs...)

	top := topology.New()
	slow := topology.MapValues(topology.From(top, in, serde.String, serde.String), func(v string) string {
		time.Sleep(time.Millisecond)
		return v
	})
	topology.To(slow, out, serde.String, serde.String)
	app, err := processor.New(top, processor.ApplicationID(uniq(t, "slow")), processor.Brokers(addrs...),
		processor.StateDir(t.TempDir()), processor.TransactionTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(app, func(app *processor.App) bool { return app.Stats().Processed.Load() >= n }); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := app.Stats().Processed.Load(); got != n {
		t.Fatalf("%d records processed in committed transactions, want %d (aborts: %v)", got, n, app.Stats().AbortsByCause())
	}
	seen := map[string]int{}
	for _, v := range values(readOutput(t, addrs, out)) {
		seen[v]++
	}
	for _, v := range vs {
		if seen[v] != 1 {
			t.Errorf("%s written %d times, want once", v, seen[v])
		}
	}
}
