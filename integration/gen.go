package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
)

// Bill is the billing example's input event.
type Bill struct {
	BillID      string `json:"bill_id"`
	Account     string `json:"account"`
	AmountCents int64  `json:"amount_cents"`
	TS          int64  `json:"ts"`
}

// Kind says what the generator meant a record to be. The checker does not
// read it: it classifies the bytes itself, so a generator bug cannot hide a
// processing bug.
type Kind int

const (
	// KindBill is the first occurrence of a valid bill.
	KindBill Kind = iota
	// KindDuplicate re-sends an earlier bill with identical key and value,
	// as an upstream producer retry would.
	KindDuplicate
	// KindMalformed is a record that cannot be read as a bill: a
	// deserialization error.
	KindMalformed
	// KindZeroAmount is a valid bill for zero cents, which the totals
	// refuse: a processing error.
	KindZeroAmount
	// KindOversized is a valid bill whose bill_id is so long that every
	// output carrying it is over BillingMaxRecordBytes: a production error.
	KindOversized
)

// IsBad reports whether every record of the kind belongs in the dead-letter
// topic, however often it is re-sent: the application rolls back all a bad
// record did, so a later copy is no duplicate of it.
func (k Kind) IsBad() bool { return k == KindMalformed || k == KindZeroAmount || k == KindOversized }

func (k Kind) String() string {
	switch k {
	case KindBill:
		return "bill"
	case KindDuplicate:
		return "duplicate"
	case KindMalformed:
		return "malformed"
	case KindZeroAmount:
		return "zero-amount"
	case KindOversized:
		return "oversized"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// InputBill is one record of the generated input, in production order.
type InputBill struct {
	Key   []byte // the account, the bill_id, or nil
	Value []byte
	Kind  Kind
	Bill  Bill   // zero for KindMalformed
	Fault string // for KindMalformed: how the record is broken
	// Resent marks a copy of an earlier record, identical in key and
	// value. A re-sent good bill is KindDuplicate; a re-sent bad record
	// keeps its kind, since it is as bad as the first copy.
	Resent bool
}

// InputRecord is one record of the input log as actually written.
type InputRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
}

// baseTS is fixed rather than time.Now so that a seed reproduces the exact
// bytes of a failed run.
const baseTS = 1_750_000_000_000

// The input mix. The bad kinds together make about 2% of the input, so
// that every error class is exercised thousands of times in a soak run
// without drowning the good bills.
const (
	resendRate    = 0.05
	malformedRate = 0.01
	zeroRate      = 0.005
	oversizedRate = 0.005
)

// GenerateBills returns a deterministic input log holding n unique valid
// bills over the given number of accounts, plus about 5% duplicates (the
// same record re-sent right after its original or a few records later),
// about 1% malformed records, 0.5% bills for zero cents and 0.5% oversized
// bills. Bad records are re-sent as often as good ones.
func GenerateBills(seed int64, n int, accounts int) []InputBill {
	n = max(n, 0)
	accounts = max(accounts, 1)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x736c75696365))
	g := &generator{BillDraws: examples.BillDraws{Rand: rng, Accounts: accounts}, rng: rng}

	out := make([]InputBill, 0, n+n/12+8)
	type resend struct {
		due int // len(out) at which the copy is appended
		b   InputBill
	}
	var resends []resend
	flush := func(all bool) {
		for i := 0; i < len(resends); {
			if all || resends[i].due <= len(out) {
				out = append(out, resends[i].b)
				resends = append(resends[:i], resends[i+1:]...)
				continue
			}
			i++
		}
	}
	emit := func(b InputBill) {
		out = append(out, b)
		if rng.Float64() < resendRate {
			dup := b
			dup.Resent = true
			if dup.Kind == KindBill {
				dup.Kind = KindDuplicate
			}
			delay := 0
			if rng.IntN(2) == 0 {
				delay = 1 + rng.IntN(6)
			}
			resends = append(resends, resend{due: len(out) + delay, b: dup})
		}
		flush(false)
	}

	for i := range n {
		emit(g.bill(i))
		if rng.Float64() < malformedRate {
			emit(g.malformed())
		}
		if rng.Float64() < zeroRate {
			emit(g.zeroAmount(i))
		}
		if rng.Float64() < oversizedRate {
			emit(g.oversized(i))
		}
	}
	flush(true)
	return out
}

