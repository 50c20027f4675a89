package bench

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"

	"github.com/sluice-streams/sluice/processor"
)

// ScalingSVG draws the record and key sweeps of rep as one SVG: throughput
// and peak RSS against records, and against distinct keys, on a log x
// axis, one line per scenario, the memory budget dashed on the RSS panels
// and, with state.memory.go.limit on, the bound it keeps RSS under.
// Hand-written SVG, so the chart needs nothing to build.
func ScalingSVG(rep ScalingReport) []byte {
	const (
		pw, ph         = 420, 260 // one panel
		ml, mr, mt, mb = 70, 20, 36, 46
		cols           = 2
	)
	type panel struct {
		axis, title, ylabel string
		rss                 bool
	}
	panels := []panel{
		{"records", "throughput against input size (100k keys)", "records/s", false},
		{"records", "peak RSS against input size", "MiB", true},
		{"keys", "throughput against distinct keys", "records/s", false},
		{"keys", "peak RSS against distinct keys", "MiB", true},
	}
	colors := map[string]string{"count": "#1f77b4", "windowed": "#d62728"}
	var b bytes.Buffer
	w, h := cols*pw, (len(panels)+cols-1)/cols*ph+44
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<title>sluice: how cost grows (state.memory.budget %d MiB, state.memory.go.limit %v, commit.interval %s, %d partitions)</title>`+"\n",
		rep.Config.MemoryBudget>>20, rep.Config.LimitGoMemory, rep.Config.CommitInterval, rep.Config.Partitions)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	// The RSS bound the Go memory limit keeps, when it is on.
	bound := 0.0
	if rep.Config.LimitGoMemory && rep.Config.MemoryBudget > 0 {
		bound = float64((rep.Config.MemoryBudget + processor.MemoryBase) >> 20)
	}
	for i, p := range panels {
		ox, oy := float64(i%cols*pw), float64(i/cols*ph)
		x0, x1 := ox+ml, ox+pw-mr
		y0, y1 := oy+ph-mb, oy+mt // y0 bottom
		var pts []ScalingResult
		for _, r := range rep.Points {
			if r.Kind == ScalingThroughput && r.Axis == p.axis {
				pts = append(pts, r)
			}
		}
		xv := func(r ScalingResult) float64 {
			if p.axis == "keys" {
				return float64(r.Keys)
			}
			return float64(r.Records)
		}
		yv := func(r ScalingResult) float64 {
			if p.rss {
				return float64(r.PeakRSSBytes) / (1 << 20)
			}
			return r.PerSecond
		}
		fmt.Fprintf(&b, `<g class="panel" data-axis="%s" data-measure="%s">`+"\n", p.axis, html.EscapeString(p.ylabel))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="13" font-weight="bold">%s</text>`+"\n", x0, oy+20, html.EscapeString(p.title))
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", x0, y1, x1-x0, y0-y1)
		// Log x range: whole decades around the points.
		lo, hi := math.Inf(1), math.Inf(-1)
		ymax := 0.0
		for _, r := range pts {
			lo, hi = math.Min(lo, xv(r)), math.Max(hi, xv(r))
			ymax = math.Max(ymax, yv(r))
		}
		if p.rss && rep.Config.MemoryBudget > 0 {
			ymax = math.Max(ymax, math.Max(bound, float64(rep.Config.MemoryBudget>>20)))
		}
		if len(pts) == 0 {
			lo, hi = 1e4, 1e6
		}
		dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if dhi <= dlo {
			dhi = dlo + 1
		}
		ymax = niceCeil(ymax * 1.1)
		px := func(x float64) float64 { return x0 + (math.Log10(x)-dlo)/(dhi-dlo)*(x1-x0) }
		py := func(y float64) float64 { return y0 - y/ymax*(y0-y1) }
		for d := dlo; d <= dhi; d++ {
			x := px(math.Pow(10, d))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eee"/>`, x, y1, x, y0)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x, y0+14, formatCount(int(math.Pow(10, d))))
		}
		for j := 0; j <= 4; j++ {
			y := ymax * float64(j) / 4
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`, x0, py(y), x1, py(y))
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-4, py(y)+4, formatAxis(y))
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s (log)</text>`+"\n", (x0+x1)/2, y0+30, map[string]string{"records": "input records", "keys": "distinct keys"}[p.axis])
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle" transform="rotate(-90 %.0f %.0f)">%s</text>`+"\n", ox+14, (y0+y1)/2, ox+14, (y0+y1)/2, html.EscapeString(p.ylabel))
		if p.rss && rep.Config.MemoryBudget > 0 {
			y := py(float64(rep.Config.MemoryBudget >> 20))
			fmt.Fprintf(&b, `<line class="budget" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#2ca02c" stroke-dasharray="6 4"/>`, x0, y, x1, y)
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end" fill="#2ca02c">state.memory.budget</text>`+"\n", x1-4, y-4)
			if bound > 0 {
				y := py(bound)
				fmt.Fprintf(&b, `<line class="bound" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#9467bd" stroke-dasharray="2 3"/>`, x0, y, x1, y)
				fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end" fill="#9467bd">budget + %d MiB: the bound of state.memory.go.limit</text>`+"\n", x1-4, y-4, processor.MemoryBase>>20)
			}
		}
		var series []string
		for _, r := range pts {
			if !slices.Contains(series, r.Scenario) {
				series = append(series, r.Scenario)
			}
		}
		for si, s := range series {
			var sp []ScalingResult
			for _, r := range pts {
				if r.Scenario == s {
					sp = append(sp, r)
				}
			}
			slices.SortFunc(sp, func(a, c ScalingResult) int { return int(math.Copysign(1, xv(a)-xv(c))) })
			color := colors[s]
			if color == "" {
				color = "#555"
			}
			var line bytes.Buffer
			for _, r := range sp {
				fmt.Fprintf(&line, "%.1f,%.1f ", px(xv(r)), py(yv(r)))
			}
			fmt.Fprintf(&b, `<polyline class="series" data-series="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", html.EscapeString(s), color, bytes.TrimSpace(line.Bytes()))
			for _, r := range sp {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %s records, %s keys: %s %s</title></circle>`+"\n",
					px(xv(r)), py(yv(r)), color, html.EscapeString(s), formatCount(r.Records), formatCount(r.Keys), formatAxis(yv(r)), html.EscapeString(p.ylabel))
			}
			lx, ly := x1-90, y1+14+float64(si)*14
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="2"/><text x="%.0f" y="%.0f">%s</text>`+"\n", lx, ly-4, lx+16, ly-4, color, lx+20, ly, html.EscapeString(s))
		}
		b.WriteString("</g>\n")
	}
	note := "every job in a process of its own, the broker in another; exactly_once; output checked after each run"
	var cl, cp *ScalingResult
	for i := range rep.Points {
		switch rep.Points[i].Kind {
		case ScalingRestoreChangelog:
			cl = &rep.Points[i]
		case ScalingRestoreCheckpoint:
			cp = &rep.Points[i]
		}
	}
	notes := []string{note}
	if cl != nil && cp != nil {
		// A line of its own: on one line with the other, it ran past the
		// chart's width.
		notes = []string{fmt.Sprintf("restore of a %d MiB store: %.1f s from its changelog, %.1f s from the local checkpoint after SIGKILL",
			cl.StoreBytes>>20, cl.Seconds, cp.Seconds), note}
	}
	for i, n := range notes {
		fmt.Fprintf(&b, `<text class="note" x="10" y="%d" fill="#555">%s</text>`+"\n", h-10-14*(len(notes)-1-i), html.EscapeString(n))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// formatAxis writes an axis value briefly: 1.2M, 350k, 512.
func formatAxis(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.4g", v)
}
