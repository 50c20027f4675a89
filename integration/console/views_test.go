package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/processor/serve"
)

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// taskRowsJS lists the tasks the overview shows, with their state.
const taskRowsJS = `JSON.stringify([...document.querySelectorAll('#tasks-table tr[data-task]')].map(r => r.dataset.task + '=' + r.dataset.state))`

// overview: the tasks the page lists are those GET /tasks has, each
// running; the instances panel says what GET /instances gives (or that it
// is unavailable); the charts draw once samples exist. Negative control: a
// console over an app that never ran lists no task and says why.
func overview(t *testing.T, ctx context.Context, wc *instance, brokers []string, lines, shots string) {
	// Records arrive while the page watches, so the charts move.
	stop := make(chan struct{})
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(lines))
		if err != nil {
			return
		}
		defer cl.Close()
		for i := 0; i < 1200; i++ { // at most 1200 batches, 100 ms apart
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			rs := make([]*kgo.Record, 20+i%30)
			for j := range rs {
				rs[j] = &kgo.Record{Value: fmt.Appendf(nil, "live record %d of batch %d", j, i)}
			}
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = cl.ProduceSync(c, rs...).FirstErr()
			cancel()
		}
	}()
	defer func() { close(stop); <-fed }()

	page(t, ctx, chromedp.Navigate(wc.base+"/#/overview"))
	var tasks []processor.TaskStatus
	getJSON(t, wc.base+"/tasks", &tasks)
	var want []string
	for _, ts := range tasks {
		want = append(want, ts.ID+"=running")
	}
	slices.Sort(want)
	if len(want) == 0 {
		t.Fatal("GET /tasks lists no task")
	}
	wantJSON, _ := json.Marshal(want)
	waitFor(t, ctx, taskRowsJS+" === "+js(string(wantJSON)), taskRowsJS, 20*time.Second)
	if got := eval[string](t, ctx, `document.querySelector('#tasks-table tr[data-task] .badge').textContent`); got != "running" {
		t.Errorf("a running task's badge reads %q", got)
	}
	// The real group view (GET /instances): this instance's row.
	if code := getJSON(t, wc.base+"/instances", nil); code != http.StatusOK {
		t.Errorf("GET /instances: %d", code)
	}
	endpoint := strings.TrimPrefix(wc.base, "http://")
	waitFor(t, ctx, fmt.Sprintf(`document.querySelector('#instances-table tr[data-instance=%s]')`, js(endpoint)), `document.querySelector('#instances').textContent`, 20*time.Second)
	// Charts: two samples make the first point; the page polls every 2 s.
	waitFor(t, ctx, `document.querySelector('#chart-throughput path[data-series="in"]') && document.querySelectorAll('#chart-throughput path[data-series="in"]')[0].getAttribute('d').split('L').length > 3`, `document.querySelector('#chart-throughput').innerHTML.slice(0, 300)`, 25*time.Second)
	waitFor(t, ctx, `Number(document.querySelector('#card-in .card-value').textContent.replace(/,/g, '')) > 200`, `document.querySelector('#card-in').textContent`, 20*time.Second)
	waitFor(t, ctx, `document.querySelector('#chart-latency path[data-series="p99"]')`, `document.querySelector('#chart-latency').innerHTML.slice(0, 300)`, 20*time.Second)
	// Where the loop's time goes: shares of each interval, so the three
	// lines' last values add up to at most 100 % (seconds since the start
	// would add up to far more).
	waitFor(t, ctx, `document.querySelector('#chart-loop path[data-series="poll"]') && document.querySelector('#chart-loop path[data-series="process"]') && document.querySelector('#chart-loop path[data-series="commit"]')`, `document.querySelector('#chart-loop').innerHTML.slice(0, 300)`, 20*time.Second)
	label := eval[string](t, ctx, `document.querySelector('#chart-loop svg').getAttribute('aria-label')`)
	sum, n := 0, 0
	for _, m := range regexp.MustCompile(`(poll|process|commit) (\d+) %`).FindAllStringSubmatch(label, -1) {
		v, _ := strconv.Atoi(m[2])
		sum, n = sum+v, n+1
	}
	if n != 3 || sum > 101 {
		t.Errorf("the loop chart's last values %q: %d series adding up to %d %%", label, n, sum)
	}
	if p := eval[string](t, ctx, "location.pathname"); p != "/" {
		t.Errorf("the page moved to %s", p)
	}
	if os.Getenv("SLUICE_SCREENSHOTS") != "" {
		// For the README's picture: a minute and a half of history.
		time.Sleep(90 * time.Second)
	}
	page(t, ctx, chromedp.EmulateViewport(1280, 1120)) // the tasks too
	screenshot(t, ctx, shots, "console-overview.png")
	page(t, ctx, chromedp.EmulateViewport(1280, 860))

	// Negative control: an app that has not run has no tasks to show.
	idle, err := processor.New(examples.WordCount("idle-in", "idle-out", "idle-dlq"), processor.ApplicationID("console-idle"), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	serve.Register(mux, idle)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	page(t, ctx, chromedp.Navigate(srv.URL+"/#/overview"))
	waitFor(t, ctx, `document.querySelector('#no-tasks')`, `document.querySelector('#tasks').textContent`, 20*time.Second)
	if got := eval[string](t, ctx, taskRowsJS); got != "[]" {
		t.Errorf("an app that never ran shows tasks %s", got)
	}
}