type generator struct {
	examples.BillDraws
	rng   *rand.Rand
	nbad  int
	nzero int
	nbig  int
}

// ts is the event time of a bill generated at position i: slightly out of
// order, as event times are.
func (g *generator) ts(i int) int64 {
	return baseTS + int64(i)*250 + g.rng.Int64N(10_000) - 5_000
}

func (g *generator) bill(i int) InputBill {
	return g.valid(KindBill, Bill{
		BillID:      fmt.Sprintf("bill-%07d", i),
		Account:     g.Account(),
		AmountCents: g.Amount(),
		TS:          g.ts(i),
	})
}

// zeroAmount is a bill that is valid in every field but refused by the
// totals. Its id space is its own, so that no good bill shares its id: which
// of the two would win the deduplication depends on processing order.
func (g *generator) zeroAmount(i int) InputBill {
	g.nzero++
	return g.valid(KindZeroAmount, Bill{
		BillID:  fmt.Sprintf("zero-%05d", g.nzero),
		Account: g.Account(),
		TS:      g.ts(i),
	})
}

// The length of an oversized bill's id: far above OversizedBillID, so that
// every record carrying it is over the limit whatever else it holds, and far
// below anything a broker or client would refuse as input.
const (
	oversizedMinID = 1400
	oversizedMaxID = 1600
)

func (g *generator) oversized(i int) InputBill {
	g.nbig++
	id := []byte(fmt.Sprintf("big-%05d-", g.nbig))
	for n := oversizedMinID + g.rng.IntN(oversizedMaxID-oversizedMinID); len(id) < n; {
		id = append(id, 'a'+byte(g.rng.IntN(26)))
	}
	return g.valid(KindOversized, Bill{
		BillID:      string(id),
		Account:     g.Account(),
		AmountCents: g.Amount(),
		TS:          g.ts(i),
	})
}

func (g *generator) valid(k Kind, b Bill) InputBill {
	v, err := json.Marshal(b)
	if err != nil {
		panic(err) // a struct of strings and integers always marshals
	}
	return InputBill{Key: g.Key(b.Account, b.BillID), Value: v, Kind: k, Bill: b}
}

func (g *generator) malformed() InputBill {
	g.nbad++
	b := Bill{
		BillID:      fmt.Sprintf("bad-%05d", g.nbad),
		Account:     g.Account(),
		AmountCents: g.Amount(),
		TS:          baseTS + g.rng.Int64N(1_000_000),
	}
	fields := map[string]any{
		"bill_id":      b.BillID,
		"account":      b.Account,
		"amount_cents": b.AmountCents,
		"ts":           b.TS,
	}
	names := []string{"bill_id", "account", "amount_cents", "ts"}
	var (
		v     []byte
		fault string
	)
	switch g.rng.IntN(4) {
	case 0:
		fault = "invalid-json"
		switch g.rng.IntN(3) {
		case 0:
			v = []byte("not json at all " + b.BillID)
		case 1:
			v = []byte(`{"bill_id": ` + b.BillID + `, "account": }`)
		default:
			v = []byte{0xff, 0xfe, 0x00, '{', 0x80, '}'}
		}
	case 1:
		fault = "truncated-json"
		full := mustMarshal(fields)
		v = full[:1+g.rng.IntN(len(full)-1)]
	case 2:
		f := names[g.rng.IntN(len(names))]
		fault = "missing-field:" + f
		if (f == "bill_id" || f == "account") && g.rng.IntN(2) == 0 {
			fault = "empty-field:" + f
			fields[f] = ""
		} else {
			delete(fields, f)
		}
		v = mustMarshal(fields)
	default:
		f := names[g.rng.IntN(len(names))]
		fault = "wrong-type:" + f
		switch f {
		case "bill_id":
			fields[f] = 12345
		case "account":
			fields[f] = map[string]string{"id": b.Account}
		case "amount_cents":
			fields[f] = fmt.Sprint(b.AmountCents)
		case "ts":
			fields[f] = true
		}
		v = mustMarshal(fields)
	}
	return InputBill{Key: g.Key(b.Account, b.BillID), Value: v, Kind: KindMalformed, Fault: fault}
}

