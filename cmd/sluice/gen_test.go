package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testbroker"
)

// genCluster gives a gen test its cluster (testbroker: the in-process broker,
// or SLUICE_TEST_BROKERS) and its topic, created with 3 partitions. On the
// in-process broker the topic is name, and topicArgs is empty when name is
// gen's default, so that the default is what the test exercises; on a shared
// cluster, where a fixed name would meet an earlier run's records, the topic
// is a fresh one named after name, and topicArgs passes it with --topic.
func genCluster(t *testing.T, name string) (addr, topic string, topicArgs []string) {
	t.Helper()
	addrs := testbroker.Addrs(t)
	topic = name
	if len(testbroker.External()) > 0 {
		topic = testbroker.Unique(t, name+"-")
	}
	if err := broker.CreateTopic(testCtx(t), addrs, topic, 3, nil); err != nil {
		t.Fatal(err)
	}
	if topic != "bills" {
		topicArgs = []string{"--topic", topic}
	}
	return strings.Join(addrs, ","), topic, topicArgs
}

// runSluice runs the sluice command with args under ctx.
func runSluice(ctx context.Context, args ...string) (string, error) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// genReport classifies generated records the way billing would, from the
// bytes alone.
type genReport struct {
	bills, duplicates, malformed, zero int
	accounts                           map[string]int
	problems                           []string
}

// checkGenRecords checks that every record is a bill billing accepts
// (unless allowBad), over accounts acct-00000 .. acct-<accounts-1>, keyed by
// its account, its bill id or nothing, with ids bill-<seed in hex>-<n> that
// repeat only as identical copies (and only when allowDup).
func checkGenRecords(recs []*kgo.Record, accounts int, seed uint64, allowBad, allowDup bool) genReport {
	rep := genReport{accounts: map[string]int{}}
	bad := func(i int, format string, args ...any) {
		rep.problems = append(rep.problems, fmt.Sprintf("record %d: ", i)+fmt.Sprintf(format, args...))
	}
	idRE := regexp.MustCompile(fmt.Sprintf(`^bill-%x-[1-9][0-9]*$`, seed))
	seen := map[string]*kgo.Record{}
	for i, r := range recs {
		b, err := examples.BillSerde.Decode(r.Value)
		if err != nil {
			rep.malformed++
			if !allowBad {
				bad(i, "not a bill: %v", err)
			}
			continue
		}
		if b.AmountCents == 0 {
			rep.zero++
			if !allowBad {
				bad(i, "bill %s for zero cents", b.BillID)
			}
			continue
		}
		if prev, ok := seen[b.BillID]; ok {
			rep.duplicates++
			if !allowDup {
				bad(i, "bill id %s repeated", b.BillID)
			} else if !bytes.Equal(prev.Value, r.Value) || !bytes.Equal(prev.Key, r.Key) {
				bad(i, "bill id %s re-sent with a different key or value", b.BillID)
			}
			continue
		}
		seen[b.BillID] = r
		rep.bills++
		rep.accounts[b.Account]++
		if !idRE.MatchString(b.BillID) {
			bad(i, "bill id %q is not bill-%x-<n>", b.BillID, seed)
		}
		n, err := strconv.Atoi(strings.TrimPrefix(b.Account, "acct-"))
		if !strings.HasPrefix(b.Account, "acct-") || err != nil || n < 0 || n >= accounts {
			bad(i, "account %q not among acct-00000..acct-%05d", b.Account, accounts-1)
		}
		if r.Key != nil && string(r.Key) != b.Account && string(r.Key) != b.BillID {
			bad(i, "key %q is neither the account %q nor the bill id", r.Key, b.Account)
		}
		if b.TS <= 0 {
			bad(i, "ts %d", b.TS)
		}
	}
	return rep
}

