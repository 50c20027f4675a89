package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/testbroker"
)

// consumeFixture is two topics (3 partitions and 1) holding, in this order,
// a committed transaction, an aborted one and another committed one; the
// last offset of each partition written to is a transaction marker.
type consumeFixture struct {
	addrs              []string
	brokers            string
	a, b               string
	committed, aborted []*kgo.Record // as produced, with their offsets
}

func newConsumeFixture(t *testing.T) *consumeFixture {
	t.Helper()
	f := &consumeFixture{addrs: testbroker.Addrs(t)}
	f.brokers = strings.Join(f.addrs, ",")
	f.a, f.b = testbroker.Unique(t, "consume-a-"), testbroker.Unique(t, "consume-b-")
	ctx := testCtx(t)
	if err := broker.CreateTopic(ctx, f.addrs, f.a, 3, nil); err != nil {
		t.Fatal(err)
	}
	if err := broker.CreateTopic(ctx, f.addrs, f.b, 1, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addrs...), kgo.TransactionalID(f.a+"-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	uuid := []byte("123e4567-e89b-12d3-a456-426614174000")
	txn := func(commit bool, recs ...*kgo.Record) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		end := kgo.TryCommit
		if !commit {
			end = kgo.TryAbort
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
		if commit {
			f.committed = append(f.committed, recs...)
		} else {
			f.aborted = append(f.aborted, recs...)
		}
	}
	rec := func(topic string, p int32, k, v []byte, hs ...kgo.RecordHeader) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: p, Key: k, Value: v, Headers: hs}
	}
	txn(true,
		rec(f.a, 0, nil, []byte("nil key")),
		rec(f.a, 0, []byte{}, []byte("empty key")),
		rec(f.a, 1, []byte{0xff, 0x00, 0xfe}, []byte{0xc3, 0x28}, kgo.RecordHeader{Key: "bin", Value: []byte{0x80}}),
		rec(f.a, 1, []byte("k"), nil, kgo.RecordHeader{Key: "nil", Value: nil}, kgo.RecordHeader{Key: "", Value: []byte("empty key")}),
		rec(f.a, 2, uuid, []byte(`{"json":"<value>","tab":"\t"}`), kgo.RecordHeader{Key: "class", Value: []byte("decode")}, kgo.RecordHeader{Key: "class", Value: []byte("twice")}),
		rec(f.b, 0, bytes.Repeat([]byte("k"), 200), []byte("in b")),
	)
	txn(false,
		rec(f.a, 0, []byte("aborted"), []byte("never read_committed")),
		rec(f.b, 0, []byte("aborted"), []byte("never read_committed")),
	)
	txn(true,
		rec(f.a, 0, []byte("after"), []byte("the abort")),
		rec(f.b, 0, []byte("ключ"), []byte("значение")),
	)
	return f
}

// consumed is one line of consume --format json, decoded: each bytes field
// from its text field or its _base64 field, exactly one of which must be
// there.
type consumed struct {
	topic     string
	partition int32
	offset    int64
	timestamp int64
	key       []byte
	value     []byte
	headers   []kgo.RecordHeader
}

