package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestGenerateBillsDeterministic(t *testing.T) {
	a := GenerateBills(42, 2000, 50)
	b := GenerateBills(42, 2000, 50)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed generated different input logs")
	}
	if c := GenerateBills(43, 2000, 50); reflect.DeepEqual(a, c) {
		t.Fatal("different seeds generated the same input log")
	}
}

func TestGenerateBillsMix(t *testing.T) {
	const n, accounts = 20_000, 300
	bills := GenerateBills(7, n, accounts)

	var (
		counts   = map[Kind]int{}
		keyModes = map[Kind]map[string]int{}
		faults   = map[string]int{}
		firstAt  = map[string]int{}
		badAt    = map[string]int{} // key and value of a bad record -> index
		resent   = map[Kind]int{}
		accts    = map[string]bool{}
	)
	for i, b := range bills {
		counts[b.Kind]++
		parsed, err := ParseBill(b.Value)
		switch b.Kind {
		case KindBill, KindDuplicate, KindZeroAmount, KindOversized:
			if err != nil {
				t.Fatalf("record %d: %v bill does not parse: %v (%s)", i, b.Kind, err, b.Value)
			}
			if parsed != b.Bill {
				t.Fatalf("record %d: parsed %+v, generated %+v", i, parsed, b.Bill)
			}
			want := map[Kind]verdict{KindBill: good, KindDuplicate: good, KindZeroAmount: zeroAmount, KindOversized: oversized}[b.Kind]
			if got := judge(parsed); got != want {
				t.Fatalf("record %d: the checker judges the %v bill %s to be %v", i, b.Kind, clip(b.Value), got)
			}
			if b.Bill.TS <= 0 || (b.Kind != KindZeroAmount && b.Bill.AmountCents == 0) {
				t.Fatalf("record %d: borderline %v bill %s", i, b.Kind, clip(b.Value))
			}
			accts[b.Bill.Account] = true
			if keyModes[b.Kind] == nil {
				keyModes[b.Kind] = map[string]int{}
			}
			switch {
			case b.Key == nil:
				keyModes[b.Kind]["nil"]++
			case string(b.Key) == b.Bill.Account:
				keyModes[b.Kind]["account"]++
			case string(b.Key) == b.Bill.BillID:
				keyModes[b.Kind]["bill_id"]++
			default:
				t.Fatalf("record %d: key %q is neither account nor bill_id", i, clip(b.Key))
			}
		case KindMalformed:
			if err == nil {
				t.Fatalf("record %d: malformed record (%s) parses: %s", i, b.Fault, b.Value)
			}
			faults[strings.SplitN(b.Fault, ":", 2)[0]]++
		}
		if b.Kind.IsBad() {
			k := fmt.Sprintf("%t%q%q", b.Key == nil, b.Key, b.Value)
			if b.Resent {
				resent[b.Kind]++
				j, ok := badAt[k]
				if !ok {
					t.Fatalf("record %d: re-sent %v record precedes its original", i, b.Kind)
				}
				if i-j > 12 {
					t.Fatalf("record %d: copy comes %d records after its original", i, i-j)
				}
			} else {
				badAt[k] = i
			}
		}

		switch b.Kind {
		case KindBill:
			if _, ok := firstAt[b.Bill.BillID]; ok {
				t.Fatalf("record %d: bill_id %s generated twice", i, b.Bill.BillID)
			}
			firstAt[b.Bill.BillID] = i
		case KindDuplicate:
			j, ok := firstAt[b.Bill.BillID]
			if !ok {
				t.Fatalf("record %d: duplicate of %s precedes its original", i, b.Bill.BillID)
			}
			orig := bills[j]
			if !bytes.Equal(orig.Key, b.Key) || !bytes.Equal(orig.Value, b.Value) {
				t.Fatalf("record %d: duplicate of record %d differs from it", i, j)
			}
			if i-j > 12 {
				t.Fatalf("record %d: duplicate comes %d records after its original", i, i-j)
			}
		}
	}

	if counts[KindBill] != n {
		t.Fatalf("%d unique bills, want %d", counts[KindBill], n)
	}
	if d := float64(counts[KindDuplicate]) / n; d < 0.04 || d > 0.06 {
		t.Errorf("duplicates are %.3f of the bills, want about 0.05", d)
	}
	if m := float64(counts[KindMalformed]) / n; m < 0.007 || m > 0.013 {
		t.Errorf("malformed records are %.4f of the bills, want about 0.01", m)
	}
	for _, k := range []Kind{KindZeroAmount, KindOversized} {
		if m := float64(counts[k]) / n; m < 0.003 || m > 0.007 {
			t.Errorf("%v records are %.4f of the bills, want about 0.005", k, m)
		}
	}
	for _, k := range []Kind{KindMalformed, KindZeroAmount, KindOversized} {
		if resent[k] == 0 {
			t.Errorf("no %v record is re-sent", k)
		}
	}
	for _, mode := range []string{"nil", "account", "bill_id"} {
		if keyModes[KindBill][mode] < n/10 {
			t.Errorf("only %d bills keyed by %s", keyModes[KindBill][mode], mode)
		}
		// The key decides where a bad bill fails: before the repartition
		// topic or after it.
		for _, k := range []Kind{KindZeroAmount, KindOversized} {
			if keyModes[k][mode] == 0 {
				t.Errorf("no %v bill keyed by %s", k, mode)
			}
		}
	}
	for _, f := range []string{"invalid-json", "truncated-json", "missing-field", "empty-field", "wrong-type"} {
		if faults[f] == 0 {
			t.Errorf("no malformed record of kind %s", f)
		}
	}
	if len(accts) < accounts*9/10 {
		t.Errorf("bills cover %d accounts of %d", len(accts), accounts)
	}
	t.Logf("kinds %v, re-sent bad %v, keys %v, faults %v", counts, resent, keyModes, faults)
}