// graphJS lists the graph's elements as kind:name.
const graphJS = `[...document.querySelectorAll('svg.topology [data-kind]')].map(e => e.dataset.kind + ':' + e.dataset.name)`

// overlapsJS lists the pairs of sub-topology boxes, and of nodes, that
// overlap on the screen.
const overlapsJS = `(() => {
	const out = [];
	for (const sel of ['svg.topology g.subtopology rect', 'svg.topology g.node']) {
		const els = [...document.querySelectorAll(sel)].map(e => [e.closest('[data-name]').dataset.name, e.getBoundingClientRect()]);
		for (let i = 0; i < els.length; i++) for (let j = i + 1; j < els.length; j++) {
			const [a, r] = els[i], [b, q] = els[j];
			if (r.left < q.right - 1 && q.left < r.right - 1 && r.top < q.bottom - 1 && q.top < r.bottom - 1) out.push(a + ' overlaps ' + b);
		}
	}
	return out;
})()`

// topologyView: the graph has wordcount's two sub-topologies, its input,
// output, repartition and changelog topics and its store, boxes that do
// not overlap, and a store reached by keyboard opens in the stores view.
// Negative control: pageviews' graph has its own stores and none of
// wordcount's.
func topologyView(t *testing.T, ctx context.Context, wc, pv *instance, wcID, lines, counts, shots string) {
	page(t, ctx, chromedp.Navigate(wc.base+"/#/topology"))
	waitFor(t, ctx, `document.querySelector('svg.topology')`, `document.getElementById('main').textContent`, 20*time.Second)
	got := eval[[]string](t, ctx, graphJS)
	for _, w := range []string{
		"subtopology:0", "subtopology:1",
		"topic-user:" + lines, "topic-user:" + counts,
		"topic-repartition:" + wcID + "-counts-repartition",
		"topic-changelog:" + wcID + "-counts-changelog",
		"store:counts",
	} {
		if !slices.Contains(got, w) {
			t.Errorf("the graph has no %s; it has %v", w, got)
		}
	}
	kinds := map[string]int{}
	for _, g := range got {
		kinds[strings.SplitN(g, ":", 2)[0]]++
	}
	if kinds["source"] != 2 || kinds["sink"] != 2 {
		t.Errorf("the graph has %d sources and %d sinks, want 2 and 2: %v", kinds["source"], kinds["sink"], got)
	}
	// No two elements overlap (boxes with boxes, nodes with nodes).
	overlaps := eval[[]string](t, ctx, overlapsJS)
	if len(overlaps) > 0 {
		t.Errorf("the graph overlaps: %v", overlaps)
	}
	// Tall enough for the whole graph of wordcount.
	page(t, ctx, chromedp.EmulateViewport(1280, 1000))
	screenshot(t, ctx, shots, "console-topology.png")
	page(t, ctx, chromedp.EmulateViewport(1280, 860))

	// Keyboard: Tab reaches the store, Enter opens it in the stores view.
	eval[bool](t, ctx, `(document.activeElement && document.activeElement.blur(), true)`)
	reached := false
	for range 40 {
		page(t, ctx, chromedp.KeyEvent(kb.Tab))
		if eval[string](t, ctx, `document.activeElement?.dataset?.kind || ''`) == "store" {
			reached = true
			break
		}
	}
	if !reached {
		t.Fatal("40 presses of Tab did not reach the store in the graph")
	}
	page(t, ctx, chromedp.KeyEvent(kb.Enter))
	waitFor(t, ctx, `location.hash === '#/stores?store=counts' && document.querySelector('#store-select')?.value === 'counts'`, `location.hash`, 20*time.Second)

	// Negative control: another topology, another graph.
	page(t, ctx, chromedp.Navigate(pv.base+"/#/topology"))
	waitFor(t, ctx, `document.querySelector('svg.topology')`, `document.getElementById('main').textContent`, 20*time.Second)
	got = eval[[]string](t, ctx, graphJS)
	if !slices.Contains(got, "store:page-counts") || slices.Contains(got, "store:counts") {
		t.Errorf("pageviews' graph: %v", got)
	}
	if overlaps := eval[[]string](t, ctx, overlapsJS); len(overlaps) > 0 {
		t.Errorf("pageviews' graph overlaps: %v", overlaps)
	}
	screenshot(t, ctx, t.TempDir(), "console-topology-pageviews.png") // not in the README
}