func bytesField(m map[string]json.RawMessage, name string) ([]byte, error) {
	text, hasText := m[name]
	b64, hasB64 := m[name+"_base64"]
	switch {
	case hasText == hasB64:
		return nil, fmt.Errorf("want exactly one of %s and %s_base64", name, name)
	case hasB64:
		var s string
		if err := json.Unmarshal(b64, &s); err != nil {
			return nil, err
		}
		return base64.StdEncoding.DecodeString(s)
	case string(text) == "null":
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(text, &s); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

func parseConsumed(t *testing.T, out string) []consumed {
	t.Helper()
	var recs []consumed
	for line := range strings.Lines(out) {
		var m map[string]json.RawMessage
		var c consumed
		var hs []map[string]json.RawMessage
		err := json.Unmarshal([]byte(line), &m)
		if err == nil {
			err = json.Unmarshal(m["headers"], &hs)
		}
		if err == nil {
			err = json.Unmarshal(m["topic"], &c.topic)
		}
		for _, f := range []struct {
			name string
			to   any
		}{{"partition", &c.partition}, {"offset", &c.offset}, {"timestamp", &c.timestamp}} {
			if err == nil {
				err = json.Unmarshal(m[f.name], f.to)
			}
		}
		if err == nil {
			c.key, err = bytesField(m, "key")
		}
		if err == nil {
			c.value, err = bytesField(m, "value")
		}
		for _, h := range hs {
			var k, v []byte
			if err == nil {
				k, err = bytesField(h, "key")
			}
			if err == nil {
				v, err = bytesField(h, "value")
			}
			c.headers = append(c.headers, kgo.RecordHeader{Key: string(k), Value: v})
		}
		if err != nil || m["headers"] == nil {
			t.Fatalf("line %q: %v", line, err)
		}
		recs = append(recs, c)
	}
	return recs
}

// diffConsumed describes how got differs from want, taken as sets, with
// each partition in offset order; "" if not.
func diffConsumed(got []consumed, want []*kgo.Record) string {
	var d []string
	if len(got) != len(want) {
		d = append(d, fmt.Sprintf("%d records, want %d", len(got), len(want)))
	}
	last := map[string]int64{}
	for _, g := range got {
		tp := fmt.Sprintf("%s/%d", g.topic, g.partition)
		if o, ok := last[tp]; ok && g.offset <= o {
			d = append(d, fmt.Sprintf("%s: offset %d after %d", tp, g.offset, o))
		}
		last[tp] = g.offset
		i := slices.IndexFunc(want, func(w *kgo.Record) bool {
			return w.Topic == g.topic && w.Partition == g.partition && w.Offset == g.offset
		})
		if i < 0 {
			d = append(d, fmt.Sprintf("%s@%d: not expected", tp, g.offset))
			continue
		}
		w := want[i]
		if (g.key == nil) != (w.Key == nil) || !bytes.Equal(g.key, w.Key) || (g.value == nil) != (w.Value == nil) || !bytes.Equal(g.value, w.Value) ||
			g.timestamp != w.Timestamp.UnixMilli() ||
			!slices.EqualFunc(g.headers, w.Headers, func(a, b kgo.RecordHeader) bool {
				return a.Key == b.Key && (a.Value == nil) == (b.Value == nil) && bytes.Equal(a.Value, b.Value)
			}) {
			d = append(d, fmt.Sprintf("%s@%d: key %q value %q headers %v ts %d, want key %q value %q headers %v ts %d",
				tp, g.offset, g.key, g.value, g.headers, g.timestamp, w.Key, w.Value, w.Headers, w.Timestamp.UnixMilli()))
		}
	}
	return strings.Join(d, "\n")
}

// TestConsumeJSON: read_committed (the default) prints every committed
// record of both topics and none of the aborted transaction's, then stops
// at the end although a marker is each partition's last offset;
// --read-uncommitted prints the aborted ones too. Nil and empty keys,
// values and headers, bytes that are not UTF-8 and repeated header keys
// come back exact.
func TestConsumeJSON(t *testing.T) {
	f := newConsumeFixture(t)
	start := time.Now()
	out, stderr, err := runSluiceIO(testCtx(t), "", "consume", f.a, f.b, "--from-beginning", "--format", "json", "--brokers", f.brokers)
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, stderr)
	}
	// Stopped at the end, not by the test's deadline.
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("consume took %v to reach the end", el)
	}
	got := parseConsumed(t, out)
	if d := diffConsumed(got, f.committed); d != "" {
		t.Errorf("read_committed:\n%s\n%s", d, out)
	}
	if !strings.Contains(out, `"key_base64":"/wD+"`) || !strings.Contains(out, `"value":null`) || !strings.Contains(out, `"key":null`) {
		t.Errorf("consume output lacks a base64 key, a null value or a null key:\n%s", out)
	}

	// Negative control: the checker sees an aborted record, and a value
	// that changed.
	if diffConsumed(got, append(slices.Clone(f.committed), f.aborted[0])) == "" {
		t.Error("diffConsumed misses a record that is not there")
	}
	changed := slices.Clone(got)
	changed[0].value = append(slices.Clone(changed[0].value), '!')
	if diffConsumed(changed, f.committed) == "" {
		t.Error("diffConsumed misses a changed value")
	}

	out, stderr, err = runSluiceIO(testCtx(t), "", "consume", f.a, f.b, "--from-beginning", "--format", "json", "--read-uncommitted", "--brokers", f.brokers)
	if err != nil {
		t.Fatalf("consume --read-uncommitted: %v\n%s", err, stderr)
	}
	if d := diffConsumed(parseConsumed(t, out), append(slices.Clone(f.committed), f.aborted...)); d != "" {
		t.Errorf("read_uncommitted:\n%s\n%s", d, out)
	}
}

