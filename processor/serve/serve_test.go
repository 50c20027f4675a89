package serve

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/processor"
)

// TestRegisterBeforeRun: every endpoint is mounted and answers before the
// App runs: /healthz ok, /readyz 503 with Retry-After, /tasks empty,
// /topology the description, /metrics the given handler, queries 503 (not
// started) or 404 / 400 for what is wrong in the request itself.
func TestRegisterBeforeRun(t *testing.T) {
	app, err := processor.New(examples.WordCount("lines", "counts", "lines-dlq"),
		processor.ApplicationID("serve-test"), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	Register(mux, app, Metrics(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics here") })))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, c := range []struct {
		path, want string
		code       int
		retry      bool
	}{
		{"/healthz", "ok", 200, false},
		{"/readyz", `"ready": false`, 503, true},
		{"/tasks", "null", 200, false}, // no tasks yet (as before the move)
		{"/topology", `"counts-repartition"`, 200, false},
		{"/metrics", "metrics here", 200, false},
		{"/stores/counts/keys/the", "not started", 503, true},
		{"/stores/counts/keys", "not started", 503, true},
		{"/stores/nope/keys/the", "no such store", 404, false},
		{"/stores/counts/keys/the?raw=maybe", `raw: want true or false, got \"maybe\"`, 400, false},
		{"/stores/counts/keys/the?stale=maybe", `stale: want true or false`, 400, false},
		{"/stores/counts/keys/the?from=1", "not a window store", 400, false},
		{"/stores/counts/keys?limit=0", "limit: want 1..1000", 400, false},
	} {
		resp, err := http.Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(b), c.want) || c.retry != (resp.Header.Get("Retry-After") != "") {
			t.Errorf("%s: %d %q (Retry-After %q), want %d with %q", c.path, resp.StatusCode, b, resp.Header.Get("Retry-After"), c.code, c.want)
		}
		if strings.HasPrefix(c.path, "/stores/") && !json.Valid(b) {
			t.Errorf("%s: not JSON: %s", c.path, b)
		}
	}
	// Without Metrics there is no /metrics; RegisterQueries mounts the
	// queries alone.
	mux = http.NewServeMux()
	RegisterQueries(mux, app)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("/metrics without Metrics: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stores/nope/keys", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("RegisterQueries: unknown store %d", rec.Code)
	}
}