// lookup types key into the lookup form, submits it and waits for the
// answer, returning "found:<value>" or "not-found".
func lookup(t *testing.T, ctx context.Context, key string) string {
	t.Helper()
	eval[bool](t, ctx, fmt.Sprintf(`(() => { const i = document.querySelector('#key-input'); i.value = %s; document.querySelector('#lookup-form').requestSubmit(); return true; })()`, js(key)))
	waitFor(t, ctx, `document.querySelector('#lookup-result [data-result]') || document.querySelector('#lookup-result .error')`, `document.querySelector('#lookup-result').textContent`, 20*time.Second)
	return eval[string](t, ctx, `(() => {
		const r = document.querySelector('#lookup-result [data-result]');
		if (!r) return 'error:' + document.querySelector('#lookup-result').textContent;
		if (r.dataset.result !== 'found') return r.dataset.result + (document.querySelector('#found-value') ? ' with a value shown' : '');
		const v = document.querySelector('#found-value');
		return 'found:' + (v ? v.textContent : '');
	})()`)
}

// storesView: a key's value as the store holds it, for keys of awkward
// shapes; a range paged through to its end; a window store's windows on
// the time axis. Negative controls: a key with no value shows "not found"
// and no value (not the previous key's), an empty range says so.
func storesView(t *testing.T, ctx context.Context, wc, pv *instance, words []string, shots string) {
	page(t, ctx, chromedp.Navigate(wc.base+"/#/stores?store=counts&key=fox"))
	waitFor(t, ctx, `document.querySelector('#lookup-result [data-result]')`, `document.querySelector('#main').textContent`, 20*time.Second)
	if got := eval[string](t, ctx, `document.querySelector('#found-value')?.textContent`); got == "" {
		t.Fatal("the lookup from the address shows no value")
	}
	for _, w := range words {
		if got := lookup(t, ctx, w); got != "found:8" {
			t.Errorf("lookup %q: %s, want found:8", w, got)
		}
		if got := lookup(t, ctx, "no-such-"+w); got != "not-found" {
			t.Errorf("lookup of a missing key after %q: %s, want not-found", w, got)
		}
	}
	// A range of the w00…w24 words, ten a page.
	eval[bool](t, ctx, `(() => { document.querySelector('#range-from').value = 'w'; document.querySelector('#range-to').value = 'x'; document.querySelector('#range-limit').value = '10'; document.querySelector('#range-form').requestSubmit(); return true; })()`)
	var all []string
	for pageNo := 0; pageNo < 5; pageNo++ {
		waitFor(t, ctx, `document.querySelector('#range-table') || document.querySelector('#range-result .error')`, `document.querySelector('#range-result').textContent`, 20*time.Second)
		keys := eval[[]string](t, ctx, `[...document.querySelectorAll('#range-table tbody tr td:first-child')].map(td => JSON.parse(td.textContent))`)
		if len(all) > 0 && len(keys) > 0 && keys[0] <= all[len(all)-1] {
			t.Fatalf("page %d starts at %q, not past %q", pageNo, keys[0], all[len(all)-1])
		}
		all = append(all, keys...)
		if eval[bool](t, ctx, `document.querySelector('#range-next').disabled`) {
			break
		}
		eval[bool](t, ctx, `(document.querySelector('#range-table').remove(), document.querySelector('#range-next').click(), true)`)
	}
	var want []string
	for i := range 25 {
		want = append(want, fmt.Sprintf("w%02d", i))
	}
	if !slices.Equal(all, want) {
		t.Errorf("the range pages list %v, want %v", all, want)
	}
	eval[bool](t, ctx, `(() => { document.querySelector('#range-from').value = 'zzz'; document.querySelector('#range-to').value = 'zzzz'; document.querySelector('#range-form').requestSubmit(); return true; })()`)
	waitFor(t, ctx, `document.querySelector('#range-result .notfound')`, `document.querySelector('#range-result').textContent`, 20*time.Second)

	// A window store: /home's three minutes, four views each.
	page(t, ctx, chromedp.Navigate(pv.base+"/#/stores?store=page-counts&key=%2Fhome"))
	waitFor(t, ctx, `document.querySelectorAll('svg.timeline g.window').length === 3`, `document.querySelector('#main').textContent`, 20*time.Second)
	vals := eval[[]string](t, ctx, `[...document.querySelectorAll('#windows-table tbody tr td:last-child')].map(td => td.textContent)`)
	if !slices.Equal(vals, []string{"4", "4", "4"}) {
		t.Errorf("/home's windows show %v, want three of 4", vals)
	}
	starts := eval[[]string](t, ctx, `[...document.querySelectorAll('svg.timeline g.window')].map(g => g.dataset.start)`)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixMilli()
	if !slices.Equal(starts, []string{fmt.Sprint(t0), fmt.Sprint(t0 + 60_000), fmt.Sprint(t0 + 120_000)}) {
		t.Errorf("the windows start at %v", starts)
	}
	screenshot(t, ctx, shots, "console-stores.png")
	if got := lookup(t, ctx, "/nowhere"); got != "not-found" {
		t.Errorf("a page with no views: %s, want not-found", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('svg.timeline g.window').length`); n != 0 {
		t.Errorf("not found, yet %d windows still drawn", n)
	}
}

// dlqRowsJS lists the dead letters shown as class|origin|value.
const dlqRowsJS = `[...document.querySelectorAll('#dlq-table tbody tr')].map(r => [...r.children].map(td => td.textContent))`

// deadLetters: pageviews shows no dead letter until a view that is not
// JSON is produced (the negative control), then that one with its class,
// message and origin; wordcount's shows its line that is not UTF-8.
func deadLetters(t *testing.T, ctx context.Context, wc, pv *instance, brokers []string, views, lines, shots string) {
	page(t, ctx, chromedp.Navigate(pv.base+"/#/deadletters"))
	waitFor(t, ctx, `document.querySelector('#dlq-empty') || document.querySelector('#dlq-table')`, `document.querySelector('#main').textContent`, 25*time.Second)
	if eval[bool](t, ctx, `!!document.querySelector('#dlq-table')`) {
		t.Fatalf("dead letters before any bad view: %v", eval[[][]string](t, ctx, dlqRowsJS))
	}
	produce(t, brokers, &kgo.Record{Topic: views, Key: []byte("u9"), Value: []byte(`{"user": "u9", "page": `)})
	deadline := time.Now().Add(20 * time.Second)
	for !eval[bool](t, ctx, `!!document.querySelector('#dlq-table')`) {
		if time.Now().After(deadline) {
			t.Fatalf("no dead letter shown 20 s after a bad view; the page shows %s", eval[string](t, ctx, `document.querySelector('#main').textContent`))
		}
		eval[bool](t, ctx, `(document.querySelector('#dlq-refresh').click(), true)`)
		time.Sleep(500 * time.Millisecond)
	}
	rows := eval[[][]string](t, ctx, dlqRowsJS)
	if len(rows) != 1 {
		t.Fatalf("one bad view, %d dead letters shown: %v", len(rows), rows)
	}
	r := rows[0] // time, class, message, origin, key, value, headers
	if r[1] != "deserialization" || !strings.Contains(r[2], "page view") || !strings.HasPrefix(r[3], views+" [") || r[4] != "u9" || r[5] != `{"user": "u9", "page": ` {
		t.Errorf("the dead letter reads %q", r)
	}
	eval[bool](t, ctx, `(document.querySelector('#dlq-table details').open = true)`) // the headers, for the picture
	screenshot(t, ctx, shots, "console-deadletters.png")

	page(t, ctx, chromedp.Navigate(wc.base+"/#/deadletters"))
	// Its line that is not UTF-8 was produced before the instance started;
	// the page refreshes every 5 s until it shows.
	waitFor(t, ctx, `document.querySelector('#dlq-table')`, `document.querySelector('#main').textContent`, 25*time.Second)
	rows = eval[[][]string](t, ctx, dlqRowsJS)
	if len(rows) != 1 || rows[0][1] != "deserialization" || !strings.HasPrefix(rows[0][3], lines+" [") || !strings.HasPrefix(rows[0][5], "base64 ") {
		t.Errorf("wordcount's dead letters: %q", rows)
	}
}

// layout: at a phone's width nothing is wider than the screen (the
// control: a wide element is caught), a wall display gets larger type and
// one row of cards, dark mode changes the colours, and the page loaded
// nothing from anywhere but the instance, while its CSP refuses any other
// origin.
func layout(t *testing.T, ctx context.Context, wc *instance) {
	page(t, ctx, chromedp.Navigate(wc.base+"/#/overview"), chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	waitFor(t, ctx, `document.querySelector('#tasks-table')`, `document.querySelector('#main').textContent`, 20*time.Second)
	const fits = `document.documentElement.scrollWidth <= window.innerWidth + 1`
	for _, view := range []string{"#/overview", "#/topology", "#/stores", "#/deadletters"} {
		show(t, ctx, view)
		time.Sleep(300 * time.Millisecond)
		if !eval[bool](t, ctx, fits) {
			t.Errorf("%s at 390 px: the page is %d px wide", view, eval[int](t, ctx, `document.documentElement.scrollWidth`))
		}
	}
	show(t, ctx, "#/overview")
	waitFor(t, ctx, `document.querySelector('#tasks-table')`, `document.querySelector('#main').textContent`, 20*time.Second)
	screenshot(t, ctx, t.TempDir(), "console-phone.png") // not in the README
	eval[bool](t, ctx, `(() => { const d = document.createElement('div'); d.id = 'too-wide'; d.style.width = '2000px'; d.textContent = 'x'; document.getElementById('main').append(d); return true; })()`)
	if eval[bool](t, ctx, fits) {
		t.Error("the width check misses a 2000 px element")
	}
	eval[bool](t, ctx, `(document.getElementById('too-wide').remove(), true)`)

	page(t, ctx, chromedp.EmulateViewport(2560, 1440))
	waitFor(t, ctx, `getComputedStyle(document.querySelector('.cards')).gridTemplateColumns.split(' ').length === 7`, `getComputedStyle(document.querySelector('.cards')).gridTemplateColumns`, 5*time.Second)
	if fs := eval[string](t, ctx, `getComputedStyle(document.documentElement).fontSize`); fs != "20px" {
		t.Errorf("a wall display's type is %s", fs)
	}

	page(t, ctx, chromedp.EmulateViewport(1280, 860))
	bg := func() string { return eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`) }
	light := bg()
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := chromedp.Call(c, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	dark := bg()
	if light == dark || dark != "rgb(15, 19, 24)" {
		t.Errorf("light %s, dark %s", light, dark)
	}
	screenshot(t, ctx, t.TempDir(), "console-dark.png") // not in the README
	c, cancel = context.WithTimeout(ctx, 5*time.Second)
	_, _ = chromedp.Call(c, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})
	cancel()

	// Everything the page loaded came from the instance.
	urls := eval[[]string](t, ctx, `[document.URL, ...performance.getEntriesByType('resource').map(e => e.name)]`)
	if bad := foreign(urls, wc.base); len(bad) > 0 || len(urls) < 5 {
		t.Errorf("the page loaded from elsewhere: %v (of %v)", bad, urls)
	}
	if bad := foreign([]string{wc.base + "/console/app.js", "http://127.0.0.2:9/x.js"}, wc.base); len(bad) != 1 {
		t.Errorf("foreign misses another origin: %v", bad)
	}
	// The CSP refuses another origin rather than fetching it (127.0.0.2:
	// loopback, so nothing leaves the machine even if it did not).
	blocked := eval[string](t, ctx, `new Promise(resolve => {
		document.addEventListener('securitypolicyviolation', e => resolve(e.violatedDirective), { once: true });
		const img = document.createElement('img');
		img.src = 'http://127.0.0.2:9/pixel.png';
		document.body.append(img);
		setTimeout(() => resolve('not blocked'), 3000);
	})`, chromedp.EvalAwaitPromise)
	if !strings.HasPrefix(blocked, "img-src") {
		t.Errorf("an image from another origin: %s", blocked)
	}
}

// foreign returns the URLs not of origin.
func foreign(urls []string, origin string) []string {
	var out []string
	for _, u := range urls {
		if u != origin && !strings.HasPrefix(u, origin+"/") {
			out = append(out, u)
		}
	}
	return out
}

// login: an instance that answers 401 (as one behind a token does before
// its cookie is set) sends the page to its login page, with the way back.
// The other views' checks are the control: there the page stays at /.
func login(t *testing.T, ctx context.Context, wc *instance) {
	mux := http.NewServeMux()
	serve.Register(mux, wc.app)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/login":
			fmt.Fprintln(w, "log in here")
		case r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/console/"):
			mux.ServeHTTP(w, r)
		default:
			http.Error(w, "no token", http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	page(t, ctx, chromedp.Navigate(srv.URL+"/#/stores?store=counts"))
	waitFor(t, ctx, `location.pathname === '/login'`, `location.href`, 20*time.Second)
	if got := eval[string](t, ctx, `new URLSearchParams(location.search).get('next')`); got != "/#/stores?store=counts" {
		t.Errorf("login's next is %q", got)
	}
}

// settledTasks is an instance's GET /tasks once two reads a second apart
// agree on every task's state, within limit.
func settledTasks(t *testing.T, inst *instance, limit time.Duration, ok func([]processor.TaskStatus) bool) []string {
	t.Helper()
	states := func() []string {
		var ts []processor.TaskStatus
		getJSON(t, inst.base+"/tasks", &ts)
		if !ok(ts) {
			return nil
		}
		var out []string
		for _, x := range ts {
			out = append(out, x.ID+"="+string(x.State))
		}
		slices.Sort(out)
		return out
	}
	deadline := time.Now().Add(limit)
	prev := states()
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		cur := states()
		if cur != nil && slices.Equal(cur, prev) {
			return cur
		}
		prev = cur
	}
	t.Fatalf("%s: the tasks did not settle in %v: %v", inst.base, limit, prev)
	return nil
}

// standby: with a second instance and a standby replica, each instance's
// overview shows its own tasks as GET /tasks has them: the second holds
// standby copies (shown as standby, or warming up while behind), the first
// still runs what it kept. The first overview's check (every task
// running, none standby) is the control.
func standby(t *testing.T, ctx context.Context, first, second *instance) {
	hasStandby := func(ts []processor.TaskStatus) bool {
		for _, x := range ts {
			if x.State == processor.TaskStandby {
				return true
			}
		}
		return false
	}
	want := settledTasks(t, second, 40*time.Second, hasStandby)
	wantJSON, _ := json.Marshal(want)
	page(t, ctx, chromedp.Navigate(second.base+"/#/overview"))
	waitFor(t, ctx, taskRowsJS+" === "+js(string(wantJSON)), taskRowsJS, 20*time.Second)
	badges := eval[[]string](t, ctx, `[...document.querySelectorAll('#tasks-table tr[data-state="standby"] .badge')].map(b => b.textContent)`)
	if len(badges) == 0 {
		t.Fatal("no standby shown")
	}
	for _, b := range badges {
		if b != "standby" && !strings.HasPrefix(b, "warming up · ") {
			t.Errorf("a standby reads %q", b)
		}
	}
	mine := settledTasks(t, first, 20*time.Second, func([]processor.TaskStatus) bool { return true })
	mineJSON, _ := json.Marshal(mine)
	page(t, ctx, chromedp.Navigate(first.base+"/#/overview"))
	waitFor(t, ctx, taskRowsJS+" === "+js(string(mineJSON)), taskRowsJS, 20*time.Second)
}

// instancesContract: the overview draws GET /instances as helper "grp"'s
// contract has it (the JSON below is that contract's example, with this
// instance's endpoint), marking this instance: a group of two with lag,
// which the overview subtest's real group of one does not show. Served in
// front of the real endpoints, which the overview subtest checks.
func instancesContract(t *testing.T, ctx context.Context, wc *instance) {
	endpoint := strings.TrimPrefix(wc.base, "http://")
	group := fmt.Sprintf(`{"application":"sluice-wordcount","state":"Stable","generation":3,"lag":20,
		"instances":[
			{"member_id":"m-1","client_id":"sluice-1","host":"127.0.0.1","endpoint":%q,
			 "tasks":[{"id":"0_1","partitions":[{"topic":"text-lines","partition":1,"committed":100,"end":120,"lag":20}],"lag":20}],
			 "standbys":["1_0"],"lag":20},
			{"member_id":"m-2","client_id":"sluice-2","host":"127.0.0.1","endpoint":"127.0.0.1:1",
			 "tasks":[{"id":"0_0","partitions":[{"topic":"text-lines","partition":0,"committed":7,"end":7,"lag":0}],"lag":0},{"id":"1_0","partitions":[],"lag":0}],
			 "standbys":[],"lag":0}]}`, endpoint)
	real := http.NewServeMux()
	serve.Register(real, wc.app)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /instances", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, group)
	})
	mux.Handle("/", real)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	page(t, ctx, chromedp.Navigate(srv.URL+"/#/overview"))
	// The marker of this instance needs GET /app too, which may answer
	// after the first drawing: wait for the rows to settle.
	const rowsJS = `JSON.stringify([...document.querySelectorAll('#instances-table tr[data-instance]')].map(r => [...r.children].map(c => c.textContent)))`
	want, _ := json.Marshal([][]string{
		{endpoint + "this onesluice-1", "0_1 lag 20", "1_0", "20"},
		{"127.0.0.1:1sluice-2", "0_01_0", "", "0"},
	})
	waitFor(t, ctx, rowsJS+" === "+js(string(want)), rowsJS, 20*time.Second)
	const cardsJS = `document.querySelector('#card-group .card-value').textContent + ' / ' + document.querySelector('#card-lag .card-value').textContent`
	waitFor(t, ctx, cardsJS+` === 'Stable · gen 3 / 20'`, cardsJS, 20*time.Second)
	if n := eval[int](t, ctx, `document.querySelectorAll('#instances-unavailable').length`); n != 0 {
		t.Error("instances served, yet shown unavailable")
	}
}

