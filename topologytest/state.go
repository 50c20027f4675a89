package topologytest

import (
	"fmt"

	"github.com/sluice-streams/sluice/store"
)

// KeyedState returns the named keyed state of the topology (a ValueSpec,
// ListSpec, MapSpec, ReducingSpec or AggregatingSpec), as the typed handle
// its spec's View makes:
//
//	seen, err := topologytest.KeyedState(d, seenSpec) // *topology.KeyedValue[string, int64]
//
// Reads see the committed state. Under a TTL they judge expiry by the
// clock stored with the state, which is the task's stream time when it last
// read or stamped one of the state's entries, not by the task's current
// stream time; they never delete the expired entries they find.
func KeyedState[H any](d *Driver, spec interface {
	Name() string
	View(*store.Staged) H
}) (H, error) {
	if err := d.settle(); err != nil {
		var none H
		return none, err
	}
	tk := d.byStore[spec.Name()]
	if tk == nil {
		var none H
		return none, fmt.Errorf("topologytest: no store %q", spec.Name())
	}
	return spec.View(tk.Store(spec.Name())), nil
}
