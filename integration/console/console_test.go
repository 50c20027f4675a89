package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/processor/serve"
)

// chromium finds the browser: $SLUICE_CHROMIUM, or Debian's chromium on
// the PATH. Missing, the test skips, or fails under CI=true (CI installs
// it: .ci/run).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "headless Chromium not found: install Debian's package chromium (apt-get install -y chromium) or set SLUICE_CHROMIUM"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// instance is one example running in this process, served over HTTP on
// 127.0.0.1 exactly as `sluice run --http` serves it (serve.Register).
type instance struct {
	app  *processor.App
	base string // http://127.0.0.1:port
}

func start(t *testing.T, appID string, build func(endpoint string) (*processor.App, error)) *instance {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	app, err := build(ln.Addr().String())
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	serve.Register(mux, app, serve.Logger(quietLog()))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", appID, err)
		}
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
		<-served
	})
	return &instance{app: app, base: "http://" + ln.Addr().String()}
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func appOpts(brokers []string, appID, dir, endpoint string) []processor.Opt {
	return []processor.Opt{
		processor.ApplicationID(appID), processor.Brokers(brokers...), processor.StateDir(dir),
		processor.Logger(quietLog()), processor.CommitInterval(100 * time.Millisecond),
		processor.AdvertisedEndpoint(endpoint),
	}
}

// kafka is a client of brokers for the test's own requests, with a bound
// on their time.
func kafka(t *testing.T, brokers []string) (*kgo.Client, context.Context) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(func() { cancel(); cl.Close() })
	return cl, ctx
}

func createTopics(t *testing.T, brokers []string, topics ...string) {
	t.Helper()
	cl, ctx := kafka(t, brokers)
	res, err := kadm.NewClient(cl).CreateTopics(ctx, 2, 1, nil, topics...)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func produce(t *testing.T, brokers []string, rs ...*kgo.Record) {
	t.Helper()
	cl, ctx := kafka(t, brokers)
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// getJSON reads an endpoint of an instance, as the test's own view of the
// truth the page must show.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v: %s", url, err, b)
		}
	}
	return resp.StatusCode
}

