package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/txn"
)

// The paced run: a scenario's job, started on a fresh broker with an empty
// input, is fed at a fixed rate, and every input record's end-to-end latency
// is measured: from the time it was due to be produced to the time the
// output derived from it became visible to a read_committed consumer.
//
// Latency is taken from when a record was due, not from when the producer got
// to it, so a producer that falls behind does not hide the delay it causes
// (the coordinated-omission correction of wrk2). The record's timestamp is
// that due time.
//
// Which input records an output covers is worked out per key, because every
// paced job keeps each key's order: the pipe and the stateless job emit one
// output per input, so the n-th output of a key covers its n-th input; the
// count job emits the key's running count n, which covers its first n inputs
// — several at once when inputs were folded within one commit, and each of
// them became visible then.

// covers says which of its key's inputs an output record covers: upTo is the
// number of the key's inputs the output accounts for, counted from the
// first, or -1 for the next one.
type covers func(out *kgo.Record) (key string, upTo int, err error)

// oneEach is covers for jobs with one output per input.
func oneEach(out *kgo.Record) (string, int, error) { return string(out.Key), -1, nil }

// runningCount is covers for the count job: its value is the key's count in
// decimal.
func runningCount(out *kgo.Record) (string, int, error) {
	n, err := strconv.Atoi(string(out.Value))
	if err != nil {
		return "", 0, fmt.Errorf("count output %q=%q: %w", out.Key, out.Value, err)
	}
	return string(out.Key), n, nil
}

// Latency is a paced run's measurement.
type Latency struct {
	Rate    float64 // records per second asked for
	Records int
	P50     time.Duration
	P99     time.Duration
	Max     time.Duration
}

// probeKey is the key of the record that shows the job is running before
// the paced input starts; its output is not measured.
const probeKey = "probe"

func runPaced(ctx context.Context, cfg Config, sc scenario, g txn.Guarantee) (Latency, error) {
	addrs, stopBroker, err := startBroker(ctx, cfg)
	if err != nil {
		return Latency{}, err
	}
	defer stopBroker()
	n := int(float64(cfg.Rate) * cfg.PacedFor.Seconds())
	if n < 1 {
		return Latency{}, fmt.Errorf("bench: paced run of %v at %d records/s has no records", cfg.PacedFor, cfg.Rate)
	}
	recs, _ := sc.input(n, rand.New(rand.NewPCG(5, 6)))
	interval := float64(time.Second) / float64(cfg.Rate)
	// due[key] lists the due offsets from the start of the key's inputs,
	// in order; read-only once the run starts.
	due := map[string][]time.Duration{}
	for i, r := range recs {
		due[string(r.Key)] = append(due[string(r.Key)], time.Duration(float64(i)*interval))
	}

	dir, err := os.MkdirTemp("", "sluice-bench-paced-")
	if err != nil {
		return Latency{}, err
	}
	defer os.RemoveAll(dir)
	jctx, jobStopped := context.WithCancelCause(ctx)
	defer jobStopped(nil)
	j, err := sc.run(ctx, cfg.env(addrs, g, dir), func(err error) {
		jobStopped(fmt.Errorf("bench: the job stopped: %v", err))
	})
	if err != nil {
		return Latency{}, err
	}
	lat, err := pace(jctx, addrs, cfg.Rate, recs, due, sc.covers)
	if err != nil && context.Cause(jctx) != nil {
		err = context.Cause(jctx)
	}
	if serr := j.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return Latency{}, err
	}
	slices.Sort(lat)
	return Latency{
		Rate: float64(cfg.Rate), Records: len(lat),
		P50: lat[len(lat)/2], P99: lat[(len(lat)*99+99)/100-1], Max: lat[len(lat)-1],
	}, nil
}

// pace produces recs at rate once a probe record has gone through the job,
// and returns the latency of each.
func pace(ctx context.Context, addrs []string, rate int, recs []*kgo.Record, due map[string][]time.Duration, cov covers) ([]time.Duration, error) {
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	read, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer read.Close()

	var prodErr atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			prodErr.CompareAndSwap(nil, &err)
		}
	}
	prod.Produce(ctx, &kgo.Record{Topic: "in", Key: []byte(probeKey), Value: []byte("probe")}, promise)

	// The reader: waits for the probe's output, then hands the job the
	// start time through started and measures until every input is
	// covered.
	lat := make([]time.Duration, 0, len(recs))
	var t0 time.Time
	covered := map[string]int{}
	probed := false
	var pacer sync.WaitGroup
	defer pacer.Wait()
	pctx, stopPacer := context.WithCancel(ctx)
	defer stopPacer()
	startPacer := func() {
		t0 = time.Now()
		pacer.Go(func() {
			for i := 0; i < len(recs); {
				due := min(len(recs), int(time.Since(t0).Seconds()*float64(rate))+1)
				for ; i < due; i++ {
					r := recs[i]
					r.Timestamp = t0.Add(time.Duration(float64(i) * float64(time.Second) / float64(rate)))
					prod.Produce(pctx, r, promise)
				}
				select {
				case <-pctx.Done():
					return
				case <-time.After(time.Millisecond):
				}
			}
		})
	}
	probeDeadline := time.Now().Add(2 * time.Minute)
	var deadline time.Time // set once pacing starts
	for len(lat) < len(recs) {
		if p := prodErr.Load(); p != nil {
			return nil, fmt.Errorf("bench: producing the paced input: %w", *p)
		}
		now := time.Now()
		if !probed && now.After(probeDeadline) {
			return nil, fmt.Errorf("bench: the probe record had no output after 2m")
		}
		if probed && now.After(deadline) {
			return nil, fmt.Errorf("bench: %d of %d paced records had an output at the deadline", len(lat), len(recs))
		}
		fctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fs := read.PollFetches(fctx)
		cancel()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		seen := time.Now()
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if ferr == nil && !isTimeout(err) {
				ferr = err
			}
		})
		if ferr != nil {
			return nil, fmt.Errorf("bench: reading the paced output: %w", ferr)
		}
		for it := fs.RecordIter(); !it.Done(); {
			out := it.Next()
			key, upTo, err := cov(out)
			if err != nil {
				return nil, err
			}
			if key == probeKey {
				if !probed {
					probed = true
					startPacer()
					deadline = t0.Add(time.Duration(len(recs))*time.Second/time.Duration(rate) + time.Minute)
				}
				continue
			}
			if !probed {
				return nil, fmt.Errorf("bench: output %q before the paced input started", key)
			}
			times := due[key]
			if upTo < 0 {
				upTo = covered[key] + 1
			}
			if upTo > len(times) {
				return nil, fmt.Errorf("bench: an output of key %q covers %d inputs; %d were produced", key, upTo, len(times))
			}
			for i := covered[key]; i < upTo; i++ {
				lat = append(lat, seen.Sub(t0.Add(times[i])))
			}
			covered[key] = max(covered[key], upTo)
		}
	}
	return lat, nil
}

func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
