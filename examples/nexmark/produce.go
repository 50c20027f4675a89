package nexmark

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record is e as a Kafka record for topics, stamped with ts (the
// producer's time: the event time travels in dateTime, and a record
// stamped with an event time long past would be deleted by a broker's
// time-based retention).
func (e Event) Record(topics Topics, ts time.Time) *kgo.Record {
	return &kgo.Record{Topic: e.Topic(topics), Key: e.Key(), Value: e.Value(), Timestamp: ts}
}

// Write produces events to topics with cl. In a transactional client each
// batch of up to batch events is one transaction, and after every abortEvery
// committed batches (0: never) a transaction of decoys is aborted: copies
// of the next events with every field a query reads changed (prices,
// categories, states, sellers), which a consumer reading read_committed
// must never see. It returns once every record is acknowledged.
func Write(ctx context.Context, cl *kgo.Client, topics Topics, events []Event, batch, abortEvery int) error {
	var mu sync.Mutex
	var perr error
	promise := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && perr == nil {
			perr = err
		}
	}
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return perr
	}
	if !transactional(cl) {
		for _, e := range events {
			cl.Produce(ctx, e.Record(topics, time.Now()), promise)
		}
		if err := cl.Flush(ctx); err != nil {
			return fmt.Errorf("nexmark: produce: %w", err)
		}
		if err := failed(); err != nil {
			return fmt.Errorf("nexmark: produce: %w", err)
		}
		return nil
	}
	batch = max(batch, 1)
	run := func(evs []Event, commit bool) error {
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("nexmark: begin transaction: %w", err)
		}
		for _, e := range evs {
			cl.Produce(ctx, e.Record(topics, time.Now()), promise)
		}
		if err := cl.Flush(ctx); err != nil {
			return fmt.Errorf("nexmark: produce: %w", err)
		}
		if err := failed(); err != nil {
			return fmt.Errorf("nexmark: produce: %w", err)
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			return fmt.Errorf("nexmark: end transaction: %w", err)
		}
		return nil
	}
	for i, n := 0, 0; i < len(events); i, n = i+batch, n+1 {
		evs := events[i:min(i+batch, len(events))]
		if abortEvery > 0 && n%abortEvery == abortEvery-1 {
			if err := run(Decoys(evs), false); err != nil {
				return err
			}
		}
		if err := run(evs, true); err != nil {
			return err
		}
	}
	return nil
}

func transactional(cl *kgo.Client) bool {
	id, _ := cl.OptValue(kgo.TransactionalID).(string)
	return id != ""
}

// Decoys are copies of events changed wherever a query looks: were one
// read, a query's output would differ from the oracle's.
func Decoys(events []Event) []Event {
	out := make([]Event, len(events))
	for i, e := range events {
		switch e.Kind() {
		case KindPerson:
			p := *e.Person
			p.Name, p.State = "Decoy "+p.Name, "OR"
			out[i].Person = &p
		case KindAuction:
			a := *e.Auction
			a.Category, a.Seller, a.Expires = Q3Category, FirstPersonID, a.Expires+1_000_000
			a.ItemName = "decoy"
			out[i].Auction = &a
		default:
			b := *e.Bid
			b.Price, b.Bidder = b.Price*1000+7, b.Bidder+1
			b.Extra = "decoy"
			out[i].Bid = &b
		}
	}
	return out
}
