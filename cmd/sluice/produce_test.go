package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/testbroker"
)

// runSluiceIO runs the sluice command with args under ctx, stdin from in,
// and returns its stdout and stderr apart.
func runSluiceIO(ctx context.Context, in string, args ...string) (stdout, stderr string, err error) {
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(in))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// readAll returns every record of topic, read_uncommitted, in partition and
// offset order.
func readAll(t *testing.T, addrs []string, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	ends := endOffsets(t, addrs, topic)
	var total int64
	for _, e := range ends {
		total += e
	}
	var recs []*kgo.Record
	for int64(len(recs)) < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d of %d records", topic, len(recs), total)
		}
		recs = append(recs, fs.Records()...)
	}
	slices.SortFunc(recs, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return recs
}

// endOffsets returns the end offset of each partition of topic.
func endOffsets(t *testing.T, addrs []string, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, o := range ends[topic] {
		out[p] = o.Offset
	}
	return out
}

// wantRecord is a record produce should have made from a line.
type wantRecord struct {
	key     []byte // nil: none
	value   string
	headers []kgo.RecordHeader
}

// diffRecords describes how got differs from want (in order), "" if not.
func diffRecords(got []*kgo.Record, want []wantRecord) string {
	var d []string
	if len(got) != len(want) {
		d = append(d, fmt.Sprintf("%d records, want %d", len(got), len(want)))
	}
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if (g.Key == nil) != (w.key == nil) || !bytes.Equal(g.Key, w.key) || string(g.Value) != w.value ||
			!slices.EqualFunc(g.Headers, w.headers, func(a, b kgo.RecordHeader) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }) {
			d = append(d, fmt.Sprintf("record %d: key %q (nil %t) value %q headers %v, want key %q (nil %t) value %q headers %v",
				i, g.Key, g.Key == nil, g.Value, g.Headers, w.key, w.key == nil, w.value, w.headers))
		}
	}
	return strings.Join(d, "\n")
}

// TestProduceLines: keys of every length and shape, values holding the
// separator again, headers (a value holding "=", an empty one, none), empty
// keys and values; each keyed record in its key's murmur2 partition, as
// Kafka's Java client and sluice put it; the count printed.
func TestProduceLines(t *testing.T) {
	addrs := testbroker.Addrs(t)
	b := strings.Join(addrs, ",")
	topic := testbroker.Unique(t, "produce-")
	if err := broker.CreateTopic(testCtx(t), addrs, topic, 3, nil); err != nil {
		t.Fatal(err)
	}
	uuid := "123e4567-e89b-12d3-a456-426614174000"
	long := strings.Repeat("k", 200)
	var in strings.Builder
	var want []wantRecord
	add := func(line string, w wantRecord) {
		in.WriteString(line + "\n")
		want = append(want, w)
	}
	add("\tk|v", wantRecord{key: []byte("k"), value: "v"})
	add("a=1,b=x=y,c=\t|", wantRecord{key: []byte{}, value: "", headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("x=y")}, {Key: "c", Value: []byte{}}}})
	add("\t"+uuid+"|v|with|bars", wantRecord{key: []byte(uuid), value: "v|with|bars"})
	add("\t"+long+"|"+long, wantRecord{key: []byte(long), value: long})
	add("src=cli\tключ|значение\t", wantRecord{key: []byte("ключ"), value: "значение\t", headers: []kgo.RecordHeader{{Key: "src", Value: []byte("cli")}}})
	add("\tx|windows line\r", wantRecord{key: []byte("x"), value: "windows line"})
	for i := range 20 {
		add(fmt.Sprintf("\tkey-%d|%d", i, i), wantRecord{key: fmt.Appendf(nil, "key-%d", i), value: fmt.Sprint(i)})
	}

	_, stderr, err := runSluiceIO(testCtx(t), in.String(), "produce", topic, "--brokers", b, "--headers", "--key-separator", "|")
	if err != nil {
		t.Fatalf("produce: %v\n%s", err, stderr)
	}
	if want := fmt.Sprintf("produced %d records to %s\n", len(want), topic); stderr != want {
		t.Errorf("produce printed %q, want %q", stderr, want)
	}
	got := readAll(t, addrs, topic)
	hasher := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	byKey := map[string]*kgo.Record{}
	for _, r := range got {
		byKey[string(r.Key)] = r
		if len(r.Key) > 0 {
			if p := int32(hasher.Partition(r, 3)); p != r.Partition {
				t.Errorf("key %q in partition %d, its murmur2 partition is %d", r.Key, r.Partition, p)
			}
		}
	}
	var ordered []*kgo.Record
	for _, w := range want {
		if r, ok := byKey[string(w.key)]; ok {
			ordered = append(ordered, r)
		}
	}
	if len(got) != len(want) {
		ordered = got
	}
	if d := diffRecords(ordered, want); d != "" {
		t.Error(d)
	}
	// Negative control: the checker sees a changed header.
	bad := slices.Clone(want)
	bad[1].headers = bad[1].headers[:2]
	if diffRecords(ordered, bad) == "" {
		t.Error("diffRecords misses a missing header")
	}
}

