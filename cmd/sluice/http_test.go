package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/plugin/sluiceprom"
	"github.com/sluice-streams/sluice/processor"
)

func TestHTTPEndpoints(t *testing.T) {
	addrs := testbroker.Addrs(t)
	// On a shared cluster (SLUICE_TEST_BROKERS), topics and the group of
	// their own; on the in-process broker, the names as they always were.
	lines, appID := "lines", "http-test"
	if len(testbroker.External()) > 0 {
		lines, appID = testbroker.Unique(t, "lines-"), testbroker.Unique(t, "http-test-")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tp := range []string{lines, lines + "-counts"} {
		if err := broker.CreateTopic(ctx, addrs, tp, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	app, err := processor.New(examples.WordCount(lines, lines+"-counts", lines+"-dlq"),
		processor.ApplicationID(appID), processor.Brokers(addrs...), processor.StateDir(t.TempDir()),
		sluiceprom.ClientMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := listenHTTP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	defer serveOn(ln, app, reg, slog.New(slog.DiscardHandler), httpSecurity{})()
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

	// Words through both sub-topologies, then the metrics they move.
	// Half the lines to each partition, so that every task of the first
	// sub-topology has input.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(lines), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 200 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "w%d w%d shared", i%7, i%3)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	value := func(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
		f := fams[name]
		if f == nil {
			return 0, false
		}
	next:
		for _, m := range f.Metric {
			for k, v := range labels {
				found := false
				for _, lp := range m.Label {
					found = found || lp.GetName() == k && lp.GetValue() == v
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
		return 0, false
	}
	var fams map[string]*dto.MetricFamily
	for {
		_, body := get("/metrics")
		p := expfmt.NewTextParser(model.UTF8Validation)
		if fams, err = p.TextToMetricFamilies(strings.NewReader(body)); err != nil {
			t.Fatalf("/metrics does not parse: %v", err)
		}
		if n, _ := value(fams, "sluice_records_processed_total", nil); n >= 200+600 {
			break // every line, and each of its three words
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("the 200 lines were not processed: %v", fams["sluice_records_processed_total"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"sluice_commits_total", nil},
		{"sluice_records_produced_total", nil},
		{"sluice_rebalances_total", nil},
		{"sluice_process_latency_seconds", nil},
		{"sluice_commit_latency_seconds", nil},
		{"sluice_end_to_end_latency_seconds", nil},
		{"sluice_task_state", map[string]string{"task": "1_0", "state": "running"}},
		{"sluice_task_records_processed_total", map[string]string{"task": "0_0"}},
		{"sluice_task_records_produced_total", map[string]string{"task": "0_0"}},
		{"sluice_store_gets_total", map[string]string{"task": "1_0", "store": "counts"}},
		{"sluice_store_bytes", map[string]string{"task": "1_0", "store": "counts"}},
		{"sluice_store_memory_bytes", map[string]string{"task": "1_0", "store": "counts"}},
		{"sluice_kafka_connects_total", nil},
		{"sluice_kafka_write_bytes_total", nil},
	} {
		if v, ok := value(fams, c.name, c.labels); !ok || v <= 0 {
			t.Errorf("%s%v = %v, %v; want a positive value", c.name, c.labels, v, ok)
		}
	}
	if _, ok := value(fams, "sluice_consumer_lag_records", map[string]string{"task": "0_0", "topic": lines}); !ok {
		t.Errorf("no consumer lag for task 0_0")
	}
	if _, ok := value(fams, "sluice_task_state", map[string]string{"task": "9_9"}); ok {
		t.Errorf("the metric lookup finds a task that does not exist")
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
}