func mustMarshal(v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return out
}

// billsPartitioner partitions keyed records exactly as kgo's (and Kafka's)
// default does. Records without a key are placed by a hash of their value
// rather than stickily, so a re-sent record lands in the same partition as
// its original, after it: the dedup contract relies on that.
func billsPartitioner() kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(topic string) func(*kgo.Record, int) int {
		keyed := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
		return func(r *kgo.Record, n int) int {
			if r.Key != nil {
				return keyed.Partition(r, n)
			}
			h := fnv.New32a()
			h.Write(r.Value)
			return int(h.Sum32()&0x7fffffff) % n
		}
	})
}

// ProduceBills writes bills to topic, which must exist, in order with an
// idempotent producer, and returns the input log as written: element i is
// where bills[i] landed.
func ProduceBills(ctx context.Context, addrs []string, topic string, bills []InputBill) ([]InputRecord, error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return nil, err
	}
	tds, err := kadm.NewClient(adm).ListTopics(ctx, topic)
	adm.Close()
	if err != nil {
		return nil, fmt.Errorf("listing topic %s: %w", topic, err)
	}
	if td, ok := tds[topic]; !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s does not exist: %v", topic, td.Err)
	}

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(billsPartitioner()),
		kgo.MaxBufferedRecords(20_000),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	out := make([]InputRecord, 0, len(bills))
	const chunk = 5_000
	for start := 0; start < len(bills); start += chunk {
		end := min(start+chunk, len(bills))
		recs := make([]*kgo.Record, 0, end-start)
		for _, b := range bills[start:end] {
			recs = append(recs, &kgo.Record{Key: b.Key, Value: b.Value})
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			return out, fmt.Errorf("producing bills %d..%d: %w", start, end, err)
		}
		// Results arrive in completion order; the records themselves carry
		// where they landed, in our order.
		for _, r := range recs {
			out = append(out, InputRecord{
				Topic:     r.Topic,
				Partition: r.Partition,
				Offset:    r.Offset,
				Key:       r.Key,
				Value:     r.Value,
			})
		}
	}
	return out, nil
}

// GenRecord is one generated input record and the partition it is written
// to, -1 for the partition of its key (see ProduceKeyed).
type GenRecord struct {
	Partition int32
	Key       []byte
	Value     []byte
}

// ProduceKeyed writes records in order: to their partition, or, with
// Partition -1, to the partition of their key (Kafka's default murmur2,
// as sluice partitions), so that orders and payments of one order meet.
// It returns the input log as written.
func ProduceKeyed(ctx context.Context, addrs []string, topic string, rs []GenRecord) ([]InputRecord, error) {
	keyed := kgo.StickyKeyPartitioner(nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(func(t string) func(*kgo.Record, int) int {
			tp := keyed.ForTopic(t)
			return func(r *kgo.Record, n int) int {
				if r.Partition >= 0 {
					return int(r.Partition)
				}
				return tp.Partition(r, n)
			}
		})), kgo.MaxBufferedRecords(20_000))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(rs))
	for i, r := range rs {
		recs[i] = &kgo.Record{Partition: r.Partition, Key: r.Key, Value: r.Value}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("producing to %s: %w", topic, err)
	}
	out := make([]InputRecord, len(recs))
	for i, r := range recs {
		out[i] = InputRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
	}
	return out, nil
}
