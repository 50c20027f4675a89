package processor

import (
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/task"
)

// blockingPipeline is a pipeline on threads goroutines whose runs block
// until release is closed.
func blockingPipeline(threads int) (p *pipeline, release chan struct{}) {
	p, release = newPipeline(&member{a: &App{}}, threads), make(chan struct{})
	p.run = func(_ *task.Task, batches [][][]*kgo.Record) (runTotals, error) {
		<-release
		return runTotals{n: len(batches[0][0])}, nil
	}
	return p, release
}

// TestPipelineRoomWakesWhenARunBegins: the loop waits in room while a
// task's batch waits for its goroutine, and must be woken when the
// goroutine takes the batch, not only when the run ends. Left asleep, the
// loop polls again only after the whole run: the tasks process one at a
// time, as in CI's failed run of TestPipelineKeepsEachTaskItsOwn. Then
// room lets the next poll take what the bound leaves beside the batch.
func TestPipelineRoomWakesWhenARunBegins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, release := blockingPipeline(1)
		// The state add leaves behind it, with its goroutine not yet
		// begun (add's own `go p.work()` could begin before room waits).
		const limit, batch = 10, 4
		q := &queue{id: task.ID{Partition: 0}, t: &task.Task{}, batches: [][][]*kgo.Record{{make([]*kgo.Record, batch)}}}
		p.queued[q.id], p.ready = q, []*queue{q}
		p.pending, p.running = batch, 1
		type roomAnswer struct {
			n   int
			err error
		}
		roomed := make(chan roomAnswer, 1)
		go func() {
			n, err := p.room(limit)
			roomed <- roomAnswer{n, err}
		}()
		synctest.Wait() // the loop waits in room
		select {
		case <-roomed:
			t.Fatal("room returned with a poll's records waiting for a goroutine")
		default:
		}
		go p.work()
		synctest.Wait() // the run has begun and blocks
		select {
		case r := <-roomed:
			if r.err != nil || r.n != limit-batch {
				t.Fatalf("room: %d records, %v; want %d, no error", r.n, r.err, limit-batch)
			}
		default:
			t.Error("room still waits while the task's run is under way: the loop polls again only after the run")
		}
		close(release)
		if err := p.drain(); err != nil {
			t.Fatalf("drain: %v", err)
		}
		if p.running != 0 || p.pending != 0 || len(p.queued) != 0 {
			t.Errorf("after drain: running %d, pending %d, %d queued", p.running, p.pending, len(p.queued))
		}
	})
}

// TestPipelineRoomBoundsTheRecordsInHand: records running count against
// the poll bound as much as queued ones. Every record polled is processed
// before the transaction ends, so a loop that polled a full bound again
// beside a run of a full bound would end its transaction after twice the
// time the bound allows (TestSlowProcessingStaysWithinTheTransactionTimeout
// was fenced that way).
func TestPipelineRoomBoundsTheRecordsInHand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, release := blockingPipeline(2)
		const limit = 10
		p.add(task.ID{Partition: 0}, &task.Task{}, [][]*kgo.Record{make([]*kgo.Record, limit)})
		roomed := make(chan int, 1)
		go func() {
			n, _ := p.room(limit)
			roomed <- n
		}()
		synctest.Wait() // the run has begun and blocks; room waits or returned
		select {
		case n := <-roomed:
			t.Fatalf("room let a poll of %d records go beside a run of %d, the bound", n, limit)
		default:
		}
		close(release)
		synctest.Wait()
		select {
		case n := <-roomed:
			if n != limit {
				t.Errorf("room after the run: %d records, want %d", n, limit)
			}
		default:
			t.Error("room still waits after the run ended")
		}
		if err := p.drain(); err != nil {
			t.Fatal(err)
		}
	})
}