// TestProducePartitionNoKey: --partition puts every record there, without a
// key (null, not empty).
func TestProducePartitionNoKey(t *testing.T) {
	addrs := testbroker.Addrs(t)
	topic := testbroker.Unique(t, "produce-p-")
	if err := broker.CreateTopic(testCtx(t), addrs, topic, 3, nil); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runSluiceIO(testCtx(t), "one\n\nthree=3|x\n", "produce", topic, "--brokers", strings.Join(addrs, ","), "--partition", "2")
	if err != nil || stderr != "produced 3 records to "+topic+"\n" {
		t.Fatalf("produce: %v\n%s", err, stderr)
	}
	got := readAll(t, addrs, topic)
	if d := diffRecords(got, []wantRecord{{value: "one"}, {value: ""}, {value: "three=3|x"}}); d != "" {
		t.Error(d)
	}
	for _, r := range got {
		if r.Partition != 2 {
			t.Errorf("record %q in partition %d, want 2", r.Value, r.Partition)
		}
	}
}

// TestProduceRejects: a bad line stops produce with its number, after the
// lines before it were delivered; a bad flag or a missing topic before
// anything is sent.
func TestProduceRejects(t *testing.T) {
	addrs := testbroker.Addrs(t)
	b := strings.Join(addrs, ",")
	topic := testbroker.Unique(t, "produce-r-")
	if err := broker.CreateTopic(testCtx(t), addrs, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	sent := int64(0)
	for _, c := range []struct {
		in    string
		args  []string
		want  string
		valid int64 // lines before the bad one
	}{
		{"ok\nok\nbad \xff\xfe\nnever\n", nil, "line 3: not valid UTF-8", 2},
		{"0123456789\n01234567890\n", []string{"--max-line-bytes", "10"}, "line 2: longer than 10 bytes", 1},
		{"0123456789\r\n" + strings.Repeat("y", 100) + "\n", []string{"--max-line-bytes", "10"}, "line 2: longer than 10 bytes", 1},
		{"k|v\nno separator\n", []string{"--key-separator", "|"}, "line 2: no key separator", 1},
		{"a=1\tv\nnotab\n", []string{"--headers"}, "line 2: no TAB after the headers", 1},
		{"a=1,b\tv\n", []string{"--headers"}, `line 1: header "b": want key=value`, 0},
		{"=1\tv\n", []string{"--headers"}, `line 1: header "=1"`, 0},
	} {
		_, stderr, err := runSluiceIO(testCtx(t), c.in, append([]string{"produce", topic, "--brokers", b}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("produce %q %v: %v, want an error with %q", c.in, c.args, err, c.want)
		}
		if want := fmt.Sprintf("produced %d record%s to %s\n", c.valid, plural(c.valid), topic); stderr != want {
			t.Errorf("produce %q: printed %q, want %q", c.in, stderr, want)
		}
		sent += c.valid
	}
	if n := endOffsets(t, addrs, topic)[0]; n != sent {
		t.Errorf("topic holds %d records, want %d (the lines before each bad one)", n, sent)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"produce", testbroker.Unique(t, "absent-"), "--brokers", b}, "sluice topic create absent-"},
		{[]string{"produce", topic, "--brokers", b, "--max-line-bytes", "0"}, "--max-line-bytes"},
		{[]string{"produce", topic, "--brokers", b, "--partition", "-2"}, "--partition"},
	} {
		if _, _, err := runSluiceIO(testCtx(t), "x\n", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}
