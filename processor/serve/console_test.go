package serve

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/processor"
)

// consoleRefs are the files a console file loads: module imports and the
// page's script and stylesheet.
var consoleRefs = regexp.MustCompile(`(?:from\s+'\./([^']+)'|(?:src|href)="console/([^"]+)")`)

// externalURL finds an absolute URL that is not the SVG namespace (a name,
// never fetched).
var externalURL = regexp.MustCompile(`(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}[^\s'"]*`)

func externalURLs(text string) []string {
	var out []string
	for _, u := range externalURL.FindAllString(text, -1) {
		if u != "http://www.w3.org/2000/svg" {
			out = append(out, u)
		}
	}
	return out
}

// consoleServer serves Register over wordcount's App (topics prefix+lines →
// prefix+counts, dead letters to prefix+lines-dlq), not run, until the
// test ends.
func consoleServer(t *testing.T, prefix string, opts ...processor.Opt) *httptest.Server {
	t.Helper()
	app, err := processor.New(examples.WordCount(prefix+"lines", prefix+"counts", prefix+"lines-dlq"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	Register(mux, app)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestConsoleServed: / is the page with its CSP; every file the page and
// its modules load is served, JavaScript as JavaScript; nothing in them
// names another host (the page must work with the network cut off).
// Negative controls: a missing file is a 404, an unknown path is not the
// page, and the URL check catches a CDN link.
func TestConsoleServed(t *testing.T) {
	srv := consoleServer(t, "", processor.ApplicationID("console-test"), processor.StateDir(t.TempDir()))
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, page := get("/")
	if resp.StatusCode != 200 || !strings.Contains(page, `<script type="module" src="console/app.js">`) {
		t.Fatalf("/: %d %.200s", resp.StatusCode, page)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("/: CSP %q", csp)
	}
	// Walk the references from the page, as the browser does.
	seen := map[string]bool{}
	queue := []string{"index.html"}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		path := "/console/" + name
		if name == "index.html" {
			path = "/"
		}
		resp, body := get(path)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
			continue
		}
		if strings.HasSuffix(name, ".js") && !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
			t.Errorf("%s: Content-Type %q", path, resp.Header.Get("Content-Type"))
		}
		if u := externalURLs(body); len(u) > 0 {
			t.Errorf("%s names other hosts: %v", path, u)
		}
		for _, m := range consoleRefs.FindAllStringSubmatch(body, -1) {
			queue = append(queue, m[1]+m[2])
		}
	}
	// Every embedded file is reached from the page: none is dead weight.
	_ = fs.WalkDir(consoleFS, "console", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !seen[strings.TrimPrefix(p, "console/")] {
			t.Errorf("%s is embedded but nothing loads it", p)
		}
		return nil
	})
	if len(seen) < 8 {
		t.Errorf("the page loads only %v", seen)
	}
	if resp, _ := get("/console/nope.js"); resp.StatusCode != 404 {
		t.Errorf("a missing file: %d", resp.StatusCode)
	}
	if resp, body := get("/nope"); resp.StatusCode != 404 || strings.Contains(body, "<html") {
		t.Errorf("an unknown path: %d %.80s", resp.StatusCode, body)
	}
	if u := externalURLs(`import x from 'https://cdn.example.com/lib.js'; // http://www.w3.org/2000/svg`); len(u) != 1 {
		t.Errorf("externalURLs: %v", u)
	}

	// GET /app names the topics the console shows.
	var info appInfo
	resp, body := get("/app")
	if err := json.Unmarshal([]byte(body), &info); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/app: %d %s", resp.StatusCode, body)
	}
	if info.ApplicationID != "console-test" || strings.Join(info.DeadLetterTopics, ",") != "console-test-dlq,lines-dlq" ||
		info.Changelogs["counts"] != "console-test-counts-changelog" || len(info.Changelogs) != 1 {
		t.Errorf("/app: %+v", info)
	}
}

