package serve

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/processor"
)

// queryInstance is one wordcount instance with its HTTP server on
// 127.0.0.1:0, advertised as its endpoint.
type queryInstance struct {
	app  *processor.App
	addr string
	stop func() // stops the app, then the server
}

func startQueryInstance(t *testing.T, brokers []string, appID, stateDir, in, out string, extra ...processor.Opt) *queryInstance {
	t.Helper()
	return startServedInstance(t, brokers, appID, stateDir, in, out, served{}, extra...)
}

// served is how an instance serves: over TLS with tls (if not nil), with
// the endpoints' options opts.
type served struct {
	tls  *tls.Config
	opts []Opt
}

func startServedInstance(t *testing.T, brokers []string, appID, stateDir, in, out string, s served, extra ...processor.Opt) *queryInstance {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := append([]processor.Opt{
		processor.ApplicationID(appID), processor.Brokers(brokers...), processor.StateDir(stateDir),
		processor.AdvertisedEndpoint(ln.Addr().String()), processor.Logger(log),
	}, extra...)
	app, err := processor.New(examples.WordCount(in, out, in+"-dlq"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	stopHTTP := serveOn(t, ln, app, log, s.opts...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	qi := &queryInstance{app: app, addr: ln.Addr().String()}
	stopped := false
	qi.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("instance %s: %v", qi.addr, err)
		}
		stopHTTP()
	}
	t.Cleanup(qi.stop)
	return qi
}

type reply struct {
	code       int
	body       string
	servedBy   string
	retryAfter string
}

func httpGet(t *testing.T, addr, path string, hdr map[string]string) reply {
	t.Helper()
	resp, err := request(http.DefaultClient, "http://"+addr+path, hdr)
	if err != nil {
		t.Fatal(err)
	}
	return readReply(resp)
}

func readReply(resp *http.Response) reply {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, string(b), resp.Header.Get(headerServedBy), resp.Header.Get("Retry-After")}
}

// request GETs url with the headers hdr.
func request(cl *http.Client, url string, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return cl.Do(req)
}

// getSettled retries a query while it answers 503 (a rebalance or restore
// in progress), at most 200 times.
func getSettled(t *testing.T, addr, path string) reply {
	t.Helper()
	return getSettledWith(t, http.DefaultClient, "http://"+addr+path, nil)
}

// getSettledWith is getSettled with a client, a full URL and headers.
func getSettledWith(t *testing.T, cl *http.Client, url string, hdr map[string]string) reply {
	t.Helper()
	var r reply
	for range 200 {
		resp, err := request(cl, url, hdr)
		if err != nil {
			t.Fatal(err)
		}
		if r = readReply(resp); r.code != http.StatusServiceUnavailable {
			return r
		}
		time.Sleep(50 * time.Millisecond)
	}
	return r
}

// produceWords writes lines to topic and returns the word counts and the
// number of records wordcount processes for them (each line once, each word
// once more from the repartition topic).
func produceWords(t *testing.T, brokers []string, topic string, lines []string) (map[string]int64, int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[string]int64{}
	records := int64(len(lines))
	for _, l := range lines {
		for _, w := range examples.Words(l) {
			want[w]++
			records++
		}
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(l)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return want, records
}

func waitFor(t *testing.T, what string, limit time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitSpread waits until every instance is ready with some of the tasks,
// total tasks in all.
func waitSpread(t *testing.T, insts []*queryInstance, total int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the %d instances to share the %d tasks", len(insts), total), time.Minute, func() bool {
		n := 0
		for _, qi := range insts {
			st := qi.app.Status()
			if !st.Ready || len(st.Tasks) == 0 {
				return false
			}
			n += len(st.Tasks)
		}
		return n == total
	})
}

type keyReply struct {
	Store     string          `json:"store"`
	Partition int32           `json:"partition"`
	Key       json.RawMessage `json:"key"`
	Value     json.RawMessage `json:"value"`
}

type pageReply struct {
	Entries []struct {
		Key    string `json:"key"`
		RawKey string `json:"raw_key"`
		Value  int64  `json:"value"`
	} `json:"entries"`
	Next string `json:"next"`
}