// waitHTTP polls url until ok accepts its answer, at most limit.
func waitHTTP(t *testing.T, what, url string, limit time.Duration, ok func(code int, body []byte) bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ok(resp.StatusCode, b) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// browser is one headless Chromium with a fresh profile, started with the
// flags this machine's closed network needs.
func browser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 860),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// page runs steps with a time bound.
func page(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression into T.
func eval[T any](t *testing.T, ctx context.Context, expr string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition in the page, at most limit, and
// fails with what describe (another expression) then shows. An evaluation
// that fails counts as false: the page may be navigating.
func waitFor(t *testing.T, ctx context.Context, cond, describe string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := chromedp.Run(c, chromedp.Evaluate[bool]("!!("+cond+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s (last error %v); the page shows: %s", limit, cond, err, eval[string](t, ctx, "String("+describe+")"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// show moves the console to a view, as a click on its link does.
func show(t *testing.T, ctx context.Context, hash string) {
	t.Helper()
	eval[string](t, ctx, fmt.Sprintf("location.hash = %q", hash))
	waitFor(t, ctx, fmt.Sprintf("document.getElementById('main').dataset.view === %q", strings.SplitN(strings.TrimPrefix(hash, "#/"), "?", 2)[0]), "location.hash", 5*time.Second)
}

// screenshot writes the viewport as PNG to $SLUICE_SCREENSHOTS (the
// README's copies are made so) or the test's temporary directory.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", p, len(png))
}

// TestConsole runs wordcount and pageviews on one broker and drives the
// console of each in one browser: overview, topology, stores and dead
// letters, each check with a negative control.
func TestConsole(t *testing.T) {
	chrome := chromium(t)
	shots := os.Getenv("SLUICE_SCREENSHOTS")
	brokers := testbroker.Addrs(t)
	// Names: unique ones (a real cluster may be shared), but the
	// examples' own for the README's pictures, taken on a broker of their
	// own.
	docs := shots != "" && len(testbroker.External()) == 0
	name := func(prefix, example string) string {
		if docs {
			return example
		}
		return testbroker.Unique(t, prefix)
	}
	if shots == "" {
		shots = t.TempDir()
	}

	// wordcount, fed with lines whose words are adversarial keys: a URL's
	// reserved characters, non-ASCII, a UUID, 200 bytes.
	wcID, lines, counts, dlq := name("console-wc-", "sluice-wordcount"), name("console-lines-", "text-lines"), name("console-counts-", "word-counts"), name("console-dlq-", "text-lines-dlq")
	createTopics(t, brokers, lines, counts, dlq)
	long := strings.Repeat("x", 200)
	words := []string{"brown", "a/b?c#d%e&f", "ünïcødé", "0f8fad5b-d9cb-469f-a165-70867728950e", long}
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{Topic: lines, Value: []byte(fmt.Sprintf("the quick fox %s w%02d", words[i%len(words)], i%25))})
	}
	recs = append(recs, &kgo.Record{Topic: lines, Value: []byte{0xff, 0xfe, 'n', 'o', 't', ' ', 'u', 't', 'f', '8'}})
	produce(t, brokers, recs...)
	wc := start(t, wcID, func(endpoint string) (*processor.App, error) {
		// A standby replica for a second instance (the standby subtest).
		return processor.New(examples.WordCount(lines, counts, dlq), append(appOpts(brokers, wcID, t.TempDir(), endpoint), processor.StandbyReplicas(1))...)
	})
	waitHTTP(t, "wordcount to count 40 lines", wc.base+"/stores/counts/keys/fox", 30*time.Second, func(code int, b []byte) bool {
		return code == 200 && strings.Contains(string(b), `"value": 40`)
	})

	// pageviews: views of pages in three minutes, keyed by user.
	pvID := name("console-pv-", "sluice-pageviews")
	pv, err := examples.Get("pageviews")
	if err != nil {
		t.Fatal(err)
	}
	params := pv.Defaults(nil)
	if !docs {
		params = pv.Defaults(map[string]string{"input": pvID + "-views", "per-minute": pvID + "-per-minute", "late": pvID + "-late", "sessions": pvID + "-sessions", "dlq": pvID + "-dlq"})
	}
	createTopics(t, brokers, params["input"], params["per-minute"], params["late"], params["sessions"], params["dlq"])
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixMilli()
	var views []*kgo.Record
	for i := range 12 { // /home: 4 views in each of 3 minutes
		v, _ := json.Marshal(map[string]any{"user": fmt.Sprintf("u%d", i%3), "page": "/home", "ts": t0 + int64(i)*15_000})
		views = append(views, &kgo.Record{Topic: params["input"], Key: []byte(fmt.Sprintf("u%d", i%3)), Value: v})
	}
	produce(t, brokers, views...)
	pvi := start(t, pvID, func(endpoint string) (*processor.App, error) {
		return processor.New(pv.Build(params), append(appOpts(brokers, pvID, t.TempDir(), endpoint), pv.Options(params)...)...)
	})
	waitHTTP(t, "pageviews to count /home's 3 minutes", pvi.base+"/stores/page-counts/keys/%2Fhome", 30*time.Second, func(code int, b []byte) bool {
		return code == 200 && strings.Count(string(b), `"start"`) == 3
	})

	ctx := browser(t, chrome)
	t.Run("overview", func(t *testing.T) { overview(t, ctx, wc, brokers, lines, shots) })
	t.Run("topology", func(t *testing.T) { topologyView(t, ctx, wc, pvi, wcID, lines, counts, shots) })
	t.Run("stores", func(t *testing.T) { storesView(t, ctx, wc, pvi, words, shots) })
	t.Run("deadletters", func(t *testing.T) { deadLetters(t, ctx, wc, pvi, brokers, params["input"], lines, shots) })
	t.Run("layout", func(t *testing.T) { layout(t, ctx, wc) })
	t.Run("login", func(t *testing.T) { login(t, ctx, wc) })
	t.Run("token", func(t *testing.T) { behindToken(t, ctx, wc) })
	t.Run("instances", func(t *testing.T) { instancesContract(t, ctx, wc) })
	t.Run("restoring", func(t *testing.T) { restoring(t, ctx) })
	// Last: a second instance rebalances the group.
	t.Run("standby", func(t *testing.T) {
		second := start(t, wcID+"-2", func(endpoint string) (*processor.App, error) {
			return processor.New(examples.WordCount(lines, counts, dlq), append(appOpts(brokers, wcID, t.TempDir(), endpoint), processor.StandbyReplicas(1))...)
		})
		standby(t, ctx, wc, second)
	})
}
