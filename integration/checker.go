package integration

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-streams/sluice/internal/names"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Topics names the billing example's topics.
type Topics struct {
	Input    string // bills
	Accepted string // bills-accepted
	Totals   string // account-totals
	DLQ      string // bills-dlq
}

// DefaultTopics returns the names the billing example uses.
func DefaultTopics() Topics {
	return Topics{Input: "bills", Accepted: "bills-accepted", Totals: "account-totals", DLQ: "bills-dlq"}
}

// WithPrefix lets several checks share one cluster without sharing topics.
func (t Topics) WithPrefix(prefix string) Topics {
	return Topics{
		Input:    prefix + t.Input,
		Accepted: prefix + t.Accepted,
		Totals:   prefix + t.Totals,
		DLQ:      prefix + t.DLQ,
	}
}

func (t Topics) outputs() []string { return []string{t.Accepted, t.Totals, t.DLQ} }

// RepartitionTopic is the internal topic through which the billing
// application with the given application id re-keys bills by account.
func RepartitionTopic(appID string) string {
	return names.Internal(appID, names.Repartition("bills-by-account"))
}

// BillingMaxRecordBytes is the --max-record-bytes the billing instances run
// with: small, so that a bill can be too large to produce without being too
// large to be written as input.
const BillingMaxRecordBytes = 1024

// OversizedBillID is the bill_id length above which the oracle expects a
// valid bill to fail with a production error. The first output of a bill
// (its repartition record or its accepted record) carries the bill_id plus
// at least 90 bytes of key and other fields, so a bill_id over 1,000 bytes
// never fits into BillingMaxRecordBytes. Below that there is a band where
// the verdict depends on things one input record cannot tell (how large the
// account's running totals have grown, how the id escapes in JSON); the
// generator stays far from it, with ids of at most 12 bytes or of 1,400
// and more.
const OversizedBillID = 1000

// The error classes of sluice.error.class.
const (
	ClassDeserialization = "deserialization"
	ClassProcessing      = "processing"
	ClassProduction      = "production"
)

// The headers a dead-letter record carries.
const (
	HeaderSourceTopic     = "sluice.source.topic"
	HeaderSourcePartition = "sluice.source.partition"
	HeaderSourceOffset    = "sluice.source.offset"
	HeaderErrorClass      = "sluice.error.class"
	HeaderErrorMessage    = "sluice.error.message"
)

