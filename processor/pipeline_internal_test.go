package processor

import (
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/task"
)

// TestPipelineRoomWakesWhenARunBegins: the loop waits in room while a
// task's batch waits for its goroutine, and must be woken when the
// goroutine takes the batch, not only when the run ends. The batch is as
// large as a poll, so the loop also waits while it is queued. Left asleep,
// the loop polls again only after the whole run: the tasks process one at
// a time, as in CI's failed run of TestPipelineKeepsEachTaskItsOwn.
func TestPipelineRoomWakesWhenARunBegins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeline(&member{a: &App{}}, 1)
		release := make(chan struct{})
		p.run = func(_ *task.Task, batches [][][]*kgo.Record) (runTotals, error) {
			<-release
			return runTotals{n: len(batches[0][0])}, nil
		}
		// The state add leaves behind it, with its goroutine not yet
		// begun (add's own `go p.work()` could begin before room waits).
		const limit = 10
		q := &queue{id: task.ID{Partition: 0}, t: &task.Task{}, batches: [][][]*kgo.Record{{make([]*kgo.Record, limit)}}}
		p.queued[q.id], p.ready = q, []*queue{q}
		p.waiting, p.pending, p.running = limit, limit, 1
		roomed := make(chan error, 1)
		go func() { roomed <- p.room(limit) }()
		synctest.Wait() // the loop waits in room
		select {
		case <-roomed:
			t.Fatal("room returned with a poll's records waiting for a goroutine")
		default:
		}
		go p.work()
		synctest.Wait() // the run has begun and blocks
		select {
		case err := <-roomed:
			if err != nil {
				t.Fatalf("room: %v", err)
			}
		default:
			t.Error("room still waits while the task's run is under way: the loop polls again only after the run")
		}
		close(release)
		if err := p.drain(); err != nil {
			t.Fatalf("drain: %v", err)
		}
		if p.running != 0 || p.waiting != 0 || p.pending != 0 || len(p.queued) != 0 {
			t.Errorf("after drain: running %d, waiting %d, pending %d, %d queued", p.running, p.waiting, p.pending, len(p.queued))
		}
	})
}
