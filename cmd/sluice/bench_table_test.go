package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/bench"
)

// TestBenchTableLoopShares: the table prints, under a sluice job's line,
// where its loop spent the run, in the loop's order; the pipe, which has
// no sluice loop, gets no such line.
func TestBenchTableLoopShares(t *testing.T) {
	var out bytes.Buffer
	printTable(&out, []bench.Result{
		{Scenario: "pipe", Guarantee: "exactly_once"},
		{Scenario: "count", Guarantee: "exactly_once", LoopShares: map[string]float64{
			"apply": 0.08, "end": 0.04, "flush": 0.23, "poll": 0.22, "process": 0.41}},
	})
	const want = "count exactly_once: \n  loop time: poll 22%, process 41%, flush 23%, end 4%, apply 8%\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("the table lacks %q:\n%s", want, out.String())
	}
	if n := strings.Count(out.String(), "loop time"); n != 1 {
		t.Errorf("%d loop time lines, want count's alone:\n%s", n, out.String())
	}
}