// behindToken: the console behind a real token (serve.BearerToken), as
// `sluice run --http` serves it with SLUICE_HTTP_TOKEN. A page load goes to
// /login; a wrong token stays there and shows nothing of the state (the
// negative control); the right one signs the browser in, and the overview
// then lists the instance's tasks, its requests carried by the cookie.
func behindToken(t *testing.T, ctx context.Context, wc *instance) {
	const token = "console-token-0f8fad5b-d9cb-469f"
	mux := http.NewServeMux()
	serve.Register(mux, wc.app, serve.BearerToken(token))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	signIn := func(tok string) {
		t.Helper()
		waitFor(t, ctx, `location.pathname === '/login' && document.getElementById('token')`, `location.href`, 20*time.Second)
		eval[bool](t, ctx, fmt.Sprintf(`document.getElementById('token').value = %s; document.querySelector('form').submit(); true`, js(tok)))
	}
	page(t, ctx, chromedp.Navigate(srv.URL+"/"))
	signIn("not-" + token)
	waitFor(t, ctx, `location.pathname === '/login' && document.querySelector('[role=alert]')`, `document.body.textContent`, 20*time.Second)
	if body := eval[string](t, ctx, `document.body.textContent`); strings.Contains(body, "running") || strings.Contains(body, "0_0") {
		t.Errorf("the login page after a wrong token shows state: %.300s", body)
	}
	signIn(token)
	waitFor(t, ctx, `location.pathname === '/' && document.querySelectorAll('#tasks-table tr[data-task]').length > 0`, `location.href + ' ' + document.body.textContent.slice(0, 300)`, 20*time.Second)
	if got := eval[string](t, ctx, `document.querySelector('#tasks-table tr[data-task] .badge').textContent`); got != "running" {
		t.Errorf("behind the token, a task's badge reads %q", got)
	}
}