// TestGenerateBillsOutputSizes keeps the generator away from the band where
// the oracle's OversizedBillID rule and the application's size check could
// disagree: every output of a good bill fits into BillingMaxRecordBytes
// whatever its running totals, and even the smallest output of an oversized
// bill does not.
func TestGenerateBillsOutputSizes(t *testing.T) {
	size := func(key string, v any) int {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return len(key) + len(b)
	}
	var largestGood, smallestBig int
	smallestBig = math.MaxInt
	for _, b := range GenerateBills(5, 50_000, 500) {
		bill := b.Bill
		switch b.Kind {
		case KindBill, KindZeroAmount:
			worst := max(
				size(bill.Account, Accepted{Bill: bill, Topic: "bills", Partition: math.MaxInt32, Offset: math.MaxInt64}),
				size(bill.Account, Totals{Count: math.MaxInt64, SumCents: math.MinInt64, MinCents: math.MinInt64, MaxCents: math.MinInt64, LastBillID: bill.BillID}),
			)
			largestGood = max(largestGood, worst)
		case KindOversized:
			bill.AmountCents, bill.TS = 0, 0
			smallestBig = min(smallestBig, size(bill.Account, Accepted{Bill: bill, Topic: "bills"}))
		}
	}
	if largestGood > BillingMaxRecordBytes/2 {
		t.Errorf("a bill that must fit has an output of up to %d bytes, too close to the limit of %d", largestGood, BillingMaxRecordBytes)
	}
	if smallestBig <= BillingMaxRecordBytes+BillingMaxRecordBytes/4 {
		t.Errorf("an oversized bill has an output of only %d bytes, too close to the limit of %d", smallestBig, BillingMaxRecordBytes)
	}
	t.Logf("largest output of a bill that fits: %d bytes; smallest of an oversized one: %d; limit %d", largestGood, smallestBig, BillingMaxRecordBytes)
}

func TestGenerateBillsProduced(t *testing.T) {
	addrs := testBrokers(t)
	topic := uniquePrefix(t) + "bills"
	const partitions = 6
	createTopics(t, addrs, partitions, topic)
	ctx := testContext(t, time.Minute)

	bills := GenerateBills(3, 6000, 40)
	recs, err := ProduceBills(ctx, addrs, topic, bills)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(bills) {
		t.Fatalf("%d records written for %d bills", len(recs), len(bills))
	}

	keyed := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	next := make(map[int32]int64)
	where := make(map[string]InputRecord)
	for i, r := range recs {
		if r.Topic != topic || r.Partition < 0 || r.Partition >= partitions {
			t.Fatalf("record %d landed at %s/%d", i, r.Topic, r.Partition)
		}
		// The producer is idempotent and non-transactional, so each
		// partition's offsets are dense and in production order.
		if r.Offset != next[r.Partition] {
			t.Fatalf("record %d at %d@%d, want offset %d", i, r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
		if b := bills[i]; b.Key != nil {
			if want := int32(keyed.Partition(&kgo.Record{Key: b.Key}, partitions)); r.Partition != want {
				t.Fatalf("record %d with key %q in partition %d, the default partitioner says %d", i, b.Key, r.Partition, want)
			}
		}
		switch b := bills[i]; b.Kind {
		case KindBill:
			where[b.Bill.BillID] = r
		case KindDuplicate:
			orig := where[b.Bill.BillID]
			if orig.Partition != r.Partition || orig.Offset >= r.Offset {
				t.Fatalf("duplicate of %s at %d@%d, original at %d@%d", b.Bill.BillID, r.Partition, r.Offset, orig.Partition, orig.Offset)
			}
		}
	}
	if len(next) != partitions {
		t.Errorf("records landed in %d of %d partitions", len(next), partitions)
	}

	// What the producer reported must be what a consumer reads back.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	byCoord := make(map[coord]InputRecord, len(recs))
	for _, r := range recs {
		byCoord[coord{r.Partition, r.Offset}] = r
	}
	seen := 0
	for seen < len(recs) && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			want, ok := byCoord[coord{r.Partition, r.Offset}]
			if !ok || !bytes.Equal(want.Key, r.Key) || !bytes.Equal(want.Value, r.Value) {
				t.Fatalf("read %d@%d = %q/%q, the input log says %q/%q", r.Partition, r.Offset, r.Key, r.Value, want.Key, want.Value)
			}
			seen++
		})
	}
	if seen != len(recs) {
		t.Fatalf("read back %d of %d records", seen, len(recs))
	}
}