// TestConsumeText: KEY<TAB>VALUE lines in each partition's order; --max
// stops after N; without --from-beginning a bounded consume prints nothing.
func TestConsumeText(t *testing.T) {
	f := newConsumeFixture(t)
	out, _, err := runSluiceIO(testCtx(t), "", "consume", f.b, "--from-beginning", "--brokers", f.brokers)
	want := strings.Repeat("k", 200) + "\tin b\nключ\tзначение\n"
	if err != nil || out != want {
		t.Errorf("consume %s: %v, printed %q, want %q", f.b, err, out, want)
	}
	out, _, err = runSluiceIO(testCtx(t), "", "consume", f.a, f.b, "--from-beginning", "--max", "2", "--brokers", f.brokers)
	if err != nil || strings.Count(out, "\n") != 2 {
		t.Errorf("consume --max 2: %v, printed %q", err, out)
	}
	out, _, err = runSluiceIO(testCtx(t), "", "consume", f.a, "--brokers", f.brokers)
	if err != nil || out != "" {
		t.Errorf("consume from the end: %v, printed %q", err, out)
	}
	if _, _, err := runSluiceIO(testCtx(t), "", "consume", f.a, testbroker.Unique(t, "absent-"), "--brokers", f.brokers); err == nil || !strings.Contains(err.Error(), "sluice topic create absent-") {
		t.Errorf("consume of a missing topic: %v", err)
	}
	if _, _, err := runSluiceIO(testCtx(t), "", "consume", f.a, "--format", "yaml", "--brokers", f.brokers); err == nil {
		t.Error("consume --format yaml: no error")
	}
}

// TestConsumeFollow: --follow --max waits for new records only, and
// --idle-timeout ends a consume that sees none within its bound; a canceled
// context (SIGINT) ends --follow cleanly.
func TestConsumeFollow(t *testing.T) {
	f := newConsumeFixture(t)
	var (
		wg  sync.WaitGroup
		out string
		err error
	)
	wg.Go(func() {
		out, _, err = runSluiceIO(testCtx(t), "", "consume", f.a, "--follow", "--max", "2", "--idle-timeout", "20s", "--brokers", f.brokers)
	})
	// The consumer starts at the end it finds: records produced before
	// it looked would not be new. Produce until it has two.
	cl, cerr := kgo.NewClient(kgo.SeedBrokers(f.addrs...), kgo.DefaultProduceTopic(f.a))
	if cerr != nil {
		t.Fatal(cerr)
	}
	defer cl.Close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for i := 0; ; i++ {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Key: []byte("new"), Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(200 * time.Millisecond):
			if i < 100 {
				continue
			}
			t.Fatal("consume --follow --max 2 still running after 100 new records")
		}
		break
	}
	if err != nil || strings.Count(out, "new\t") != 2 || strings.Count(out, "\n") != 2 {
		t.Errorf("consume --follow --max 2: %v, printed %q", err, out)
	}

	start := time.Now()
	out, _, err = runSluiceIO(testCtx(t), "", "consume", f.a, "--follow", "--idle-timeout", "300ms", "--brokers", f.brokers)
	if el := time.Since(start); err != nil || out != "" || el < 300*time.Millisecond || el > 10*time.Second {
		t.Errorf("consume --idle-timeout 300ms: %v after %v, printed %q", err, el, out)
	}

	ctx, cancel := context.WithCancel(testCtx(t))
	time.AfterFunc(300*time.Millisecond, cancel)
	start = time.Now()
	if out, _, err := runSluiceIO(ctx, "", "consume", f.a, "--follow", "--brokers", f.brokers); err != nil || out != "" || time.Since(start) > 10*time.Second {
		t.Errorf("consume --follow, interrupted: %v after %v, printed %q", err, time.Since(start), out)
	}
}

// TestConsumeGroup: --group commits the offsets of the records it printed
// (not of those it fetched beyond --max), and the next consume of the group
// starts there: together they print every record once.
func TestConsumeGroup(t *testing.T) {
	f := newConsumeFixture(t)
	group := testbroker.Unique(t, "consume-group-")
	first, _, err := runSluiceIO(testCtx(t), "", "consume", f.a, f.b, "--from-beginning", "--group", group, "--max", "3", "--format", "json", "--brokers", f.brokers)
	if err != nil {
		t.Fatal(err)
	}
	rest, _, err := runSluiceIO(testCtx(t), "", "consume", f.a, f.b, "--from-beginning", "--group", group, "--format", "json", "--brokers", f.brokers)
	if err != nil {
		t.Fatal(err)
	}
	a, b := parseConsumed(t, first), parseConsumed(t, rest)
	if len(a) != 3 {
		t.Errorf("first consume printed %d records, want 3:\n%s", len(a), first)
	}
	both := append(a, b...)
	slices.SortStableFunc(both, func(x, y consumed) int { return strings.Compare(x.topic, y.topic) })
	if d := diffConsumed(both, f.committed); d != "" {
		t.Errorf("the two consumes of group %s:\n%s\nfirst:\n%s\nrest:\n%s", group, d, first, rest)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(testCtx(t), group)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.committed {
		if o, ok := offs.Lookup(r.Topic, r.Partition); !ok || o.At <= r.Offset {
			t.Errorf("group %s committed %v for %s/%d, want past %d", group, o.At, r.Topic, r.Partition, r.Offset)
		}
	}
}
