package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/txn"
)

// Each scenario's output is read back (read_committed) after its timed run
// and checked against what its input must give: every count exact. Under
// exactly_once nothing may repeat; under at_least_once a repeat is allowed
// (that is the guarantee) and reported in the note.

// readOut reads topic back, without control records.
func readOut(ctx context.Context, addrs []string, topic string) ([]*kgo.Record, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	recs, err := readback.ReadCommitted(rctx, addrs, topic)
	if err != nil {
		return nil, err
	}
	out := recs[:0]
	for _, r := range recs {
		if !r.Attrs.IsControl() {
			out = append(out, r)
		}
	}
	return out, nil
}

// verifyOnePerInput checks a job that emits, for each input record, one
// record with the same key and the value want(input value): the multiset of
// outputs must be the inputs', exactly under exactly_once, with repeats only
// under at_least_once.
func verifyOnePerInput(want func(v []byte) []byte) func(context.Context, []string, txn.Guarantee, []*kgo.Record) (string, error) {
	return func(ctx context.Context, addrs []string, g txn.Guarantee, input []*kgo.Record) (string, error) {
		expect := make(map[string]int, len(input))
		for _, r := range input {
			expect[string(r.Key)+"\x00"+string(want(r.Value))]++
		}
		out, err := readOut(ctx, addrs, "out")
		if err != nil {
			return "", err
		}
		got := make(map[string]int, len(expect))
		for _, r := range out {
			got[string(r.Key)+"\x00"+string(r.Value)]++
		}
		repeats := 0
		for k, n := range expect {
			m := got[k]
			if m < n || m > n && g == txn.ExactlyOnce {
				key, _, _ := strings.Cut(k, "\x00")
				return "", fmt.Errorf("key %q: %d outputs, want %d", key, m, n)
			}
			repeats += m - n
			delete(got, k)
		}
		for k, m := range got {
			key, _, _ := strings.Cut(k, "\x00")
			return "", fmt.Errorf("%d outputs of key %q with a value no input gives", m, key)
		}
		return verified(len(input), "outputs", repeats), nil
	}
}

// verifyCounts checks a running count per key: each key's outputs, in
// offset order, must count 1, 2, ... up to the number of its inputs, every
// step once under exactly_once; under at_least_once steps may repeat but
// not go back, and the last must be the total. folded says the job folds
// each key's updates within a commit under exactly_once
// (processor.FoldUpdates): its counts there may rise by more than one, but
// still never repeat or go back, and end at the total.
func verifyCounts(topic string, keys func(input []*kgo.Record) map[string]int64, folded bool) func(context.Context, []string, txn.Guarantee, []*kgo.Record) (string, error) {
	return func(ctx context.Context, addrs []string, g txn.Guarantee, input []*kgo.Record) (string, error) {
		expect := keys(input)
		out, err := readOut(ctx, addrs, topic)
		if err != nil {
			return "", err
		}
		skips := folded && g == txn.ExactlyOnce
		last := make(map[string]int64, len(expect))
		repeats := 0
		for _, r := range out {
			n, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil {
				return "", fmt.Errorf("%s@%d/%d: %w", topic, r.Partition, r.Offset, err)
			}
			k, prev := string(r.Key), last[string(r.Key)]
			switch {
			case n == prev+1, n > prev && skips:
			case n <= prev && g != txn.ExactlyOnce:
				repeats++
			default:
				return "", fmt.Errorf("key %q counted %d after %d", k, n, prev)
			}
			last[k] = max(prev, n)
		}
		for k, n := range expect {
			if last[k] != n {
				return "", fmt.Errorf("key %q: final count %d, want %d", k, last[k], n)
			}
			delete(last, k)
		}
		for k := range last {
			return "", fmt.Errorf("key %q counted, but no input has it", k)
		}
		return verified(len(expect), "counts", repeats), nil
	}
}

// keyCounts counts the input records per key.
func keyCounts(input []*kgo.Record) map[string]int64 {
	m := map[string]int64{}
	for _, r := range input {
		m[string(r.Key)]++
	}
	return m
}

// wordCounts counts the words of the input lines as the wordcount example
// splits them.
func wordCounts(input []*kgo.Record) map[string]int64 {
	m := map[string]int64{}
	for _, r := range input {
		for _, w := range strings.Fields(strings.ToLower(string(r.Value))) {
			m[w]++
		}
	}
	return m
}

// verifyBilling checks the billing job: every bill accepted once (bill ids
// are unique and all bills valid), and each account's final totals, its
// count and sum, those of its bills.
func verifyBilling(ctx context.Context, addrs []string, g txn.Guarantee, input []*kgo.Record) (string, error) {
	want := map[string]examples.Totals{}
	for _, r := range input {
		var b examples.Bill
		if err := json.Unmarshal(r.Value, &b); err != nil {
			return "", err
		}
		t := want[b.Account]
		t.Count++
		t.SumCents += b.AmountCents
		want[b.Account] = t
	}
	accepted, err := readOut(ctx, addrs, "out")
	if err != nil {
		return "", err
	}
	seen := make(map[string]bool, len(input))
	repeats := 0
	for _, r := range accepted {
		var b examples.AcceptedBill
		if err := json.Unmarshal(r.Value, &b); err != nil {
			return "", fmt.Errorf("accepted@%d/%d: %w", r.Partition, r.Offset, err)
		}
		if seen[b.BillID] {
			if g == txn.ExactlyOnce {
				return "", fmt.Errorf("bill %s accepted twice", b.BillID)
			}
			repeats++
		}
		seen[b.BillID] = true
	}
	if len(seen) != len(input) {
		return "", fmt.Errorf("%d bills accepted, want %d", len(seen), len(input))
	}
	totals, err := readOut(ctx, addrs, "out2")
	if err != nil {
		return "", err
	}
	got := map[string]examples.Totals{}
	for _, r := range totals {
		var t examples.Totals
		if err := json.Unmarshal(r.Value, &t); err != nil {
			return "", fmt.Errorf("totals@%d/%d: %w", r.Partition, r.Offset, err)
		}
		got[string(r.Key)] = t // a key's updates are in offset order on its partition
	}
	for acct, w := range want {
		if t := got[acct]; t.Count != w.Count || t.SumCents != w.SumCents {
			return "", fmt.Errorf("account %s: %d bills for %d cents, want %d for %d", acct, t.Count, t.SumCents, w.Count, w.SumCents)
		}
	}
	if len(got) != len(want) {
		return "", fmt.Errorf("totals for %d accounts, want %d", len(got), len(want))
	}
	return verified(len(input), "bills and the totals of "+strconv.Itoa(len(want))+" accounts", repeats), nil
}

func verified(n int, what string, repeats int) string {
	s := fmt.Sprintf("verified: %d %s, exactly", n, what)
	if repeats > 0 {
		s += fmt.Sprintf(" (%d repeated)", repeats)
	}
	return s
}
