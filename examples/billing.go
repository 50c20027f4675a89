package examples

import (
	"errors"
	"fmt"

	json "github.com/go-json-experiment/json/v1"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

func init() {
	register(Example{
		Name:    "billing",
		Summary: "deduplicate bills by id and keep running totals per account",
		Params: []Param{
			{"input", "bills", "input topic of JSON bills"},
			{"accepted", "bills-accepted", "output: each accepted bill once, key = account"},
			{"totals", "account-totals", "output: running totals per account"},
			{"dlq", "bills-dlq", "dead-letter topic for malformed bills"},
		},
		Inputs: []string{"input"},
		Build: func(p map[string]string) *topology.Topology {
			return Billing(p["input"], p["accepted"], p["totals"], p["dlq"])
		},
		// Every bad bill goes to the dead-letter topic and the instance
		// goes on: one that cannot be read, one the totals refuse (a zero
		// amount), one whose output is too large (see --max-record-bytes).
		// Whatever the bill did before failing is rolled back.
		Options: func(p map[string]string) []processor.Opt {
			return []processor.Opt{
				processor.DeadLetterTopic(p["dlq"]),
				processor.OnError(topology.Processing, topology.Always(topology.SendToDeadLetterQueue)),
				processor.OnError(topology.Production, topology.Always(topology.SendToDeadLetterQueue)),
			}
		},
	})
}

// Bill is an input record of billing.
type Bill struct {
	BillID      string `json:"bill_id"`
	Account     string `json:"account"`
	AmountCents int64  `json:"amount_cents"`
	TS          int64  `json:"ts"`
}

// AcceptedBill is a bill with the coordinates of the input record it was
// accepted from.
type AcceptedBill struct {
	Bill
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Totals are an account's running totals.
type Totals struct {
	Count      int64  `json:"count"`
	SumCents   int64  `json:"sum_cents"`
	MinCents   int64  `json:"min_cents"`
	MaxCents   int64  `json:"max_cents"`
	LastBillID string `json:"last_bill_id"`
}

// ErrInvalidBill is wrapped by the decoding error of a bill that is not
// valid JSON or lacks a field.
var ErrInvalidBill = errors.New("billing: invalid bill")

// BillSerde decodes bills strictly: every field must be present, strings
// non-empty. Its JSON is serde.JSON's (encoding/json's bytes, fast for a
// flat struct like Bill). A bill whose fields all decode to non-zero
// values had them all: that is the common case, and it is answered
// there. Any other input (a zero amount or time, a missing or null field,
// malformed text) is decided by the strict decoding alone.
var BillSerde = serde.Funcs(billJSON.Encode, func(data []byte) (Bill, error) {
	if b, err := billJSON.Decode(data); err == nil && b.BillID != "" && b.Account != "" && b.AmountCents != 0 && b.TS != 0 {
		return b, nil
	}
	return decodeBillStrict(data)
})

var billJSON = serde.JSON[Bill]()

// decodeBillStrict decodes a bill on encoding/json's rules, every field
// required and strings non-empty.
func decodeBillStrict(data []byte) (Bill, error) {
	var raw struct {
		BillID      *string `json:"bill_id"`
		Account     *string `json:"account"`
		AmountCents *int64  `json:"amount_cents"`
		TS          *int64  `json:"ts"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Bill{}, fmt.Errorf("%w: %w: %v", serde.ErrDecode, ErrInvalidBill, err)
	}
	var missing []string
	if raw.BillID == nil || *raw.BillID == "" {
		missing = append(missing, "bill_id")
	}
	if raw.Account == nil || *raw.Account == "" {
		missing = append(missing, "account")
	}
	if raw.AmountCents == nil {
		missing = append(missing, "amount_cents")
	}
	if raw.TS == nil {
		missing = append(missing, "ts")
	}
	if len(missing) > 0 {
		return Bill{}, fmt.Errorf("%w: %w: missing %v", serde.ErrDecode, ErrInvalidBill, missing)
	}
	return Bill{BillID: *raw.BillID, Account: *raw.Account, AmountCents: *raw.AmountCents, TS: *raw.TS}, nil
}

// Billing builds the billing job: bills are stamped with their input
// coordinates, re-keyed by account where their key is not the account
// (through the repartition topic <application.id>-bills-by-account-repartition),
// deduplicated by bill id in the store seen-bills, and summed per account in
// the store account-totals (without the write cache, so its changelog holds
// every update).
func Billing(input, accepted, totals, dlq string) *topology.Topology {
	return billing(input, accepted, totals, dlq, nil)
}

// billing builds the job; more, if set, adds outputs of the accepted bills
// and the running totals (BillingWithDB's database sinks).
func billing(input, accepted, totals, dlq string, more func(fresh topology.Stream[string, AcceptedBill], running topology.Stream[string, Totals])) *topology.Topology {
	t := topology.New()
	bills := topology.From(t, input, serde.Bytes, BillSerde, topology.DeadLetter(dlq))
	stamped := topology.Process(bills, "stamp", func() topology.Processor[[]byte, Bill, string, AcceptedBill] { return &stamp{} })
	keyedByAccount, other := topology.Split(stamped, func(k string, b AcceptedBill) bool { return k == b.Account })
	rekeyed := topology.SelectKey(other, func(_ string, b AcceptedBill) string { return b.Account })
	byAccount := topology.Merge(keyedByAccount[0], topology.Repartition(rekeyed, "bills-by-account", serde.String, serde.JSON[AcceptedBill]()))

	seen := topology.Materialized("seen-bills", serde.String, serde.Int64)
	fresh := topology.Process(byAccount, "dedupe", func() topology.Processor[string, AcceptedBill, string, AcceptedBill] {
		return &dedupe{seen: seen}
	}, seen)
	topology.To(fresh, accepted, serde.String, serde.JSON[AcceptedBill]())

	sums := topology.Materialized("account-totals", serde.String, serde.JSON[Totals](), topology.WithoutCache())
	running := topology.Process(fresh, "totals", func() topology.Processor[string, AcceptedBill, string, Totals] {
		return &total{sums: sums}
	}, sums)
	topology.To(running, totals, serde.String, serde.JSON[Totals]())
	if more != nil {
		more(fresh, running)
	}
	return t
}

// ErrZeroAmount is the processing error of a bill for zero cents.
var ErrZeroAmount = errors.New("billing: a bill for zero cents")

// stamp records where each bill came from and keys it by its original key.
type stamp struct {
	ctx *topology.ProcessorContext[string, AcceptedBill]
}

func (s *stamp) Init(ctx *topology.ProcessorContext[string, AcceptedBill]) error {
	s.ctx = ctx
	return nil
}

func (s *stamp) Process(r topology.Record[[]byte, Bill]) error {
	topic, partition, offset, _ := s.ctx.RecordMetadata()
	return s.ctx.Forward(topology.Record[string, AcceptedBill]{
		Key:       string(r.Key),
		Value:     AcceptedBill{Bill: r.Value, Topic: topic, Partition: partition, Offset: offset},
		Timestamp: r.Timestamp,
	})
}

func (s *stamp) Close() error { return nil }

// dedupe passes a bill on only the first time its id is seen.
type dedupe struct {
	seen topology.Materialization[string, int64]
	kv   *topology.KV[string, int64]
	ctx  *topology.ProcessorContext[string, AcceptedBill]
}

func (d *dedupe) Init(ctx *topology.ProcessorContext[string, AcceptedBill]) error {
	d.ctx, d.kv = ctx, d.seen.Open(ctx)
	return nil
}

func (d *dedupe) Process(r topology.Record[string, AcceptedBill]) error {
	_, dup, err := d.kv.Get(r.Value.BillID)
	if err != nil || dup {
		return err
	}
	if err := d.kv.Put(r.Value.BillID, r.Value.Offset); err != nil {
		return err
	}
	return d.ctx.Forward(r)
}

func (d *dedupe) Close() error { return nil }

// total keeps the running totals of each account.
type total struct {
	sums topology.Materialization[string, Totals]
	kv   *topology.KV[string, Totals]
	ctx  *topology.ProcessorContext[string, Totals]
}

func (t *total) Init(ctx *topology.ProcessorContext[string, Totals]) error {
	t.ctx, t.kv = ctx, t.sums.Open(ctx)
	return nil
}

func (t *total) Process(r topology.Record[string, AcceptedBill]) error {
	cur, ok, err := t.kv.Get(r.Key)
	if err != nil {
		return err
	}
	amt := r.Value.AmountCents
	if amt == 0 {
		return ErrZeroAmount
	}
	if !ok {
		cur = Totals{MinCents: amt, MaxCents: amt}
	}
	cur.Count++
	cur.SumCents += amt
	cur.MinCents = min(cur.MinCents, amt)
	cur.MaxCents = max(cur.MaxCents, amt)
	cur.LastBillID = r.Value.BillID
	if err := t.kv.Put(r.Key, cur); err != nil {
		return err
	}
	return t.ctx.Forward(topology.Record[string, Totals]{Key: r.Key, Value: cur, Timestamp: r.Timestamp})
}

func (t *total) Close() error { return nil }
