package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/groupview"
	"github.com/sluice-streams/sluice/internal/testapp"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/processor"
)

// TestInstances serves GET /instances (mounted by Register) for a running
// wordcount instance: for an app whose group does not exist, state Dead
// with no instances; for the running one, the instance with the tasks its
// Status shows and the input committed at what was produced. A handler with a long TTL keeps
// answering the cached view after the app stopped, where one without a
// TTL shows the empty group (the cache's negative control). Once the
// server's context ends, the client is closed and /instances answers 503.
func TestInstances(t *testing.T) {
	addrs := testbroker.Addrs(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p := testbroker.Unique(t, "inst-")
	// An app that never runs: its group does not exist.
	idle, err := processor.New(examples.WordCount(p+"-lines", p+"-counts", p+"-lines-dlq"), processor.ApplicationID(p+"-idle"),
		processor.Brokers(addrs...), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	wc := testapp.WordCount(t, ctx, addrs, p, "127.0.0.1:18099")
	app, in := wc.App, wc.Input
	srvCtx, stopSrv := context.WithCancel(ctx)
	defer stopSrv()
	mux := http.NewServeMux()
	Register(mux, app, Context(srvCtx))
	// More handlers: one caching for an hour, one not at all, and one
	// for the app that never ran.
	cached, fresh, never := newInstancesHandler(app, config{ctx: srvCtx}), newInstancesHandler(app, config{ctx: srvCtx}), newInstancesHandler(idle, config{ctx: srvCtx})
	cached.ttl, fresh.ttl = time.Hour, 0
	mux.HandleFunc("GET /cached", cached.serve)
	mux.HandleFunc("GET /fresh", fresh.serve)
	mux.HandleFunc("GET /never", never.serve)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) (int, groupview.View, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v groupview.View
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("%s: %v\n%s", path, err, b)
			}
		}
		return resp.StatusCode, v, string(b)
	}

	if code, v, body := get("/never"); code != 200 || v.State != "Dead" || v.Application != p+"-idle" || !strings.Contains(body, `"instances": []`) {
		t.Errorf("an app that never ran: %d %s, want 200, state Dead, no instances", code, body)
	}
	for part, n := range []int{4, 7} {
		wc.Produce(t, int32(part), slices.Repeat([]string{"a b"}, n)...)
	}
	// committed reads the input's committed offsets from a view.
	committed := func(v groupview.View) []int64 {
		got := []int64{-9, -9}
		for _, inst := range v.Instances {
			for _, tk := range inst.Tasks {
				for _, pt := range tk.Partitions {
					if pt.Topic == in {
						got[pt.Partition] = pt.Committed
					}
				}
			}
		}
		return got
	}
	deadline := time.Now().Add(60 * time.Second)
	var v groupview.View
	var body string
	for {
		var code int
		code, v, body = get("/instances")
		if code == 200 && v.State == "Stable" && slices.Equal(committed(v), []int64{4, 7}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/instances never showed the input committed at [4 7]: %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var ids, want []string
	for _, tk := range v.Instances[0].Tasks {
		ids = append(ids, tk.ID)
	}
	for _, st := range app.Status().Tasks {
		want = append(want, st.ID)
	}
	if len(v.Instances) != 1 || v.Instances[0].Endpoint != "127.0.0.1:18099" || !slices.Equal(ids, want) || v.Generation < 1 {
		t.Errorf("/instances: %s; want the one instance with the tasks %v", body, want)
	}
	if code, cv, _ := get("/cached"); code != 200 || cv.State != "Stable" {
		t.Fatalf("/cached: %d %+v", code, cv)
	}

	// The app stops: the group empties. The cached answer stays, the
	// fresh one shows it.
	if err := wc.Stop(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, fv, body := get("/fresh")
		if code == 200 && fv.State == "Empty" && len(fv.Instances) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/fresh never showed the empty group: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, cv, body := get("/cached"); code != 200 || cv.State != "Stable" || len(cv.Instances) != 1 {
		t.Errorf("/cached after the app stopped: %d %s, want the cached Stable view", code, body)
	}

	// The server stops: every handler closes its client and answers 503.
	stopSrv()
	deadline = time.Now().Add(10 * time.Second)
	for _, h := range []*instancesHandler{cached, fresh, never} {
		for {
			h.clMu.Lock()
			closed, cl := h.clMu.closed, h.clMu.cl
			h.clMu.Unlock()
			if closed && cl == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a handler's client still open after the server's context ended")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, path := range []string{"/fresh", "/cached", "/instances"} {
		if code, _, body := get(path); code != http.StatusServiceUnavailable || !strings.Contains(body, "stopping") {
			t.Errorf("%s after the server stopped: %d %s, want 503", path, code, body)
		}
	}
}
