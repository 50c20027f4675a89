package ops

import (
	"fmt"

	"github.com/sluice-streams/sluice/window"
)

// CompleteEvery is the trigger of tumbling count windows given a trigger
// t of one's own: t's decisions, and a firing that purges once the window
// holds n records, so the window still completes every n records and holds
// no more than them.
func CompleteEvery(t window.Trigger, n int64) window.Trigger { return completeEvery{t: t, n: n} }

type completeEvery struct {
	t window.Trigger
	n int64
}

func (c completeEvery) OnElement(tc window.TriggerContext, ts int64) window.TriggerResult {
	r := c.t.OnElement(tc, ts)
	if tc.Count >= c.n {
		r.Fire, r.Purge = true, true
	}
	return r
}

func (c completeEvery) OnEventTime(tc window.TriggerContext) window.TriggerResult {
	return c.t.OnEventTime(tc)
}

func (c completeEvery) OnProcessingTime(tc window.TriggerContext) window.TriggerResult {
	return c.t.OnProcessingTime(tc)
}

func (c completeEvery) String() string { return fmt.Sprintf("%v, purged every %d", c.t, c.n) }
