package integration

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	fixtureBills      = 3000
	fixtureAccounts   = 40
	fixturePartitions = 4
)

// fixture is one input log, written, plus topics for the outputs.
type fixture struct {
	addrs  []string
	topics Topics
	group  string
	bills  []InputBill
	input  []InputRecord // input[i] is where bills[i] landed
	// repart[i] is the repartition record of bills[i], for the bills for
	// zero cents that fail after the repartition topic.
	repart map[int]InputRecord
}

func newFixture(t *testing.T, addrs []string) *fixture {
	t.Helper()
	prefix := uniquePrefix(t)
	f := &fixture{
		addrs:  addrs,
		topics: DefaultTopics().WithPrefix(prefix),
		group:  prefix + "billing",
		bills:  GenerateBills(11, fixtureBills, fixtureAccounts),
	}
	createTopics(t, addrs, fixturePartitions, f.topics.Input)
	// Fewer output partitions than input ones, so that accounts from
	// different input partitions share an output partition.
	createTopics(t, addrs, 3, f.topics.Accepted, f.topics.Totals, f.topics.DLQ, RepartitionTopic(f.group))
	var err error
	if f.input, err = ProduceBills(testContext(t, time.Minute), addrs, f.topics.Input, f.bills); err != nil {
		t.Fatal(err)
	}
	f.repart = repartition(t, f)
	return f
}

// repartition writes what the first sub-topology of the billing job commits
// to the repartition topic for the bills for zero cents not keyed by their
// account: they fail only when read back from there, so their dead letters
// point into it. The other records it would write are never looked at.
func repartition(t *testing.T, f *fixture) map[int]InputRecord {
	t.Helper()
	topic := RepartitionTopic(f.group)
	var (
		idx  []int
		recs []*kgo.Record
	)
	for i, b := range f.bills {
		if b.Kind != KindZeroAmount || string(b.Key) == b.Bill.Account {
			continue
		}
		in := f.input[i]
		idx = append(idx, i)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(b.Bill.Account), Value: mustMarshal(Accepted{
			Bill: b.Bill, Topic: in.Topic, Partition: in.Partition, Offset: in.Offset,
		})})
	}
	// In a transaction, as the application writes it: a consumer that read
	// it all then stops short of its end by the commit marker.
	transact(t, f, "repartition", kgo.TryCommit, recs...)
	out := make(map[int]InputRecord, len(idx))
	for j, i := range idx {
		r := recs[j]
		out[i] = InputRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
	}
	return out
}

// outRec is one output record the reference implementation writes.
type outRec struct {
	topic   string
	key     []byte
	value   []byte
	headers []kgo.RecordHeader
}

// plan is the complete output of a run of the billing application.
type plan struct {
	records []outRec        // in the order they are written
	commit  map[int32]int64 // input partition -> committed offset
	// repartition partition -> committed offset: past the last record the
	// second sub-topology read, short of the commit marker after it.
	repartCommit map[int32]int64
}

func (p *plan) indexes(topic string) []int {
	var is []int
	for i, r := range p.records {
		if r.topic == topic {
			is = append(is, i)
		}
	}
	return is
}

func (p *plan) insert(i int, r outRec) { p.records = slices.Insert(p.records, i, r) }
func (p *plan) remove(i int)           { p.records = slices.Delete(p.records, i, i+1) }

// reference is an implementation of the billing contract independent of the
// checker: it trusts the generator's Kind instead of parsing, and it
// interleaves the input partitions in short runs the way tasks on several
// instances would. The bill named by skip is dropped as if never seen.
func reference(f *fixture, skip string) *plan {
	queues := make(map[int32][]int) // input partition -> indexes, in offset order
	for i, r := range f.input {
		queues[r.Partition] = append(queues[r.Partition], i)
	}
	p := &plan{commit: make(map[int32]int64), repartCommit: make(map[int32]int64)}
	for _, rp := range f.repart {
		p.repartCommit[rp.Partition] = max(p.repartCommit[rp.Partition], rp.Offset+1)
	}
	seen := make(map[string]bool)
	totals := make(map[string]Totals)
	for len(queues) > 0 {
		for _, part := range sortedKeys(queues) {
			n := min(7, len(queues[part]))
			for _, i := range queues[part][:n] {
				b, in := f.bills[i], f.input[i]
				p.commit[in.Partition] = in.Offset + 1
				switch b.Kind {
				case KindMalformed:
					p.records = append(p.records, deadLetter(f, in, ClassDeserialization))
					continue
				case KindOversized:
					p.records = append(p.records, deadLetter(f, in, ClassProduction))
					continue
				case KindZeroAmount:
					if rp, ok := f.repart[i]; ok {
						in = rp
					}
					p.records = append(p.records, deadLetter(f, in, ClassProcessing))
					continue
				}
				if seen[b.Bill.BillID] {
					continue
				}
				seen[b.Bill.BillID] = true
				if b.Bill.BillID == skip {
					continue
				}
				acct := []byte(b.Bill.Account)
				totals[b.Bill.Account] = totals[b.Bill.Account].Add(b.Bill)
				p.records = append(p.records,
					outRec{topic: f.topics.Accepted, key: acct, value: mustMarshal(Accepted{
						Bill: b.Bill, Topic: in.Topic, Partition: in.Partition, Offset: in.Offset,
					})},
					outRec{topic: f.topics.Totals, key: acct, value: mustMarshal(totals[b.Bill.Account])},
				)
			}
			if queues[part] = queues[part][n:]; len(queues[part]) == 0 {
				delete(queues, part)
			}
		}
	}
	return p
}