// TestStatsPoints: the intervals between samples are rates and latency
// quantiles of what happened in each, not since the start.
func TestStatsPoints(t *testing.T) {
	bounds := []float64{0.001, 0.01, 0.1, 1}
	at := time.UnixMilli(1_000_000)
	p := sample{at: at, processed: 100, produced: 300, commits: 5, e2eCount: 10, e2eSum: 0.05, e2eBuckets: []uint64{10, 10, 10, 10}}
	// In two seconds: 50 records in, 20 out, and 100 latencies: 90 in
	// (0.001, 0.01], 10 in (0.1, 1].
	c := sample{at: at.Add(2 * time.Second), processed: 150, produced: 320, commits: 7, tasks: 3,
		e2eCount: 110, e2eSum: 0.05 + 90*0.005 + 10*0.5, e2eBuckets: []uint64{10, 100, 100, 110}}
	pt := point(p, c, bounds)
	if pt.InPerSec != 25 || pt.OutPerSec != 10 || pt.Commits != 2 || pt.Tasks != 3 || pt.Latencies != 100 {
		t.Errorf("point: %+v", pt)
	}
	if want := (90*0.005 + 10*0.5) / 100 * 1000; abs(pt.LatencyMean-want) > 1e-9 {
		t.Errorf("mean %v ms, want %v", pt.LatencyMean, want)
	}
	// p50: the 50th of 90 in (1 ms, 10 ms]: 1 + 9·50/90 ms.
	if want := 1 + 9*50.0/90; abs(pt.LatencyP50-want) > 1e-9 {
		t.Errorf("p50 %v ms, want %v", pt.LatencyP50, want)
	}
	// p99: the 9th of 10 in (100 ms, 1 s].
	if want := 100 + 900*9.0/10; abs(pt.LatencyP99-want) > 1e-9 {
		t.Errorf("p99 %v ms, want %v", pt.LatencyP99, want)
	}
	// Control: nothing observed in the interval is no latency, not the
	// latency since the start.
	if q := point(c, sample{at: c.at.Add(time.Second), processed: 150, e2eCount: 110, e2eSum: c.e2eSum, e2eBuckets: c.e2eBuckets}, bounds); q.Latencies != 0 || q.LatencyP99 != 0 || q.InPerSec != 0 {
		t.Errorf("an idle interval: %+v", q)
	}
	// The loop's phases: each one's share of the interval.
	p.loop = map[string]time.Duration{processor.PhasePoll: time.Second, processor.PhaseProcess: 5 * time.Second}
	c.loop = map[string]time.Duration{processor.PhasePoll: 2 * time.Second, processor.PhaseProcess: 5*time.Second + 600*time.Millisecond,
		processor.PhaseFlush: 200 * time.Millisecond, processor.PhaseEnd: 100 * time.Millisecond, processor.PhaseApply: 100 * time.Millisecond}
	pt = point(p, c, bounds)
	for ph, want := range map[string]float64{processor.PhasePoll: 0.5, processor.PhaseProcess: 0.3, processor.PhaseFlush: 0.1, processor.PhaseEnd: 0.05, processor.PhaseApply: 0.05} {
		if got, ok := pt.Loop[ph]; !ok || abs(got-want) > 1e-9 {
			t.Errorf("loop share of %s %v, want %v", ph, got, want)
		}
	}
	// Past the last bound, the last bound.
	if q := quantile(0.99, bounds, []uint64{0, 0, 0, 0}, 5); q != 1 {
		t.Errorf("all past the last bound: %v", q)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// TestStatsServed: GET /stats starts the sampler; the ring keeps at most
// the window; the counters are the app's.
func TestStatsServed(t *testing.T) {
	app, err := processor.New(examples.WordCount("lines", "counts", "lines-dlq"),
		processor.ApplicationID("stats-test"), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	app.Stats().Processed.Add(42)
	app.Stats().Combined.Add(7)
	app.Stats().IgnoredDeletes.Add(3)
	s := newSampler(app.Stats())
	rec := httptest.NewRecorder()
	s.serveStats(rec, httptest.NewRequest(http.MethodGet, "/stats", nil))
	var a statsAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	if a.Totals.Processed != 42 || a.Totals.Combined != 7 || a.IntervalMS != 1000 || a.WindowMS != 600_000 || a.Points == nil {
		t.Errorf("/stats: %s", rec.Body.Bytes())
	}
	var raw struct{ Totals map[string]int64 }
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil || raw.Totals["ignored_deletes"] != 3 { // README's name
		t.Errorf("/stats totals lack ignored_deletes 3 (%v): %s", err, rec.Body.Bytes())
	}
	s.mu.Lock()
	running := s.mu.running
	s.mu.Unlock()
	if !running {
		t.Error("the sampler did not start")
	}
	for i := range statsSamples + 50 {
		s.add(sample{at: time.UnixMilli(int64(i) * 1000)})
	}
	s.mu.Lock()
	n := len(s.mu.ring)
	s.mu.Unlock()
	if n != statsSamples+1 {
		t.Errorf("the ring holds %d samples, want %d", n, statsSamples+1)
	}
}
