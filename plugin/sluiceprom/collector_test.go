package sluiceprom_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/plugin/sluiceprom"
	"github.com/sluice-streams/sluice/processor"
)

func TestCollectorServesMetrics(t *testing.T) {
	app, err := processor.New(examples.WordCount("in", "out", "dlq"), processor.ApplicationID("m"))
	if err != nil {
		t.Fatal(err)
	}
	app.Stats().Commits.Add(3)
	app.Stats().Late.Add(2)
	app.Stats().IgnoredDeletes.Add(5)
	reg := prometheus.NewRegistry()
	reg.MustRegister(sluiceprom.NewCollector(app))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"sluice_commits_total 3", "sluice_records_processed_total 0", "sluice_tasks 0", "sluice_late_records_total 2",
		"sluice_ignored_deletes_total 5",
		`sluice_loop_seconds_total{phase="poll"} 0`, `sluice_loop_seconds_total{phase="process"} 0`, `sluice_loop_seconds_total{phase="flush"} 0`,
		`sluice_loop_seconds_total{phase="end"} 0`, `sluice_loop_seconds_total{phase="apply"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}
