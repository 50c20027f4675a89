package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/state"
	"github.com/sluice-streams/sluice/store"
)

// win is a window as the test compares them: key bytes, bounds, count.
type win struct {
	key        string
	start, end int64
	count      int64
}

func sameWindows(got, want []win) error {
	sort.Slice(got, func(i, j int) bool {
		return got[i].key < got[j].key || got[i].key == got[j].key && got[i].start < got[j].start
	})
	sort.Slice(want, func(i, j int) bool {
		return want[i].key < want[j].key || want[i].key == want[j].key && want[i].start < want[j].start
	})
	if len(got) != len(want) {
		return fmt.Errorf("%d windows, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("window %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	return nil
}

// TestStateToolsPageviewsWindows runs pageviews over users of every key
// length, UUIDs and non-UTF-8 keys, all in one minute so that no window
// closes, stops it, and reads both window stores back: the per-page
// minute counts and the per-user sessions equal the oracle, through the
// CLI (decoded with --example, raw without) and through state.Windows.
func TestStateToolsPageviewsWindows(t *testing.T) {
	in := testbroker.Unique(t, "st-views-")
	app := testbroker.Unique(t, "st-pv-")
	ctx := testCtx(t)
	addrs := testbroker.Addrs(t)
	for _, tp := range []string{in, in + "-min", in + "-late", in + "-sess", in + "-dlq"} {
		if err := broker.CreateTopic(ctx, addrs, tp, 3, nil); err != nil {
			t.Fatal(err)
		}
	}
	users := testkeys.Bytes()
	for _, u := range testkeys.UUIDs(20) {
		users = append(users, []byte(u))
	}
	nonUTF8 := [][]byte{{0xff}, {0xc3, 0x28}, {0x80, 0x00, 0xfe}, bytes.Repeat([]byte{0xff, 0xfe}, 70)}
	users = append(users, nonUTF8...)
	pages := append(testkeys.Lengths()[1:40:40], testkeys.UUIDs(3)...)
	minute := time.Minute.Milliseconds()
	base := time.Now().UnixMilli() / minute * minute
	perPage := map[string]int64{}
	type sess struct{ first, last, n int64 }
	perUser := map[string]*sess{}
	var recs []*kgo.Record
	for i, u := range users {
		for j := range i%3 + 1 {
			ts := base + int64((i*7919+j*3001)%50000) // all in [base, base+50s)
			page := pages[(i+j)%len(pages)]
			v, _ := json.Marshal(examples.PageView{User: "u", Page: page, TS: ts})
			recs = append(recs, &kgo.Record{Topic: in, Key: u, Value: v, Timestamp: time.UnixMilli(ts)})
			perPage[page]++
			s := perUser[string(u)]
			if s == nil {
				s = &sess{first: ts, last: ts}
				perUser[string(u)] = s
			}
			s.first, s.last, s.n = min(s.first, ts), max(s.last, ts), s.n+1
		}
	}
	var wantPages, wantSessions []win
	for p, n := range perPage {
		wantPages = append(wantPages, win{p, base, base + minute, n})
	}
	for u, s := range perUser {
		wantSessions = append(wantSessions, win{u, s.first, s.last + 1, s.n})
	}

	run := startExample(t, addrs, "pageviews", app, "--input", in, "--per-minute", in+"-min", "--late", in+"-late",
		"--sessions", in+"-sess", "--dlq", in+"-dlq")
	produceAll(t, addrs, recs)
	run.waitConsumed(t, []string{in}, []string{app + "-pageviews-by-page-repartition"})
	run.stopClean(t)
	appDir := filepath.Join(run.root, app)

	// CLI, decoded through the example's serdes.
	dump := func(store string, args ...string) []win {
		t.Helper()
		out, err := stateCmd(t, append([]string{"dump", appDir, store, "--format", "json"}, args...)...)
		if err != nil {
			t.Fatalf("dump %s: %v", store, err)
		}
		var ws []win
		dec := json.NewDecoder(strings.NewReader(out))
		for dec.More() {
			var e struct {
				Value     int64
				Window    *state.Bounds
				KeyBase64 string `json:"key_base64"`
			}
			if err := dec.Decode(&e); err != nil {
				t.Fatal(err)
			}
			if e.Window == nil {
				t.Fatalf("dump %s: an entry without its window", store)
			}
			kb, _ := base64.StdEncoding.DecodeString(e.KeyBase64)
			ws = append(ws, win{string(kb), e.Window.Start, e.Window.End, e.Value})
		}
		return ws
	}
	if err := sameWindows(dump("page-counts", "--example", "pageviews"), wantPages); err != nil {
		t.Fatalf("page-counts: %v", err)
	}
	got := dump("user-sessions", "--example", "pageviews")
	if err := sameWindows(got, wantSessions); err != nil {
		t.Fatalf("user-sessions: %v", err)
	}
	// Negative control: one view more in one session is seen.
	got[0].count++
	if sameWindows(got, wantSessions) == nil {
		t.Fatal("sameWindows missed a count off by one")
	}
	got[0].count--
	got[0].end++
	if sameWindows(got, wantSessions) == nil {
		t.Fatal("sameWindows missed an end off by one")
	}

	if out, err := stateCmd(t, "dump", appDir, "page-counts", "--example", "pageviews", "--limit", "3"); err != nil || strings.Count(out, "\n") != 3 {
		t.Fatalf("dump of a window store --limit 3: %v\n%s", err, out)
	}
	// get: a non-UTF-8 user's session, by the base64 of its key.
	for _, u := range nonUTF8 {
		out, err := stateCmd(t, "get", appDir, "user-sessions", "--example", "pageviews", "--key-base64", base64.StdEncoding.EncodeToString(u))
		s := perUser[string(u)]
		if want := fmt.Sprintf("[%d,%d)\t%d\n", s.first, s.last+1, s.n); err != nil || !strings.HasSuffix(out, want) {
			t.Fatalf("get user %x: %v %q, want ...%q", u, err, out, want)
		}
	}
	if _, err := stateCmd(t, "get", appDir, "user-sessions", "--example", "pageviews", "--key-base64", base64.StdEncoding.EncodeToString([]byte("nobody"))); err == nil || !strings.Contains(err.Error(), "has no window") {
		t.Fatalf("get of a user without a session: %v", err)
	}

	// Without the example: raw entries, base64; every user's window data
	// key (layout.WindowKeyPrefix) is among them, non-UTF-8 ones too.
	out, err := stateCmd(t, "dump", appDir, "user-sessions", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	raw := map[string]bool{}
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e struct {
			Key       any
			KeyBase64 string `json:"key_base64"`
		}
		if err := dec.Decode(&e); err != nil {
			t.Fatal(err)
		}
		if e.Key != nil {
			t.Fatalf("a raw dump decoded a key: %v", e.Key)
		}
		kb, _ := base64.StdEncoding.DecodeString(e.KeyBase64)
		if kb[0] == layout.WindowData {
			k, _, err := layout.ParseWindowKey(kb)
			if err != nil {
				t.Fatal(err)
			}
			raw[string(k)] = true
		}
	}
	for u := range perUser {
		if !raw[u] {
			t.Fatalf("raw dump: no window of user %x", u)
		}
	}
	if out, err := stateCmd(t, "ls", appDir); err != nil || !strings.Contains(out, "unknown") {
		t.Fatalf("ls without the example: %v\n%s, want layouts unknown", err, out)
	}

	// The Go reader, typed through the caller's serdes.
	r, err := state.Open(appDir, state.WithTopology(examples.PageViews(in, in+"-min", in+"-late", in+"-sess", in+"-dlq")))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got = nil
	if err := state.Windows(r, "user-sessions", serde.Bytes, serde.Int64, func(w state.Window[[]byte, int64]) error {
		got = append(got, win{string(w.Key), w.Start, w.End, w.Value})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := sameWindows(got, wantSessions); err != nil {
		t.Fatalf("state.Windows(user-sessions): %v", err)
	}
	if err := state.KeyValues(r, "page-counts", serde.String, serde.Int64, func(state.KeyValue[string, int64]) error { return nil }); err == nil || !strings.Contains(err.Error(), "wrong store layout") {
		t.Fatalf("KeyValues of a window store: %v, want ErrLayout", err)
	}
	infos, err := r.Stores()
	if err != nil {
		t.Fatal(err)
	}
	layouts := map[string]string{}
	for _, s := range infos {
		layouts[s.Store] = s.Layout
	}
	if layouts["page-counts"] != "window" || layouts["user-sessions"] != "window" {
		t.Fatalf("layouts %v", layouts)
	}
	t.Logf("stores: %v", layouts)
}

// TestStateLsLayouts: with --example, ls names the layout of every store
// of enrich (key-value, join buffers, a time store, a global table) from
// its topology; without, every layout is unknown.
func TestStateLsLayouts(t *testing.T) {
	root := t.TempDir()
	app := filepath.Join(root, "enrich-copy")
	stores := map[string]string{
		"0_0/order-payments-left":              "stream-join buffer",
		"0_0/order-payments-right":             "stream-join buffer",
		"1_0/customers":                        "key-value",
		"1_0/revenue-per-customer":             "key-value",
		"1_0/revenue-by-tier-repartition-time": "time",
		"2_0/revenue-by-tier":                  "key-value",
		"global/customers-global":              "global table",
	}
	for s := range stores {
		eng, err := store.OpenPebble(filepath.Join(app, s))
		if err != nil {
			t.Fatal(err)
		}
		eng.Close()
	}
	for _, example := range []string{"enrich", ""} {
		out, err := stateCmd(t, "ls", root, "--format", "json", "--example", example)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		dec := json.NewDecoder(strings.NewReader(out))
		for dec.More() {
			var s state.StoreInfo
			if err := dec.Decode(&s); err != nil {
				t.Fatal(err)
			}
			want, ok := stores[s.Task+"/"+s.Store]
			if example == "" && s.Task != "global" {
				want = "unknown"
			}
			if !ok || s.Layout != want || s.Records != 0 || s.ChangelogOffset != -1 {
				t.Errorf("--example %q: %+v, want layout %q, empty", example, s, want)
			}
			n++
		}
		if n != len(stores) {
			t.Errorf("--example %q: %d stores listed, want %d:\n%s", example, n, len(stores), out)
		}
	}
	if _, err := stateCmd(t, "ls", root, "--example", "no-such"); err == nil || !strings.Contains(err.Error(), `no example "no-such"`) {
		t.Errorf("--example no-such: %v", err)
	}
	if _, err := stateCmd(t, "ls", root, "--format", "yaml"); err == nil || !strings.Contains(err.Error(), "want text or json") {
		t.Errorf("--format yaml: %v", err)
	}
}

// TestStateDumpUndecodable: an entry the example's serdes refuse (a
// non-UTF-8 word in wordcount's counts) is dumped raw with the reason,
// and the entries beside it are still decoded (in key order: 0xff last).
func TestStateDumpUndecodable(t *testing.T) {
	root := t.TempDir()
	eng, err := store.OpenPebble(filepath.Join(root, "sluice-wordcount", "1_0", "counts"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := serde.Int64.Encode(7)
	if err := eng.Apply([]store.Write{{Key: []byte("a"), Value: n}, {Key: []byte{0xff, 0xfe}, Value: n}, {Key: []byte("z"), Value: n}}, 2); err != nil {
		t.Fatal(err)
	}
	eng.Close()
	out, err := stateCmd(t, "dump", root, "counts", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"task":"1_0","partition":0,"key":"a","value":7,"key_base64":"YQ==","value_base64":"AAAAAAAAAAc="}
{"task":"1_0","partition":0,"key":"z","value":7,"key_base64":"eg==","value_base64":"AAAAAAAAAAc="}
{"task":"1_0","partition":0,"key_base64":"//4=","value_base64":"AAAAAAAAAAc=","error":"state: store \"counts\" task 1_0: key fffe: serde: cannot decode: string is not valid UTF-8"}
`
	if out != want {
		t.Fatalf("dump:\n%s\nwant:\n%s", out, want)
	}
}
