package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/processor"
)

func TestHTTPEndpoints(t *testing.T) {
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tp := range []string{"lines", "counts"} {
		if err := broker.CreateTopic(ctx, b.Addrs(), tp, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	app, err := processor.New(examples.WordCount("lines", "counts", "lines-dlq"),
		processor.ApplicationID("http-test"), processor.Brokers(b.Addrs()...), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	addr, stop, err := serveHTTP("127.0.0.1:0", app, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before Run: %d, want 503", code)
	}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(rctx) }()
	defer func() { rcancel(); <-done }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get("/readyz")
		if code == http.StatusOK {
			var st processor.Status
			if err := json.Unmarshal([]byte(body), &st); err != nil || !st.Ready || len(st.Tasks) != 4 {
				t.Fatalf("/readyz: %s (%v)", body, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := get("/tasks"); code != 200 || !strings.Contains(body, `"state": "running"`) {
		t.Errorf("/tasks: %d %s", code, body)
	}
	if code, body := get("/topology"); code != 200 || !strings.Contains(body, `"counts-repartition"`) {
		t.Errorf("/topology: %d %s", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "sluice_tasks 4") {
		t.Errorf("/metrics: %d lacks sluice_tasks 4", code)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
}
