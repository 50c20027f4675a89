package processor

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The sender is tested here with a produce function of the test's own in
// place of the client, to hold a record in flight at will; every run of a
// job goes through it for real (the integration and chaos tests).

// senderRecord is record i of sender s, for a test that reads both back.
func senderRecord(s, i int) *kgo.Record {
	return &kgo.Record{Partition: int32(s), Offset: int64(i)}
}

// TestSenderKeepsEachSendersOrder sends from two goroutines at once, more
// records than the queue holds, and checks that the client got every
// record, each goroutine's in the order it sent them, and every promise.
func TestSenderKeepsEachSendersOrder(t *testing.T) {
	var got []*kgo.Record // only the sender's goroutine appends
	s := newSender(func(r *kgo.Record, promise func(*kgo.Record, error)) {
		got = append(got, r)
		promise(r, nil)
	})
	s.start()
	const senders, each = 2, 3*maxQueued + 7
	var promised [senders]int
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				s.send(senderRecord(g, i), func(*kgo.Record, error) { promised[g]++ })
			}
		})
	}
	wg.Wait()
	s.directSends()
	n := len(got) // read after directSends: the goroutine is idle
	s.stop()
	if n != senders*each {
		t.Fatalf("the client got %d records after directSends, want %d", n, senders*each)
	}
	next := [senders]int64{}
	for _, r := range got {
		if r.Offset != next[r.Partition] {
			t.Fatalf("sender %d's record %d reached the client when its record %d was next", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
	}
	for g, p := range promised {
		if p != each {
			t.Errorf("sender %d: %d promises called, want %d", g, p, each)
		}
	}
}

// TestSenderDirectSendsWaitsForTheRecordInFlight holds the client's
// produce of one record: directSends must wait for it, though nothing else
// is queued, since the commit sequence goes on to end the transaction; and
// for a record queued behind it.
func TestSenderDirectSendsWaitsForTheRecordInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		var produced []int64
		s := newSender(func(r *kgo.Record, _ func(*kgo.Record, error)) {
			if r.Offset == 0 {
				<-release
			}
			produced = append(produced, r.Offset)
		})
		s.start()
		defer s.stop()
		defer unblock() // before stop, should the test fail with record 0 held
		s.send(senderRecord(0, 0), nil)
		synctest.Wait() // the goroutine holds record 0, the queue is empty
		direct := make(chan struct{})
		go func() { s.directSends(); close(direct) }()
		synctest.Wait()
		select {
		case <-direct:
			t.Fatal("directSends returned while the client's produce of a record was in flight")
		default:
		}
		s.send(senderRecord(0, 1), nil) // queued behind it
		unblock()
		<-direct
		if len(produced) != 2 || produced[0] != 0 || produced[1] != 1 {
			t.Fatalf("when directSends returned the client had %v, want [0 1]", produced)
		}
	})
}

// TestSenderDirectSendsProduceOnTheSender checks that between directSends
// and queueSends a send returns only once the client took the record (the
// commit sequence ends the transaction once its flushes return), and that
// after queueSends it returns at once again.
func TestSenderDirectSendsProduceOnTheSender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		s := newSender(func(*kgo.Record, func(*kgo.Record, error)) { <-release })
		s.start()
		defer s.stop()
		defer unblock()
		s.directSends()
		sent := make(chan struct{})
		go func() { s.send(senderRecord(0, 0), nil); close(sent) }()
		synctest.Wait()
		select {
		case <-sent:
			t.Fatal("after directSends a send returned before the client took its record")
		default:
		}
		unblock()
		<-sent
		s.queueSends()
		release = make(chan struct{})
		unblock = sync.OnceFunc(func() { close(release) })
		s.send(senderRecord(0, 1), nil) // returns with the client's produce held
		unblock()
	})
}

// TestSenderBoundsItsQueue holds the client's produce: a send past
// maxQueued records waiting must wait too, and go on once the goroutine
// takes the queue.
func TestSenderBoundsItsQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		s := newSender(func(r *kgo.Record, _ func(*kgo.Record, error)) {
			if r.Offset == 0 {
				<-release
			}
		})
		s.start()
		defer s.stop()
		s.send(senderRecord(0, 0), nil)
		synctest.Wait() // the goroutine holds record 0, the queue is empty
		for i := range maxQueued {
			s.send(senderRecord(0, 1+i), nil)
		}
		sent := make(chan struct{})
		go func() { s.send(senderRecord(0, 1+maxQueued), nil); close(sent) }()
		synctest.Wait()
		select {
		case <-sent:
			t.Fatalf("a send went on with %d records queued", maxQueued)
		default:
		}
		close(release)
		<-sent
		s.directSends()
	})
}

// TestSenderStops checks that stop hands the client what is queued, ends
// the goroutine, may be called again, and that a send after it reaches
// the client at once.
func TestSenderStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		closed := errors.New("client closed")
		release := make(chan struct{})
		var errs []error
		s := newSender(func(r *kgo.Record, promise func(*kgo.Record, error)) {
			if r.Offset == 0 {
				<-release
			}
			promise(r, closed)
		})
		s.start()
		promise := func(_ *kgo.Record, err error) { errs = append(errs, err) }
		s.send(senderRecord(0, 0), promise)
		synctest.Wait()
		s.send(senderRecord(0, 1), promise)
		stopped := make(chan struct{})
		go func() { s.stop(); close(stopped) }()
		synctest.Wait()
		close(release)
		<-stopped
		if len(errs) != 2 {
			t.Fatalf("stop returned with %d of 2 promises called", len(errs))
		}
		s.stop()
		s.send(senderRecord(0, 2), promise)
		if len(errs) != 3 {
			t.Fatal("a send after stop did not reach the client")
		}
	})
}
