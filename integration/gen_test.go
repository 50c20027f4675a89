package integration

import (
	"bytes"
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
		keyModes = map[string]int{}
		faults   = map[string]int{}
		firstAt  = map[string]int{}
		accts    = map[string]bool{}
	)
	for i, b := range bills {
		counts[b.Kind]++
		parsed, err := ParseBill(b.Value)
		switch b.Kind {
		case KindBill, KindDuplicate:
			if err != nil {
				t.Fatalf("record %d: %v bill does not parse: %v (%s)", i, b.Kind, err, b.Value)
			}
			if parsed != b.Bill {
				t.Fatalf("record %d: parsed %+v, generated %+v", i, parsed, b.Bill)
			}
			if b.Bill.AmountCents == 0 || b.Bill.TS <= 0 {
				t.Fatalf("record %d: borderline bill %+v", i, b.Bill)
			}
			accts[b.Bill.Account] = true
			switch {
			case b.Key == nil:
				keyModes["nil"]++
			case string(b.Key) == b.Bill.Account:
				keyModes["account"]++
			case string(b.Key) == b.Bill.BillID:
				keyModes["bill_id"]++
			default:
				t.Fatalf("record %d: key %q is neither account nor bill_id", i, b.Key)
			}
		case KindMalformed:
			if err == nil {
				t.Fatalf("record %d: malformed record (%s) parses: %s", i, b.Fault, b.Value)
			}
			faults[strings.SplitN(b.Fault, ":", 2)[0]]++
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
	for _, mode := range []string{"nil", "account", "bill_id"} {
		if keyModes[mode] < n/10 {
			t.Errorf("only %d records keyed by %s", keyModes[mode], mode)
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
	t.Logf("kinds %v, keys %v, faults %v", counts, keyModes, faults)
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
