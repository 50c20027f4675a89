package bench

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/processor"
)

// svgSeries checks that b is well-formed XML with an <svg> root, and
// returns the series each panel draws, as "axis/measure/series", with the
// number of points of each.
func svgSeries(b []byte) (map[string]int, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	series := map[string]int{}
	var axis, measure string
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = se.Name.Local
		}
		attr := func(n string) string {
			for _, a := range se.Attr {
				if a.Name.Local == n {
					return a.Value
				}
			}
			return ""
		}
		switch se.Name.Local {
		case "g":
			axis, measure = attr("data-axis"), attr("data-measure")
		case "polyline":
			pts := bytes.Fields([]byte(attr("points")))
			series[axis+"/"+measure+"/"+attr("data-series")] = len(pts)
		}
	}
	if root != "svg" {
		return nil, fmt.Errorf("root element %q, want svg", root)
	}
	return series, nil
}

// TestScalingSmall runs the record sweep of the count at two small sizes
// in this process (on an embedded broker, so without peak RSS), checks
// each point's output (RunScaling does), and draws the chart: well-formed
// SVG with the count's line, of two points, on both record panels.
// Negative control: the chart cut short, or with its series renamed, is
// caught.
func TestScalingSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jobs on an embedded broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := ScalingConfig{
		Scenarios: []string{"count"}, Records: []int{10_000, 20_000}, Keys: []int{},
		Partitions: 2, CommitInterval: 50 * time.Millisecond, MemoryBudget: processor.MinMemoryBudget,
		StartBroker: func(ctx context.Context, partitions int32) ([]string, func(), error) {
			b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: int(partitions)})
			if err != nil {
				return nil, nil, err
			}
			return b.Addrs(), b.Close, nil
		},
		Start: func(ctx context.Context, p ScalingPoint) (ScalingUsage, error) {
			if p.Kind == ScalingKill {
				return ScalingUsage{}, errors.New("a kill point would kill the test")
			}
			return runScalingPoint(ctx, p, nil)
		},
	}
	rep, err := RunScaling(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 2 {
		t.Fatalf("%d points, want 2", len(rep.Points))
	}
	for _, p := range rep.Points {
		if p.Processed < int64(p.Records) || p.PerSecond <= 0 || p.Note == "" || p.PeakGoBytes <= 0 {
			t.Errorf("point %+v: want every record processed, a rate, the verification's note and the Go memory", p)
		}
	}
	svg := ScalingSVG(rep)
	want := map[string]int{"records/records/s/count": 2, "records/MiB/count": 2}
	check := func(b []byte) error {
		got, err := svgSeries(b)
		if err != nil {
			return err
		}
		for k, n := range want {
			if got[k] != n {
				return fmt.Errorf("series %s: %d points, want %d (have %v)", k, got[k], n, got)
			}
		}
		return nil
	}
	if err := check(svg); err != nil {
		t.Fatalf("chart: %v\n%s", err, svg)
	}
	if err := check(svg[:len(svg)*2/3]); err == nil {
		t.Error("negative control: a chart cut short passes")
	}
	if err := check(bytes.ReplaceAll(svg, []byte(`data-series="count"`), []byte(`data-series="other"`))); err == nil {
		t.Error("negative control: a chart without the count's series passes")
	}
	var ser []string
	got, _ := svgSeries(svg)
	for k := range got {
		ser = append(ser, k)
	}
	slices.Sort(ser)
	t.Logf("series %v; points %+v", ser, rep.Points)
}

// TestScalingSVGBound: with state.memory.go.limit on, both RSS panels draw
// the bound it keeps RSS under (the budget plus processor.MemoryBase);
// with it off, neither does (the negative control).
func TestScalingSVGBound(t *testing.T) {
	rep := ScalingReport{Config: ScalingConfig{MemoryBudget: 256 << 20, CommitInterval: 100 * time.Millisecond, Partitions: 8}}
	for _, axis := range []string{"records", "keys"} {
		for i, n := range []int{1_000_000, 10_000_000} {
			rep.Points = append(rep.Points, ScalingResult{
				ScalingPoint: ScalingPoint{Kind: ScalingThroughput, Scenario: "count", Axis: axis, Records: n, Keys: n / 10},
				ScalingUsage: ScalingUsage{PeakRSSBytes: int64(300+100*i) << 20}, PerSecond: 1e6})
		}
	}
	for _, on := range []bool{true, false} {
		rep.Config.LimitGoMemory = on
		svg := string(ScalingSVG(rep))
		want := 0
		if on {
			want = 2
		}
		if got := strings.Count(svg, `class="bound"`); got != want {
			t.Errorf("state.memory.go.limit %v: %d bound lines, want %d", on, got, want)
		}
		if on && !strings.Contains(svg, "budget + 256 MiB") {
			t.Errorf("state.memory.go.limit on: no label of the bound\n%s", svg)
		}
	}
}