// Accepted is a bills-accepted value: the bill and where it was read.
type Accepted struct {
	Bill
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Totals is an account-totals value.
type Totals struct {
	Count      int64  `json:"count"`
	SumCents   int64  `json:"sum_cents"`
	MinCents   int64  `json:"min_cents"`
	MaxCents   int64  `json:"max_cents"`
	LastBillID string `json:"last_bill_id"`
}

// Add returns the totals after b.
func (t Totals) Add(b Bill) Totals {
	if t.Count == 0 {
		t.MinCents, t.MaxCents = b.AmountCents, b.AmountCents
	} else {
		t.MinCents = min(t.MinCents, b.AmountCents)
		t.MaxCents = max(t.MaxCents, b.AmountCents)
	}
	t.Count++
	t.SumCents += b.AmountCents
	t.LastBillID = b.BillID
	return t
}

// ParseBill decodes an input value, failing exactly when the billing
// contract says the record belongs in the dead-letter topic.
func ParseBill(value []byte) (Bill, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(value, &fields); err != nil {
		return Bill{}, err
	}
	if fields == nil {
		return Bill{}, errors.New("not a JSON object")
	}
	var b Bill
	str := func(name string, dst *string) error {
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			return fmt.Errorf("missing %s", name)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if *dst == "" {
			return fmt.Errorf("empty %s", name)
		}
		return nil
	}
	num := func(name string, dst *int64) error {
		raw, ok := fields[name]
		// Unmarshalling null into an int64 succeeds and leaves zero.
		if !ok || string(raw) == "null" {
			return fmt.Errorf("missing %s", name)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	if err := errors.Join(
		str("bill_id", &b.BillID),
		str("account", &b.Account),
		num("amount_cents", &b.AmountCents),
		num("ts", &b.TS),
	); err != nil {
		return Bill{}, err
	}
	return b, nil
}

// Report is what CheckBilling found. It is clean when Violations is empty.
type Report struct {
	InputRecords int // records in the input log
	UniqueValid  int // distinct bill_ids among good bills
	Duplicates   int // good bills repeating an earlier bill_id
	// The bad input records, each due one dead letter of its class.
	Malformed  int // not a bill: deserialization
	ZeroAmount int // a valid bill for zero cents: processing
	Oversized  int // a valid bill with a bill_id over OversizedBillID: production
	ResentBad  int // bad records identical to an earlier one, counted above too

	Accepted      int // committed bills-accepted records
	TotalsUpdates int // committed account-totals records
	DLQ           int // committed bills-dlq records
	// DLQByClass counts the dead letters by their sluice.error.class.
	DLQByClass map[string]int
	// DLQViaRepartition counts the dead letters of records read from the
	// repartition topic rather than from the input.
	DLQViaRepartition int

	// Violations are prefixed by what they concern: "input:", "read:",
	// "accepted:", "totals:", "dlq:", "txn:" or "offsets:".
	Violations []string
}

// OK reports whether no violation was found.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// reportLimit keeps a failure message readable when a broken run produces
// thousands of violations; Violations itself keeps them all.
const reportLimit = 30

func (r Report) String() string {
	var sb strings.Builder
	if r.OK() {
		sb.WriteString("billing check OK")
	} else {
		fmt.Fprintf(&sb, "billing check FAILED with %d violations", len(r.Violations))
	}
	fmt.Fprintf(&sb, "\n  input:   %d records: %d unique valid bills, %d duplicates; bad: %d malformed, %d zero-amount, %d oversized (%d of them re-sent)",
		r.InputRecords, r.UniqueValid, r.Duplicates, r.Malformed, r.ZeroAmount, r.Oversized, r.ResentBad)
	fmt.Fprintf(&sb, "\n  outputs: %d accepted, %d totals updates, %d dead letters:",
		r.Accepted, r.TotalsUpdates, r.DLQ)
	for i, c := range sortedKeys(r.DLQByClass) {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, " %d %s", r.DLQByClass[c], c)
		if c == ClassProcessing {
			fmt.Fprintf(&sb, " (%d via the repartition topic)", r.DLQViaRepartition)
		}
	}
	for i, v := range r.Violations {
		if i == reportLimit {
			fmt.Fprintf(&sb, "\n  ... and %d more", len(r.Violations)-reportLimit)
			break
		}
		sb.WriteString("\n  - ")
		sb.WriteString(v)
	}
	return sb.String()
}

func (r *Report) violate(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

type coord struct {
	p int32
	o int64
}

func (c coord) String() string { return fmt.Sprintf("%d@%d", c.p, c.o) }

// verdict is what the oracle expects of one input record.
type verdict int

const (
	good       verdict = iota // accepted once per bill_id
	malformed                 // a deserialization dead letter
	zeroAmount                // a processing dead letter
	oversized                 // a production dead letter
)

func (v verdict) class() string {
	switch v {
	case malformed:
		return ClassDeserialization
	case zeroAmount:
		return ClassProcessing
	case oversized:
		return ClassProduction
	}
	return ""
}

func (v verdict) String() string {
	switch v {
	case malformed:
		return "malformed"
	case zeroAmount:
		return "a bill for zero cents"
	case oversized:
		return "an oversized bill"
	}
	return "a good bill"
}

type inputEntry struct {
	rec     InputRecord
	bill    Bill
	valid   bool // parsed as a bill
	verdict verdict
}

// judge is the oracle's rule for a record that parsed. The order matters
// only for a bill that is both: an oversized bill fails at the first sink
// that would carry it, before the totals could refuse its amount.
func judge(b Bill) verdict {
	switch {
	case len(b.BillID) > OversizedBillID:
		return oversized
	case b.AmountCents == 0:
		return zeroAmount
	}
	return good
}

// repartDead is a dead letter whose headers name the repartition topic: its
// bytes must be those of the committed record there.
type repartDead struct {
	topic      string
	at         coord // in the DLQ
	src        coord // in the repartition topic
	key, value []byte
}

type acceptedEntry struct {
	at  coord // in bills-accepted
	val Accepted
}

type totalsEntry struct {
	at  coord // in account-totals
	val Totals
	bad bool // the value did not decode
}

// defaultCheckTimeout bounds a check whose context has no deadline.
const defaultCheckTimeout = 5 * time.Minute

// CheckBilling verifies the billing example's committed outputs against the
// input log as written, in the default topics, and the committed offsets of
// the application's consumer group (its application id).
func CheckBilling(ctx context.Context, addrs []string, input []InputRecord, group string) (Report, error) {
	return CheckBillingTopics(ctx, addrs, DefaultTopics(), input, group)
}

// CheckBillingTopics is CheckBilling for topics with other names. group is
// the application id, which also names the repartition topic.
//
// An error means the check could not be carried out; what the application
// got wrong is in the Report.
func CheckBillingTopics(ctx context.Context, addrs []string, topics Topics, input []InputRecord, group string) (Report, error) {
	return CheckBillingFork(ctx, addrs, topics, input, group)
}

// CheckBillingFork is CheckBillingTopics for a run that went on as other
// applications (a fork from a savepoint): groups are the application ids
// in order. Dead letters may name any of their repartition topics; the
// committed input offsets checked are the last group's.
func CheckBillingFork(ctx context.Context, addrs []string, topics Topics, input []InputRecord, groups ...string) (Report, error) {
	if len(groups) == 0 || slices.Contains(groups, "") {
		return Report{}, errors.New("group is required")
	}
	group := groups[len(groups)-1]
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCheckTimeout)
		defer cancel()
	}

	rep := Report{DLQByClass: make(map[string]int)}
	inputs, bills, badIDs, err := classify(topics, input, &rep)
	if err != nil {
		return rep, err
	}
	var reparts []string
	for _, g := range groups {
		reparts = append(reparts, RepartitionTopic(g))
	}
	// The repartition topics are listed for their open transactions; they
	// are read only where a dead letter points into them.
	written := append(topics.outputs(), reparts...)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return rep, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	// The high watermarks are listed before the stable offsets: a stable
	// offset behind a watermark listed earlier can then only mean a
	// transaction that is still open.
	hwm, err := listOffsets(ctx, adm.ListEndOffsets, written)
	if err != nil {
		return rep, err
	}
	lso, err := listOffsets(ctx, adm.ListCommittedOffsets, written)
	if err != nil {
		return rep, err
	}
	starts, err := listOffsets(ctx, adm.ListStartOffsets, written)
	if err != nil {
		return rep, err
	}
	// A topic nothing was due in may legitimately never have been created.
	bad := rep.Malformed + rep.ZeroAmount + rep.Oversized
	due := map[string]bool{topics.Accepted: rep.UniqueValid > 0, topics.Totals: rep.UniqueValid > 0, topics.DLQ: bad > 0}
	for _, t := range topics.outputs() {
		if _, ok := hwm[t]; !ok && due[t] {
			rep.violate("read: topic %s does not exist", t)
		}
	}
	for _, t := range written {
		for _, p := range sortedKeys(hwm[t]) {
			if l, h := lso[t][p], hwm[t][p]; l != h {
				rep.violate("txn: %s/%d: last stable offset %d is behind the high watermark %d: a transaction is still open", t, p, l, h)
			}
		}
	}

	var (
		accepted = make(map[string][]acceptedEntry) // by account
		byBill   = make(map[string][]coord)         // bill_id -> accepted input coords
		totals   = make(map[string][]totalsEntry)   // by account
		dead     = make(map[coord][]coord)          // input coord -> dlq coords
		viaRep   []repartDead
	)
	onRecord := func(r *kgo.Record) {
		at := coord{r.Partition, r.Offset}
		switch r.Topic {
		case topics.Accepted:
			rep.Accepted++
			checkAccepted(&rep, topics, r, at, inputs, bills, badIDs, accepted, byBill)
		case topics.Totals:
			rep.TotalsUpdates++
			e := totalsEntry{at: at}
			if err := json.Unmarshal(r.Value, &e.val); err != nil {
				rep.violate("totals: %s/%s: value is not totals: %v", topics.Totals, at, err)
				e.bad = true
			}
			if len(r.Key) == 0 {
				rep.violate("totals: %s/%s: record has no key", topics.Totals, at)
			}
			if v, ok := badIDs[e.val.LastBillID]; ok && !e.bad {
				rep.violate("totals: %s/%s: update for bill %s, %s, which belongs in the dead-letter topic", topics.Totals, at, clipString(e.val.LastBillID), v)
			}
			totals[string(r.Key)] = append(totals[string(r.Key)], e)
		case topics.DLQ:
			rep.DLQ++
			if src, ok := checkDead(&rep, topics, reparts, r, at, inputs, &viaRep); ok {
				dead[src] = append(dead[src], at)
			}
		}
	}

	spans := make(map[string]map[int32][2]int64)
	for _, t := range topics.outputs() {
		for p, end := range lso[t] {
			if start := starts[t][p]; start < end {
				if spans[t] == nil {
					spans[t] = make(map[int32][2]int64)
				}
				spans[t][p] = [2]int64{start, end}
			}
		}
	}
	unread, err := readCommitted(ctx, addrs, spans, onRecord)
	if err != nil {
		return rep, err
	}
	rep.Violations = append(rep.Violations, unread...)
	for _, repart := range reparts {
		var dead []repartDead
		for _, d := range viaRep {
			if d.topic == repart {
				dead = append(dead, d)
			}
		}
		if err := checkRepartitioned(ctx, &rep, addrs, topics, repart, dead, starts[repart], lso[repart]); err != nil {
			return rep, err
		}
	}

	checkAcceptedComplete(&rep, bills, byBill)
	checkTotals(&rep, topics, accepted, totals)
	checkDeadComplete(&rep, topics, inputs, dead)
	if err := checkGroup(ctx, &rep, addrs, adm, topics, group, inputs); err != nil {
		return rep, err
	}
	return rep, nil
}

// classify is the oracle: what the input log says the outputs must be. It
// returns the input by coordinates, the good bills by bill_id (their first
// occurrence) and the verdicts of the bad bills' ids.
func classify(topics Topics, input []InputRecord, rep *Report) (map[coord]*inputEntry, map[string]*inputEntry, map[string]verdict, error) {
	inputs := make(map[coord]*inputEntry, len(input))
	bills := make(map[string]*inputEntry) // bill_id -> first occurrence
	badIDs := make(map[string]verdict)
	badSeen := make(map[[2]string]bool) // key, value of bad records
	for _, rec := range input {
		if rec.Topic != "" && rec.Topic != topics.Input {
			return nil, nil, nil, fmt.Errorf("input record %d@%d is from topic %s, not %s", rec.Partition, rec.Offset, rec.Topic, topics.Input)
		}
		c := coord{rec.Partition, rec.Offset}
		if _, ok := inputs[c]; ok {
			return nil, nil, nil, fmt.Errorf("input log lists %s twice", c)
		}
		e := &inputEntry{rec: rec}
		inputs[c] = e
		rep.InputRecords++
		if b, err := ParseBill(rec.Value); err != nil {
			e.verdict = malformed
		} else {
			e.bill, e.valid, e.verdict = b, true, judge(b)
		}
		switch e.verdict {
		case malformed:
			rep.Malformed++
		case zeroAmount:
			rep.ZeroAmount++
		case oversized:
			rep.Oversized++
		}
		if e.verdict != good {
			// A nil key and an empty one are different records.
			k := [2]string{fmt.Sprintf("%t%s", rec.Key == nil, rec.Key), string(rec.Value)}
			if badSeen[k] {
				rep.ResentBad++
			}
			badSeen[k] = true
			if e.valid {
				badIDs[e.bill.BillID] = e.verdict
			}
			continue
		}
		if _, ok := bills[e.bill.BillID]; ok {
			rep.Duplicates++
			continue
		}
		bills[e.bill.BillID] = e
		rep.UniqueValid++
	}
	// A bad bill rolls back its deduplication entry, so the outcome of a
	// good and a bad bill sharing an id depends on which is processed
	// first: across input partitions, nothing in the log decides that.
	for _, id := range sortedKeys(badIDs) {
		if e, ok := bills[id]; ok {
			return nil, nil, nil, fmt.Errorf("input log: bill_id %s is both a good bill (input %s) and %s: the oracle cannot decide which wins",
				clipString(id), coord{e.rec.Partition, e.rec.Offset}, badIDs[id])
		}
	}
	return inputs, bills, badIDs, nil
}

func checkAccepted(rep *Report, topics Topics, r *kgo.Record, at coord, inputs map[coord]*inputEntry, bills map[string]*inputEntry,
	badIDs map[string]verdict, accepted map[string][]acceptedEntry, byBill map[string][]coord,
) {
	where := topics.Accepted + "/" + at.String()
	var a Accepted
	if err := json.Unmarshal(r.Value, &a); err != nil {
		rep.violate("accepted: %s: value is not an accepted bill: %v", where, err)
		return
	}
	if string(r.Key) != a.Account {
		rep.violate("accepted: %s: key %q is not the account %q", where, r.Key, a.Account)
	}
	if a.Topic != topics.Input {
		rep.violate("accepted: %s: bill %s names input topic %q, want %q", where, a.BillID, a.Topic, topics.Input)
	}
	src := coord{a.Partition, a.Offset}
	id := clipString(a.BillID)
	reported := false // that the bill is bad
	switch in, ok := inputs[src]; {
	case !ok:
		rep.violate("accepted: %s: bill %s names input %s, which is not in the input log", where, id, src)
	case !in.valid:
		rep.violate("accepted: %s: bill %s names input %s, which is malformed (%q)", where, id, src, clip(in.rec.Value))
	case in.bill != a.Bill:
		rep.violate("accepted: %s: bill %+v differs from input %s, which carries %+v", where, a.Bill, src, in.bill)
	case in.verdict != good:
		rep.violate("accepted: %s: bill %s names input %s, %s, which belongs in the dead-letter topic", where, id, src, in.verdict)
		reported = true
	}
	if _, ok := bills[a.BillID]; ok {
		byBill[a.BillID] = append(byBill[a.BillID], src)
	} else if v, isBad := badIDs[a.BillID]; isBad {
		if !reported {
			rep.violate("accepted: %s: bill %s is %s, which belongs in the dead-letter topic", where, id, v)
		}
	} else {
		rep.violate("accepted: %s: bill %s is not a valid bill of the input", where, id)
	}
	accepted[a.Account] = append(accepted[a.Account], acceptedEntry{at: at, val: a})
}

func checkAcceptedComplete(rep *Report, bills map[string]*inputEntry, byBill map[string][]coord) {
	for _, id := range sortedKeys(bills) {
		switch got := byBill[id]; {
		case len(got) == 0:
			rep.violate("accepted: bill %s (account %s, input %s) was never accepted", id, bills[id].bill.Account, coord{bills[id].rec.Partition, bills[id].rec.Offset})
		case len(got) > 1:
			rep.violate("accepted: bill %s was accepted %d times, from inputs %v", id, len(got), got)
		}
	}
}

// checkTotals replays each account's accepted bills in the order they were
// committed and requires the totals updates to be exactly that replay.
func checkTotals(rep *Report, topics Topics, accepted map[string][]acceptedEntry, totals map[string][]totalsEntry) {
	accounts := make(map[string]struct{})
	for a := range accepted {
		accounts[a] = struct{}{}
	}
	for a := range totals {
		accounts[a] = struct{}{}
	}
	for _, acct := range sortedKeys(accounts) {
		acc, tot := accepted[acct], totals[acct]
		slices.SortFunc(acc, func(x, y acceptedEntry) int { return cmpCoord(x.at, y.at) })
		slices.SortFunc(tot, func(x, y totalsEntry) int { return cmpCoord(x.at, y.at) })
		// Keyed by account, an account's records share one partition;
		// across partitions "the order they were accepted" means nothing.
		if ps := partitionsOf(acc, func(e acceptedEntry) coord { return e.at }); len(ps) > 1 {
			rep.violate("accepted: account %s is spread over partitions %v of %s", acct, ps, topics.Accepted)
		}
		if ps := partitionsOf(tot, func(e totalsEntry) coord { return e.at }); len(ps) > 1 {
			rep.violate("totals: account %s is spread over partitions %v of %s", acct, ps, topics.Totals)
		}
		if len(acc) != len(tot) {
			rep.violate("totals: account %s has %d updates for %d accepted bills", acct, len(tot), len(acc))
		}
		var (
			want     Totals
			first    string
			mismatch int
		)
		for i := range min(len(acc), len(tot)) {
			want = want.Add(acc[i].val.Bill)
			if got := tot[i]; got.bad || got.val != want {
				if mismatch == 0 {
					first = fmt.Sprintf("totals: account %s: update %d (%s/%s) is %+v, want %+v after bill %s (%s/%s)",
						acct, i+1, topics.Totals, got.at, got.val, want, acc[i].val.BillID, topics.Accepted, acc[i].at)
				}
				mismatch++
			}
		}
		switch {
		case mismatch == 1:
			rep.violate("%s", first)
		case mismatch > 1:
			rep.violate("%s; and %d later updates of the account differ", first, mismatch-1)
		}
	}
}

// checkDead checks one dead letter and returns the input record it stands
// for. A record that failed in the first sub-topology is dead-lettered as
// read from the input; one that failed after the repartition topic is
// dead-lettered as read from there, and names its input only through the
// coordinates the billing job stamped into the value.
func checkDead(rep *Report, topics Topics, reparts []string, r *kgo.Record, at coord, inputs map[coord]*inputEntry, viaRep *[]repartDead) (coord, bool) {
	where := topics.DLQ + "/" + at.String()
	hs := make(map[string]string, len(r.Headers))
	for _, h := range r.Headers {
		if _, ok := hs[h.Key]; !ok {
			hs[h.Key] = string(h.Value)
		}
	}
	class := hs[HeaderErrorClass]
	rep.DLQByClass[cmp.Or(class, "(no class)")]++
	if class == "" {
		rep.violate("dlq: %s: header %s is missing or empty", where, HeaderErrorClass)
	}
	if _, ok := hs[HeaderErrorMessage]; !ok {
		rep.violate("dlq: %s: header %s is missing", where, HeaderErrorMessage)
	}
	p, perr := strconv.ParseInt(hs[HeaderSourcePartition], 10, 32)
	o, oerr := strconv.ParseInt(hs[HeaderSourceOffset], 10, 64)
	if perr != nil || oerr != nil {
		rep.violate("dlq: %s: source headers %s=%q %s=%q are not decimal coordinates",
			where, HeaderSourcePartition, hs[HeaderSourcePartition], HeaderSourceOffset, hs[HeaderSourceOffset])
		return coord{}, false
	}
	hdr := coord{int32(p), o}

	var (
		src coord
		in  *inputEntry
		ok  bool
	)
	topic := hs[HeaderSourceTopic]
	repart := topic
	if !slices.Contains(reparts, topic) {
		repart = strings.Join(reparts, " or ")
	}
	switch topic {
	case topics.Input:
		src = hdr
		if in, ok = inputs[src]; !ok {
			rep.violate("dlq: %s: names input %s, which is not in the input log", where, src)
			return coord{}, false
		}
		if !bytes.Equal(r.Key, in.rec.Key) {
			rep.violate("dlq: %s: key %q differs from the key %q of input %s", where, clip(r.Key), clip(in.rec.Key), src)
		}
		if !bytes.Equal(r.Value, in.rec.Value) {
			rep.violate("dlq: %s: value %q differs from the value %q of input %s", where, clip(r.Value), clip(in.rec.Value), src)
		}
	case repart:
		rep.DLQViaRepartition++
		*viaRep = append(*viaRep, repartDead{topic: repart, at: at, src: hdr, key: r.Key, value: r.Value})
		var a Accepted
		if err := json.Unmarshal(r.Value, &a); err != nil {
			rep.violate("dlq: %s: from %s/%s, but the value %q is not a bill with its input coordinates: %v", where, repart, hdr, clip(r.Value), err)
			return coord{}, false
		}
		if a.Topic != topics.Input {
			rep.violate("dlq: %s: from %s/%s, bill %s names input topic %q, want %q", where, repart, hdr, clipString(a.BillID), a.Topic, topics.Input)
		}
		src = coord{a.Partition, a.Offset}
		if in, ok = inputs[src]; !ok {
			rep.violate("dlq: %s: from %s/%s, names input %s, which is not in the input log", where, repart, hdr, src)
			return coord{}, false
		}
		switch {
		case !in.valid:
			rep.violate("dlq: %s: from %s/%s, names input %s, which is malformed and cannot have been repartitioned", where, repart, hdr, src)
		case a.Bill != in.bill:
			rep.violate("dlq: %s: from %s/%s, bill %+v differs from input %s, which carries %+v", where, repart, hdr, a.Bill, src, in.bill)
		}
		if string(r.Key) != a.Account {
			rep.violate("dlq: %s: from %s/%s, key %q is not the account %q", where, repart, hdr, clip(r.Key), a.Account)
		}
	default:
		rep.violate("dlq: %s: header %s is %q, want %q or %q", where, HeaderSourceTopic, topic, topics.Input, repart)
		return coord{}, false
	}

	switch {
	case in.verdict == good:
		rep.violate("dlq: %s: input %s is the valid bill %s", where, src, clipString(in.bill.BillID))
	case class != in.verdict.class():
		rep.violate("dlq: %s: class %q, want %q: input %s is %s", where, class, in.verdict.class(), src, in.verdict)
	}
	return src, true
}

// checkRepartitioned requires every dead letter that names a record of the
// repartition topic to carry exactly that committed record's bytes: one
// derived from an aborted or invented record would otherwise pass, since its
// value names a genuine input.
func checkRepartitioned(ctx context.Context, rep *Report, addrs []string, topics Topics, repart string, dead []repartDead, starts, lso map[int32]int64) error {
	if len(dead) == 0 {
		return nil
	}
	type kv struct{ key, value []byte }
	want := make(map[coord]*kv)
	spans := make(map[int32][2]int64)
	for _, d := range dead {
		want[d.src] = nil
		start, sok := starts[d.src.p]
		end, eok := lso[d.src.p]
		if !sok || !eok || d.src.o < start || d.src.o >= end {
			continue // reported below as not found
		}
		se, ok := spans[d.src.p]
		if !ok {
			se = [2]int64{d.src.o, d.src.o + 1}
		}
		spans[d.src.p] = [2]int64{min(se[0], d.src.o), max(se[1], d.src.o+1)}
	}
	unread, err := readCommitted(ctx, addrs, map[string]map[int32][2]int64{repart: spans}, func(r *kgo.Record) {
		c := coord{r.Partition, r.Offset}
		if _, ok := want[c]; ok {
			want[c] = &kv{r.Key, r.Value}
		}
	})
	if err != nil {
		return err
	}
	rep.Violations = append(rep.Violations, unread...)
	for _, d := range dead {
		where := topics.DLQ + "/" + d.at.String()
		switch got := want[d.src]; {
		case got == nil:
			rep.violate("dlq: %s: names %s/%s, which is not a committed record", where, repart, d.src)
		case !bytes.Equal(got.key, d.key) || !bytes.Equal(got.value, d.value):
			rep.violate("dlq: %s: key %q value %q differ from the repartition record %s/%s: key %q value %q",
				where, clip(d.key), clip(d.value), repart, d.src, clip(got.key), clip(got.value))
		}
	}
	return nil
}

func checkDeadComplete(rep *Report, topics Topics, inputs map[coord]*inputEntry, dead map[coord][]coord) {
	cs := make([]coord, 0, len(inputs))
	for c, in := range inputs {
		if in.verdict != good {
			cs = append(cs, c)
		}
	}
	slices.SortFunc(cs, cmpCoord)
	for _, c := range cs {
		switch got := dead[c]; {
		case len(got) == 0:
			rep.violate("dlq: input %s/%s (%q), %s, has no dead letter", topics.Input, c, clip(inputs[c].rec.Value), inputs[c].verdict)
		case len(got) > 1:
			rep.violate("dlq: input %s/%s, %s, has %d dead letters, at %v", topics.Input, c, inputs[c].verdict, len(got), got)
		}
	}
}

func checkGroup(ctx context.Context, rep *Report, addrs []string, adm *kadm.Client, topics Topics, group string, inputs map[coord]*inputEntry) error {
	ends, err := listOffsets(ctx, adm.ListEndOffsets, []string{topics.Input})
	if err != nil {
		return err
	}
	// An input log that stops short of the topic would make the oracle
	// incomplete, and every verdict above meaningless.
	logEnd := make(map[int32]int64)
	for c := range inputs {
		logEnd[c.p] = max(logEnd[c.p], c.o+1)
	}
	for _, p := range sortedKeys(ends[topics.Input]) {
		if end := ends[topics.Input][p]; logEnd[p] < end {
			rep.violate("input: %s/%d ends at %d but the input log given stops at %d", topics.Input, p, end, logEnd[p])
		}
	}

	// A group that never committed has no offsets, which the check below
	// reports as missing commits.
	committed, err := groupOffsets(ctx, adm, group)
	if err != nil {
		return err
	}
	for _, p := range sortedKeys(ends[topics.Input]) {
		end := ends[topics.Input][p]
		o, ok := committed.Lookup(topics.Input, p)
		switch {
		case !ok || o.At < 0:
			if end > 0 {
				rep.violate("offsets: group %s has no committed offset for %s/%d, whose end offset is %d", group, topics.Input, p, end)
			}
		case o.At != end:
			rep.violate("offsets: group %s committed %s/%d at %d, but its end offset is %d", group, topics.Input, p, o.At, end)
		}
	}
	// A run checked before its group consumed the repartition topic would
	// show every bill still in it as never accepted; say so plainly.
	repart := RepartitionTopic(group)
	waiting, err := unconsumed(ctx, addrs, adm, group, repart)
	if err != nil {
		return err
	}
	for _, p := range sortedKeys(waiting[repart]) {
		rep.violate("offsets: group %s never consumed %s/%d from %d on: the run stopped before its records were processed", group, repart, p, waiting[repart][p])
	}
	return nil
}

// listOffsets flattens a kadm listing, leaving out topics that do not exist.
func listOffsets(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topics []string) (map[string]map[int32]int64, error) {
	listed, err := list(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing offsets of %v: %w", topics, err)
	}
	out := make(map[string]map[int32]int64)
	var firstErr error
	listed.Each(func(o kadm.ListedOffset) {
		if errors.Is(o.Err, kerr.UnknownTopicOrPartition) && o.Partition == -1 {
			return
		}
		if o.Err != nil {
			firstErr = cmp.Or(firstErr, fmt.Errorf("listing offsets of %s/%d: %w", o.Topic, o.Partition, o.Err))
			return
		}
		if out[o.Topic] == nil {
			out[o.Topic] = make(map[int32]int64)
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out, firstErr
}

// readIdle is how long a read may see no progress at all before it gives up
// on the partitions it has not finished.
const readIdle = 30 * time.Second

// readCommitted calls fn for every committed data record of spans (topic ->
// partition -> [start, end)) in partition order. Control records are asked
// for so that a partition whose last batch is a transaction marker is seen to
// reach its end. The partitions it could not finish are returned as
// violations.
func readCommitted(ctx context.Context, addrs []string, spans map[string]map[int32][2]int64, fn func(*kgo.Record)) ([]string, error) {
	type state struct{ next, end int64 }
	parts := make(map[string]map[int32]*state)
	offsets := make(map[string]map[int32]kgo.Offset)
	remaining := 0
	for t, ps := range spans {
		parts[t] = make(map[int32]*state)
		offsets[t] = make(map[int32]kgo.Offset)
		for p, se := range ps {
			parts[t][p] = &state{next: se[0], end: se[1]}
			offsets[t][p] = kgo.NewOffset().At(se[0])
			remaining++
		}
	}
	if remaining == 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ConsumePartitions(offsets),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	var (
		lastErr      error
		lastProgress = time.Now()
	)
	for remaining > 0 && ctx.Err() == nil && time.Since(lastProgress) < readIdle {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				lastErr = fmt.Errorf("%s/%d: %w", t, p, err)
			}
		})
		finished := make(map[string][]int32)
		fs.EachRecord(func(r *kgo.Record) {
			st := parts[r.Topic][r.Partition]
			if st == nil || st.next >= st.end || r.Offset < st.next {
				return
			}
			lastProgress = time.Now()
			if r.Offset < st.end && !r.Attrs.IsControl() {
				fn(r)
			}
			st.next = r.Offset + 1
			if st.next >= st.end {
				remaining--
				finished[r.Topic] = append(finished[r.Topic], r.Partition)
			}
		})
		if len(finished) > 0 {
			// Anything past the end was committed after the check
			// started and is not part of what is being checked.
			cl.PauseFetchPartitions(finished)
		}
	}
	if remaining > 0 && ctx.Err() != nil {
		return nil, fmt.Errorf("reading outputs: %w", ctx.Err())
	}
	var unread []string
	for _, t := range sortedKeys(parts) {
		for _, p := range sortedKeys(parts[t]) {
			if st := parts[t][p]; st.next < st.end {
				unread = append(unread, fmt.Sprintf("read: %s/%d: read committed stopped at offset %d, short of %d (last error: %v)", t, p, st.next, st.end, lastErr))
			}
		}
	}
	return unread, nil
}

func cmpCoord(a, b coord) int {
	if a.p != b.p {
		return int(a.p) - int(b.p)
	}
	switch {
	case a.o < b.o:
		return -1
	case a.o > b.o:
		return 1
	}
	return 0
}

func partitionsOf[E any](es []E, at func(E) coord) []int32 {
	var ps []int32
	for _, e := range es {
		if p := at(e).p; !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	return ps
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func clipString(s string) string { return clip([]byte(s)) }

// clip keeps violations about large or binary values short.
func clip(b []byte) string {
	const n = 80
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// Outputs are the committed outputs of a run, each topic's records in
// partition-then-offset order.
type Outputs map[string][]OutRecord

// OutRecord is an output record as read.
type OutRecord struct {
	Partition int32
	Key       []byte
	Value     []byte
	Headers   map[string]string
}

// ReadOutputs reads every committed record of the outputs.
func ReadOutputs(ctx context.Context, addrs []string, topics []string) (Outputs, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := listOffsets(ctx, kadm.NewClient(cl).ListEndOffsets, topics)
	if err != nil {
		return nil, err
	}
	spans := map[string]map[int32][2]int64{}
	for t, ps := range ends {
		spans[t] = map[int32][2]int64{}
		for p, e := range ps {
			spans[t][p] = [2]int64{0, e}
		}
	}
	out := Outputs{}
	unread, err := readCommitted(ctx, addrs, spans, func(r *kgo.Record) {
		hs := map[string]string{}
		for _, h := range r.Headers {
			hs[h.Key] = string(h.Value)
		}
		out[r.Topic] = append(out[r.Topic], OutRecord{Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: hs})
	})
	if err == nil && len(unread) > 0 {
		err = fmt.Errorf("%v", unread)
	}
	return out, err
}