// deadLetter is the dead letter of the record at in, which is where the
// record failed: the input or the repartition topic.
func deadLetter(f *fixture, in InputRecord, class string) outRec {
	return outRec{topic: f.topics.DLQ, key: in.Key, value: in.Value, headers: []kgo.RecordHeader{
		{Key: HeaderSourceTopic, Value: []byte(in.Topic)},
		{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(int(in.Partition)))},
		{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(in.Offset, 10))},
		{Key: HeaderErrorClass, Value: []byte(class)},
		{Key: HeaderErrorMessage, Value: []byte("a bad bill")},
	}}
}

func (r outRec) header(key string) string {
	for _, h := range r.headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (r *outRec) setHeader(key, value string) {
	for i := range r.headers {
		if r.headers[i].Key == key {
			r.headers[i].Value = []byte(value)
		}
	}
}

func transactionalClient(t *testing.T, f *fixture, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(f.addrs...),
		kgo.TransactionalID(f.group + "-" + id),
		kgo.TransactionTimeout(time.Minute),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// transact writes recs in one transaction of its own, which it commits or
// aborts as end says.
func transact(t *testing.T, f *fixture, id string, end kgo.TransactionEndTry, recs ...*kgo.Record) {
	t.Helper()
	cl := transactionalClient(t, f, id)
	ctx := testContext(t, time.Minute)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("writing in transaction %s: %v", id, err)
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		t.Fatal(err)
	}
}

func (r outRec) kgo() *kgo.Record {
	return &kgo.Record{Topic: r.topic, Key: r.key, Value: r.value, Headers: r.headers}
}

// write commits the plan in several transactions, as a sequence of commit
// intervals would, then commits the input offsets.
func (p *plan) write(t *testing.T, f *fixture) {
	t.Helper()
	ctx := testContext(t, time.Minute)
	cl := transactionalClient(t, f, "reference")
	const perTxn = 500
	for start := 0; start < len(p.records); start += perTxn {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for _, r := range p.records[start:min(start+perTxn, len(p.records))] {
			recs = append(recs, r.kgo())
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	if len(p.commit) == 0 {
		return
	}
	offs := make(kadm.Offsets)
	for part, at := range p.commit {
		offs.AddOffset(f.topics.Input, part, at, -1)
	}
	for part, at := range p.repartCommit {
		offs.AddOffset(RepartitionTopic(f.group), part, at, -1)
	}
	if err := newAdmin(t, f.addrs).CommitAllOffsets(ctx, f.group, offs); err != nil {
		t.Fatalf("committing offsets: %v", err)
	}
}

func check(t *testing.T, f *fixture) Report {
	t.Helper()
	rep, err := CheckBillingTopics(testContext(t, 2*time.Minute), f.addrs, f.topics, f.input, f.group)
	if err != nil {
		t.Fatalf("CheckBilling: %v", err)
	}
	return rep
}

func countKinds(bills []InputBill) map[Kind]int {
	c := make(map[Kind]int)
	for _, b := range bills {
		c[b.Kind]++
	}
	return c
}

func countResentBad(bills []InputBill) int {
	n := 0
	for _, b := range bills {
		if b.Resent && b.Kind.IsBad() {
			n++
		}
	}
	return n
}

func TestCheckBillingAcceptsCorrectOutput(t *testing.T) {
	f := newFixture(t, testBrokers(t))
	reference(f, "").write(t, f)

	rep := check(t, f)
	t.Log(rep)
	if !rep.OK() {
		t.Fatalf("the reference output fails the check:\n%s", rep)
	}
	kinds := countKinds(f.bills)
	resentBad := countResentBad(f.bills)
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"input records", rep.InputRecords, len(f.bills)},
		{"unique valid bills", rep.UniqueValid, kinds[KindBill]},
		{"duplicates", rep.Duplicates, kinds[KindDuplicate]},
		{"malformed", rep.Malformed, kinds[KindMalformed]},
		{"zero-amount", rep.ZeroAmount, kinds[KindZeroAmount]},
		{"oversized", rep.Oversized, kinds[KindOversized]},
		{"accepted", rep.Accepted, kinds[KindBill]},
		{"totals updates", rep.TotalsUpdates, kinds[KindBill]},
		{"dead letters", rep.DLQ, kinds[KindMalformed] + kinds[KindZeroAmount] + kinds[KindOversized]},
		{"deserialization dead letters", rep.DLQByClass[ClassDeserialization], kinds[KindMalformed]},
		{"processing dead letters", rep.DLQByClass[ClassProcessing], kinds[KindZeroAmount]},
		{"production dead letters", rep.DLQByClass[ClassProduction], kinds[KindOversized]},
		{"dead letters via the repartition topic", rep.DLQViaRepartition, len(f.repart)},
	} {
		if c.got != c.want {
			t.Errorf("report counts %d %s, want %d", c.got, c.name, c.want)
		}
	}
	// Two malformed records can be identical by chance, so the report may
	// count more copies than were re-sent, never fewer.
	if rep.ResentBad < resentBad {
		t.Errorf("report counts %d re-sent bad records, want at least %d", rep.ResentBad, resentBad)
	}
	// Both routes of a processing failure, and copies of bad records,
	// must be in the fixture for the controls below to mean anything.
	if kinds[KindDuplicate] == 0 || kinds[KindMalformed] == 0 || kinds[KindOversized] == 0 ||
		len(f.repart) == 0 || len(f.repart) == kinds[KindZeroAmount] || resentBad == 0 {
		t.Fatalf("the fixture exercises too little: %v, %d zero-amount bills via the repartition topic, %d re-sent bad records",
			kinds, len(f.repart), resentBad)
	}
}

// TestCheckBillingNegativeControls breaks a correct output in one way at a
// time; a checker that stays silent for any of them proves nothing when it
// passes a real run.
func TestCheckBillingNegativeControls(t *testing.T) {
	addrs := testBrokers(t)

	// A bill of a busy account, so its totals update is not the first.
	busyBill := func(f *fixture) string {
		n := make(map[string]int)
		for _, b := range f.bills {
			if b.Kind == KindBill {
				if n[b.Bill.Account]++; n[b.Bill.Account] == 5 {
					return b.Bill.BillID
				}
			}
		}
		t.Fatal("no account with five bills")
		return ""
	}
	firstMalformed := func(f *fixture) InputRecord {
		for i, b := range f.bills {
			if b.Kind == KindMalformed {
				return f.input[i]
			}
		}
		t.Fatal("no malformed input")
		return InputRecord{}
	}
	firstOf := func(f *fixture, k Kind) int {
		for i, b := range f.bills {
			if b.Kind == k {
				return i
			}
		}
		t.Fatalf("no %v input", k)
		return -1
	}
	// accept adds to p the accepted record a broken application would
	// write for bills[i].
	accept := func(f *fixture, p *plan, i int) {
		b, in := f.bills[i], f.input[i]
		p.records = append(p.records, outRec{topic: f.topics.Accepted, key: []byte(b.Bill.Account), value: mustMarshal(Accepted{
			Bill: b.Bill, Topic: in.Topic, Partition: in.Partition, Offset: in.Offset,
		})})
	}
	// The indexes of the dead letters in p that come from topic and have
	// the given class.
	deadLetters := func(f *fixture, p *plan, topic, class string) []int {
		var is []int
		for _, i := range p.indexes(f.topics.DLQ) {
			if r := p.records[i]; r.header(HeaderSourceTopic) == topic && r.header(HeaderErrorClass) == class {
				is = append(is, i)
			}
		}
		if len(is) == 0 {
			t.Fatalf("no %s dead letter from %s in the plan", class, topic)
		}
		return is
	}
	// The index of the accepted record of bill in p.
	acceptedOf := func(f *fixture, p *plan, bill string) int {
		for _, i := range p.indexes(f.topics.Accepted) {
			var a Accepted
			if err := json.Unmarshal(p.records[i].value, &a); err != nil {
				t.Fatal(err)
			}
			if a.BillID == bill {
				return i
			}
		}
		t.Fatalf("bill %s not in the plan", bill)
		return -1
	}

	for _, tc := range []struct {
		name string
		// plan makes the output that is written; nil means the
		// reference output.
		plan func(*fixture) *plan
		// after runs once the output is written.
		after func(*testing.T, *fixture)
		want  string // a substring of the expected violation
		// wantOK marks a positive control: the change must not count as
		// a violation.
		wantOK bool
	}{
		{
			name: "duplicate accepted record",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				i := acceptedOf(f, p, busyBill(f))
				p.insert(i+2, p.records[i])
				return p
			},
			want: "was accepted 2 times",
		},
		{
			name: "accepted bill missing",
			plan: func(f *fixture) *plan { return reference(f, busyBill(f)) },
			want: "was never accepted",
		},
		{
			name: "wrong running total",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				i := acceptedOf(f, p, busyBill(f)) + 1
				var tot Totals
				if err := json.Unmarshal(p.records[i].value, &tot); err != nil {
					t.Fatal(err)
				}
				tot.SumCents++
				p.records[i].value = mustMarshal(tot)
				return p
			},
			want: "totals: account",
		},
		{
			name: "totals update missing",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				p.remove(acceptedOf(f, p, busyBill(f)) + 1)
				return p
			},
			want: "updates for",
		},
		{
			name: "totals updates reordered",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				acct := p.records[acceptedOf(f, p, busyBill(f))].key
				var is []int
				for _, i := range p.indexes(f.topics.Totals) {
					if string(p.records[i].key) == string(acct) {
						is = append(is, i)
					}
				}
				a, b := is[1], is[2]
				p.records[a].value, p.records[b].value = p.records[b].value, p.records[a].value
				return p
			},
			want: "later updates of the account differ",
		},
		{
			name: "accepted record names another input",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				i := acceptedOf(f, p, busyBill(f))
				var a Accepted
				if err := json.Unmarshal(p.records[i].value, &a); err != nil {
					t.Fatal(err)
				}
				for _, in := range f.input {
					if b, err := ParseBill(in.Value); err == nil && b.BillID != a.BillID {
						a.Partition, a.Offset = in.Partition, in.Offset
						break
					}
				}
				p.records[i].value = mustMarshal(a)
				return p
			},
			want: "differs from input",
		},
		{
			name: "malformed input accepted",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				in := firstMalformed(f)
				p.records = append(p.records, outRec{topic: f.topics.Accepted, key: []byte("acct-x"), value: mustMarshal(Accepted{
					Bill:  Bill{BillID: "bad-x", Account: "acct-x", AmountCents: 1, TS: 1},
					Topic: in.Topic, Partition: in.Partition, Offset: in.Offset,
				})})
				return p
			},
			want: "which is malformed",
		},
		{
			name: "dead letter missing",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				p.remove(p.indexes(f.topics.DLQ)[0])
				return p
			},
			want: "has no dead letter",
		},
		{
			name: "dead letter duplicated",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				i := p.indexes(f.topics.DLQ)[0]
				p.insert(i+1, p.records[i])
				return p
			},
			want: "dead letters, at",
		},
		{
			name: "dead letter bytes altered",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				i := p.indexes(f.topics.DLQ)[0]
				p.records[i].value = append(slices.Clone(p.records[i].value), '!')
				return p
			},
			want: "differs from the value",
		},
		{
			name: "valid bill sent to the DLQ",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				for i, b := range f.bills {
					if b.Kind == KindBill {
						p.records = append(p.records, deadLetter(f, f.input[i], ClassDeserialization))
						break
					}
				}
				return p
			},
			want: "is the valid bill",
		},
		{
			name: "zero-amount bill accepted",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				accept(f, p, firstOf(f, KindZeroAmount))
				return p
			},
			want: "a bill for zero cents, which belongs in the dead-letter topic",
		},
		{
			name: "oversized bill accepted",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				accept(f, p, firstOf(f, KindOversized))
				return p
			},
			want: "an oversized bill, which belongs in the dead-letter topic",
		},
		{
			// The route through the repartition topic, where the dead
			// letter names its input only inside the value.
			name: "processing dead letter missing",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				p.remove(deadLetters(f, p, RepartitionTopic(f.group), ClassProcessing)[0])
				return p
			},
			want: "a bill for zero cents, has no dead letter",
		},
		{
			name: "dead letter with the wrong class",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				i := deadLetters(f, p, f.topics.Input, ClassProduction)[0]
				p.records[i].setHeader(HeaderErrorClass, ClassProcessing)
				return p
			},
			want: `class "processing", want "production"`,
		},
		{
			name: "dead letter names another repartition record",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				is := deadLetters(f, p, RepartitionTopic(f.group), ClassProcessing)
				if len(is) < 2 {
					t.Fatal("fewer than two dead letters from the repartition topic")
				}
				other := p.records[is[1]]
				p.records[is[0]].setHeader(HeaderSourcePartition, other.header(HeaderSourcePartition))
				p.records[is[0]].setHeader(HeaderSourceOffset, other.header(HeaderSourceOffset))
				return p
			},
			want: "differ from the repartition record",
		},
		{
			name: "transaction left open",
			after: func(t *testing.T, f *fixture) {
				cl := transactionalClient(t, f, "zombie")
				if err := cl.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				p := reference(f, "")
				r := p.records[p.indexes(f.topics.Accepted)[0]]
				if err := cl.ProduceSync(testContext(t, time.Minute), r.kgo()).FirstErr(); err != nil {
					t.Fatal(err)
				}
			},
			want: "a transaction is still open",
		},
		{
			name: "committed offsets short of the end",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				p.commit[0]--
				return p
			},
			want: "offsets: group",
		},
		{
			name: "no committed offsets",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				p.commit = nil
				return p
			},
			want: "has no committed offset",
		},
		{
			// What a check made too early finds: the group is at the
			// end of its input, but not of the repartition topic.
			name: "repartition topic not consumed",
			plan: func(f *fixture) *plan {
				p := reference(f, "")
				for part := range p.repartCommit {
					p.repartCommit[part]--
					break
				}
				return p
			},
			want: "the run stopped before its records were processed",
		},
		{
			// The group's offset stops before the commit marker; an
			// aborted transaction after it holds no record to consume.
			name: "aborted repartition records are not waiting",
			after: func(t *testing.T, f *fixture) {
				var recs []*kgo.Record
				for _, rp := range f.repart {
					recs = append(recs, &kgo.Record{Topic: rp.Topic, Key: rp.Key, Value: rp.Value})
				}
				transact(t, f, "aborted-repartition", kgo.TryAbort, recs...)
			},
			wantOK: true,
		},
		{
			// What a crash between produce and commit leaves behind:
			// the retried records exist in the log, but aborted. Only
			// read_committed makes them invisible.
			name: "aborted duplicates are invisible",
			after: func(t *testing.T, f *fixture) {
				p := reference(f, "")
				var recs []*kgo.Record
				for _, i := range p.indexes(f.topics.Accepted)[:50] {
					recs = append(recs, p.records[i].kgo(), p.records[i+1].kgo())
				}
				recs = append(recs, p.records[p.indexes(f.topics.DLQ)[0]].kgo())
				transact(t, f, "aborted", kgo.TryAbort, recs...)
			},
			wantOK: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, addrs)
			p := reference(f, "")
			if tc.plan != nil {
				p = tc.plan(f)
			}
			p.write(t, f)
			if tc.after != nil {
				tc.after(t, f)
			}
			rep := check(t, f)
			t.Log(rep)
			if tc.wantOK {
				if !rep.OK() {
					t.Fatalf("positive control reported violations:\n%s", rep)
				}
				return
			}
			if !slices.ContainsFunc(rep.Violations, func(v string) bool { return strings.Contains(v, tc.want) }) {
				t.Fatalf("no violation containing %q:\n%s", tc.want, rep)
			}
		})
	}
}

// TestCheckBillingStopsOnOpenTransactions guards the checker's own
// liveness: a read_committed consumer can never pass an open transaction,
// and the check must still end, quickly, with a verdict.
func TestCheckBillingStopsOnOpenTransactions(t *testing.T) {
	f := newFixture(t, testBrokers(t))
	reference(f, "").write(t, f)
	cl := transactionalClient(t, f, "open", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, time.Minute)
	var recs []*kgo.Record
	for _, topic := range f.topics.outputs() {
		for p := range int32(3) {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("{}")})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep := check(t, f)
	if took := time.Since(start); took > readIdle {
		t.Errorf("the check took %v", took)
	}
	var open int
	for _, v := range rep.Violations {
		if strings.HasPrefix(v, "txn:") {
			open++
		} else {
			t.Errorf("unexpected violation: %s", v)
		}
	}
	if open != 9 {
		t.Fatalf("%d open transaction violations, want one per output partition (9):\n%s", open, rep)
	}
}