// TestQueryRoutedAcrossThreeInstances runs wordcount on three instances and
// asks one of them for every word: each answer must match the oracle, some
// must have been served by the other instances (forwarded), and without
// forwarding those would be missing.
func TestQueryRoutedAcrossThreeInstances(t *testing.T) {
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	in, out, appID := "q3-lines", "q3-counts", "q3"
	for _, tp := range []string{in, out} {
		if err := broker.CreateTopic(ctx, b.Addrs(), tp, 6, nil); err != nil {
			t.Fatal(err)
		}
	}
	var insts []*queryInstance
	for range 3 {
		insts = append(insts, startQueryInstance(t, b.Addrs(), appID, t.TempDir(), in, out))
	}
	// Settled: all three in the group, the 12 tasks (2 sub-topologies × 6)
	// spread over them and restored.
	waitSpread(t, insts, 12)
	// Words with characters a URL must escape, and one of each count.
	var lines []string
	for i := range 300 {
		lines = append(lines, fmt.Sprintf("the w%d a/b 100%% x?y#z é%d q&r=s", i%17, i%5))
	}
	want, records := produceWords(t, b.Addrs(), in, lines)
	waitFor(t, "every record to be processed", time.Minute, func() bool {
		var n int64
		for _, qi := range insts {
			n += qi.app.Stats().Processed.Load()
		}
		return n >= records
	})

	front := insts[0]
	others := map[string]bool{insts[1].addr: true, insts[2].addr: true}
	forwarded := 0
	var remoteWord string
	for w, n := range want {
		r := getSettled(t, front.addr, "/stores/counts/keys/"+url.PathEscape(w))
		if r.code != http.StatusOK {
			t.Errorf("%q: %d %s", w, r.code, r.body)
			continue
		}
		var kr keyReply
		if err := json.Unmarshal([]byte(r.body), &kr); err != nil {
			t.Fatalf("%q: %v in %s", w, err, r.body)
		}
		if string(kr.Value) != fmt.Sprint(n) || string(kr.Key) != mustJSON(w) {
			t.Errorf("%q: key %s value %s, want %d", w, kr.Key, kr.Value, n)
		}
		// The instance that served it is the one that owns it.
		loc, err := front.app.Locate("counts", []byte(w))
		if err != nil {
			t.Fatal(err)
		}
		if loc.Local && r.servedBy != front.addr || !loc.Local && r.servedBy != loc.Endpoint {
			t.Errorf("%q served by %q; owner %+v", w, r.servedBy, loc)
		}
		if others[r.servedBy] {
			forwarded++
			remoteWord = w
		}
	}
	if forwarded == 0 || forwarded == len(want) {
		t.Fatalf("%d of %d words served by other instances: want some, not all", forwarded, len(want))
	}
	// Negative control: without forwarding (a request that says it was
	// already forwarded is answered locally or not at all) the words
	// other instances own are not answered.
	if r := httpGet(t, front.addr, "/stores/counts/keys/"+url.PathEscape(remoteWord), map[string]string{headerForwarded: "test"}); r.code != http.StatusServiceUnavailable || r.retryAfter == "" {
		t.Errorf("%q without forwarding: %d %s, want 503 with Retry-After", remoteWord, r.code, r.body)
	}
	if _, _, err := front.app.Get("counts", []byte(remoteWord), false); !errors.Is(err, processor.ErrNotLocal) {
		t.Errorf("local Get of a remote word: %v, want ErrNotLocal", err)
	}
	// Absent words and stores are 404, from any instance.
	if r := getSettled(t, front.addr, "/stores/counts/keys/absent-word"); r.code != http.StatusNotFound {
		t.Errorf("absent word: %d %s", r.code, r.body)
	}
	if r := httpGet(t, front.addr, "/stores/nope/keys/the", nil); r.code != http.StatusNotFound {
		t.Errorf("unknown store: %d %s", r.code, r.body)
	}

	// All keys, paged through one instance: each word once, in order,
	// with its count.
	got := map[string]int64{}
	var prev string
	after := ""
	pages := 0
	for ; pages < 100; pages++ {
		r := getSettled(t, front.addr, "/stores/counts/keys?limit=4&after="+after)
		if r.code != http.StatusOK {
			t.Fatalf("page %d: %d %s", pages, r.code, r.body)
		}
		var p pageReply
		if err := json.Unmarshal([]byte(r.body), &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) > 4 {
			t.Fatalf("page of %d entries, limit 4", len(p.Entries))
		}
		for _, e := range p.Entries {
			if _, dup := got[e.Key]; dup || e.Key <= prev {
				t.Errorf("%q after %q (duplicate or out of order)", e.Key, prev)
			}
			got[e.Key], prev = e.Value, e.Key
		}
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if fmt.Sprint(sortedMap(got)) != fmt.Sprint(sortedMap(want)) {
		t.Errorf("paged keys:\n%v\nwant\n%v", sortedMap(got), sortedMap(want))
	}
	if pages < 2 {
		t.Errorf("%d pages for %d words with limit 4", pages, len(want))
	}
	// A range of keys: [w1, w3) holds w1, w10..w16 and w2.
	r := getSettled(t, insts[2].addr, "/stores/counts/keys?from=w1&to=w3&limit=100")
	var p pageReply
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || r.code != 200 {
		t.Fatalf("range: %d %s", r.code, r.body)
	}
	var keys []string
	for _, e := range p.Entries {
		keys = append(keys, e.Key)
	}
	if fmt.Sprint(keys) != "[w1 w10 w11 w12 w13 w14 w15 w16 w2]" || p.Next != "" {
		t.Errorf("range [w1, w3): %v next %q", keys, p.Next)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedMap(m map[string]int64) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return out
}

// TestQueryRestoring503: while the task owning a key restores, its queries
// answer 503 with Retry-After, or the local state with stale=true; once
// restored, the committed value. The restore is held by a transaction left
// open on the changelog (the restore waits for it to be decided).
func TestQueryRestoring503(t *testing.T) {
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	in, out, appID := "qr-lines", "qr-counts", "qr"
	for _, tp := range []string{in, out} {
		if err := broker.CreateTopic(ctx, b.Addrs(), tp, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	first := startQueryInstance(t, b.Addrs(), appID, dir, in, out)
	want, records := produceWords(t, b.Addrs(), in, []string{"the cat", "the hat", "the end"})
	waitFor(t, "the first run", time.Minute, func() bool { return first.app.Stats().Processed.Load() >= records })
	if r := getSettled(t, first.addr, "/stores/counts/keys/the"); r.code != 200 || !strings.Contains(r.body, `"value": 3`) {
		t.Fatalf("first run: %d %s", r.code, r.body)
	}
	first.stop()

	// Hold the next restore: a transaction open on the changelog.
	blocker, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.TransactionalID("qr-blocker"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	if err := blocker.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	bogus := []byte{0, 0, 0, 0, 0, 0, 0x03, 0xe7} // 999
	if err := blocker.ProduceSync(ctx, &kgo.Record{Topic: appID + "-counts-changelog", Partition: 0, Key: []byte("the"), Value: bogus}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	second := startQueryInstance(t, b.Addrs(), appID, dir, in, out, processor.TransactionTimeout(30*time.Second))
	waitFor(t, "the counts task to restore", time.Minute, func() bool {
		for _, ts := range second.app.Status().Tasks {
			if ts.ID == "1_0" && ts.State == processor.TaskRestoring {
				return true
			}
		}
		return false
	})
	r := httpGet(t, second.addr, "/stores/counts/keys/the", nil)
	if r.code != http.StatusServiceUnavailable || r.retryAfter == "" {
		t.Errorf("during restore: %d %q %s, want 503 with Retry-After", r.code, r.retryAfter, r.body)
	}
	if r := httpGet(t, second.addr, "/stores/counts/keys?limit=10", nil); r.code != http.StatusServiceUnavailable || r.retryAfter == "" {
		t.Errorf("range during restore: %d %s, want 503", r.code, r.body)
	}
	// Stale: the local state as the first run committed it.
	r = httpGet(t, second.addr, "/stores/counts/keys/the?stale=true", nil)
	if r.code != http.StatusOK || !strings.Contains(r.body, fmt.Sprintf(`"value": %d`, want["the"])) {
		t.Errorf("stale read during restore: %d %s", r.code, r.body)
	}

	if err := blocker.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	r = getSettled(t, second.addr, "/stores/counts/keys/the")
	if r.code != http.StatusOK || !strings.Contains(r.body, fmt.Sprintf(`"value": %d`, want["the"])) {
		t.Errorf("after restore: %d %s (the aborted 999 must not show)", r.code, r.body)
	}
}

// serveOn serves Register's endpoints on ln until the returned stop is
// called, as cmd/sluice does.
func serveOn(t *testing.T, ln net.Listener, app *processor.App, log *slog.Logger, opts ...Opt) (stop func()) {
	t.Helper()
	mux := http.NewServeMux()
	Register(mux, app, append([]Opt{Logger(log)}, opts...)...)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("http server: %v", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
}