func TestGenBillingValid(t *testing.T) {
	addr, topic, topicArgs := genCluster(t, "bills")
	const count, accounts, seed = 400, 7, 42
	out, err := runSluice(testCtx(t), append([]string{"gen", "billing", "--brokers", addr,
		"--count", strconv.Itoa(count), "--rate", "0", "--accounts", strconv.Itoa(accounts), "--seed", strconv.Itoa(seed), "--report", "0"}, topicArgs...)...)
	t.Log(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, fmt.Sprintf("gen: done: %d records to %s", count, topic)) {
		t.Errorf("output lacks the summary line")
	}
	recs, err := readback.ReadCommitted(testCtx(t), strings.Split(addr, ","), topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != count {
		t.Fatalf("%d records in bills, want %d", len(recs), count)
	}
	rep := checkGenRecords(recs, accounts, seed, false, false)
	for _, p := range rep.problems {
		t.Error(p)
	}
	if rep.bills != count {
		t.Errorf("%d distinct valid bills, want %d", rep.bills, count)
	}
	// 400 bills over 7 accounts: every account is used.
	if len(rep.accounts) != accounts {
		t.Errorf("bills over %d accounts, want %d: %v", len(rep.accounts), accounts, rep.accounts)
	}
	var keyed [3]int // account, bill id, none
	for _, r := range recs {
		b, _ := examples.BillSerde.Decode(r.Value)
		switch {
		case r.Key == nil:
			keyed[2]++
		case string(r.Key) == b.Account:
			keyed[0]++
		default:
			keyed[1]++
		}
	}
	// The mix is 4:4:2; each kind must occur, or billing's repartition
	// (or its direct path) goes untested.
	for i, n := range keyed {
		if n == 0 {
			t.Errorf("no records keyed by %s", []string{"account", "bill id", "nothing"}[i])
		}
	}

	// Negative controls: the checker must see each kind of wrong record.
	wrong := []struct {
		rec  *kgo.Record
		want string
	}{
		{&kgo.Record{Value: []byte(`{"bill_id":"bill-2a-9999"`)}, "not a bill"},
		{&kgo.Record{Value: []byte(`{"bill_id":"bill-2a-9998","account":"acct-00007","amount_cents":5,"ts":1}`)}, "not among"},
		{&kgo.Record{Key: []byte("x"), Value: []byte(`{"bill_id":"bill-2a-9997","account":"acct-00001","amount_cents":5,"ts":1}`)}, "neither the account"},
		{&kgo.Record{Value: []byte(`{"bill_id":"bill-2a-9996","account":"acct-00001","amount_cents":0,"ts":1}`)}, "zero cents"},
		{&kgo.Record{Value: []byte(`{"bill_id":"bill-ff-1","account":"acct-00001","amount_cents":5,"ts":1}`)}, "is not bill-2a-"},
		{recs[0], "repeated"},
	}
	for _, w := range wrong {
		rep := checkGenRecords(append(recs[:len(recs):len(recs)], w.rec), accounts, seed, false, false)
		if !slicesContainSubstring(rep.problems, w.want) {
			t.Errorf("checker missed %q in %s: %v", w.want, w.rec.Value, rep.problems)
		}
	}
}

func TestGenBillingBadAndDuplicates(t *testing.T) {
	addr, topic, _ := genCluster(t, "in")
	// The compose file's way: brokers from the environment.
	t.Setenv(envName(keyBrokers), addr)
	const count, accounts, seed = 600, 50, 7
	out, err := runSluice(testCtx(t), "gen", "billing", "--topic", topic, "--count", strconv.Itoa(count),
		"--rate", "0", "--accounts", strconv.Itoa(accounts), "--seed", strconv.Itoa(seed),
		"--bad-ratio", "0.2", "--dup-ratio", "0.1", "--report", "0")
	t.Log(out)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := readback.ReadCommitted(testCtx(t), strings.Split(addr, ","), topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != count {
		t.Fatalf("%d records, want %d", len(recs), count)
	}
	rep := checkGenRecords(recs, accounts, seed, true, true)
	for _, p := range rep.problems {
		t.Error(p)
	}
	// The mix is a function of the seed; these bounds hold for any
	// reasonable seed (expected 60 malformed, 60 zero, 60 duplicates).
	for _, c := range []struct {
		name   string
		n, min int
	}{{"malformed", rep.malformed, 20}, {"zero-amount", rep.zero, 20}, {"duplicates", rep.duplicates, 20}} {
		if c.n < c.min || c.n > 150 {
			t.Errorf("%d %s records of %d, want between %d and 150", c.n, c.name, count, c.min)
		}
	}
	if got := rep.bills + rep.duplicates + rep.malformed + rep.zero; got != count {
		t.Errorf("classified %d records of %d", got, count)
	}
	// The command's own tally agrees with the bytes.
	want := fmt.Sprintf("bills %d, duplicates %d, malformed %d, zero-amount %d", rep.bills, rep.duplicates, rep.malformed, rep.zero)
	if !strings.Contains(out, want) {
		t.Errorf("summary does not say %q", want)
	}
}

// TestGenBillingStopsOnCancel runs the generator without --count, as the
// compose file does, and stops it the way SIGTERM does: by ending its
// context. Every record it reports must be in the topic.
func TestGenBillingStopsOnCancel(t *testing.T) {
	addr, topic, topicArgs := genCluster(t, "bills")
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var (
		wg  sync.WaitGroup
		out string
		err error
	)
	wg.Go(func() {
		out, err = runSluice(ctx, append([]string{"gen", "billing", "--brokers", addr, "--rate", "2000", "--report", "0"}, topicArgs...)...)
	})

	cl, cerr := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...))
	if cerr != nil {
		t.Fatal(cerr)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	actx := testCtx(t)
	total := func() int64 {
		ends, err := adm.ListEndOffsets(actx, topic)
		if err != nil {
			return 0
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n
	}
	for i := 0; total() < 50; i++ {
		if i == 1000 {
			cancel()
			wg.Wait()
			t.Fatalf("fewer than 50 records after 1000 polls; gen: %v\n%s", err, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	t.Log(out)
	if err != nil {
		t.Fatalf("gen stopped with %v, want a clean stop", err)
	}
	m := regexp.MustCompile(`gen: done: (\d+) records to ` + regexp.QuoteMeta(topic)).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("no summary line")
	}
	if n, _ := strconv.ParseInt(m[1], 10, 64); n != total() {
		t.Errorf("gen reports %s records, the topic holds %d", m[1], total())
	}
}

func TestGenRejects(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"gen", "wordcount"}, `no generator for "wordcount"`},
		{[]string{"gen", "billing", "--bad-ratio", "0.8", "--dup-ratio", "0.5"}, "add up to at most 1"},
		{[]string{"gen", "billing", "--rate", "-1"}, "--rate"},
		{[]string{"gen", "billing", "--accounts", "0"}, "--accounts"},
		{[]string{"gen", "billing", "--topic", ""}, "--topic"},
		{[]string{"gen", "billing", "--security-protocol", "sasl_ssl"}, "sasl"},
	} {
		_, err := runSluice(testCtx(t), c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}

func slicesContainSubstring(ss []string, sub string) bool {
	for _, s := range ss {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
