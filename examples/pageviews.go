package examples

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

func init() {
	register(Example{
		Name:    "pageviews",
		Summary: "per-minute page view counts and user sessions in event time, with out-of-order and late views",
		Params: []Param{
			{"input", "pageviews", "input topic of JSON page views, keyed by user"},
			{"per-minute", "pageviews-per-minute", "output: final 1-minute counts per page"},
			{"late", "pageviews-late", "output: views too late for their minute, unchanged"},
			{"sessions", "user-sessions", "output: final sessions per user (30 min inactivity gap)"},
			{"dlq", "pageviews-dlq", "dead-letter topic for views that cannot be read"},
		},
		Inputs: []string{"input"},
		Build: func(p map[string]string) *topology.Topology {
			return PageViews(p["input"], p["per-minute"], p["late"], p["sessions"], p["dlq"])
		},
		Options: func(p map[string]string) []processor.Opt {
			return []processor.Opt{processor.DeadLetterTopic(p["dlq"])}
		},
	})
}

// The event-time settings of pageviews.
const (
	PageViewsBound    = 10 * time.Second // bounded out-of-orderness
	PageViewsWindow   = time.Minute      // tumbling window per page
	PageViewsLateness = 30 * time.Second // allowed lateness, windows and sessions
	PageViewsGap      = 30 * time.Minute // session inactivity gap
)

// PageView is an input record of pageviews.
type PageView struct {
	User string `json:"user"`
	Page string `json:"page"`
	TS   int64  `json:"ts"` // event time, epoch millis

	// The record as read, so a late view is written out unchanged.
	rawKey, raw []byte
}

// PageCount is a final per-minute count of one page.
type PageCount struct {
	WindowStart int64 `json:"window_start"`
	WindowEnd   int64 `json:"window_end"`
	Count       int64 `json:"count"`
}

// Session is a final session of one user: its first and last view (epoch
// millis) and the number of views.
type Session struct {
	SessionStart int64 `json:"session_start"`
	SessionEnd   int64 `json:"session_end"`
	Views        int64 `json:"views"`
}

// PageViews counts views per page in 1-minute tumbling windows and sessions
// per user (30 minutes of inactivity), both in event time (the views' ts)
// with 10 s of bounded out-of-orderness and 30 s of allowed lateness,
// emitting only final results. Views too late for their minute go to late
// unchanged (a view too late for its session is always too late for its
// minute as well: the session stays open for 30 minutes longer).
//
// Views are expected keyed by user, so sessions need no repartition and are
// judged against the watermark of their own input partition; the
// per-minute counts repartition by page through
// <application.id>-pageviews-by-page-repartition.
func PageViews(input, perMinute, late, sessions, dlq string) *topology.Topology {
	t := topology.New()
	views := topology.From(t, input, serde.Bytes, pageViewSerde{}, topology.DeadLetter(dlq),
		topology.TimestampFrom(func(_ []byte, v PageView, _ int64) int64 { return v.TS }),
		topology.Watermarks(window.BoundedOutOfOrderness(PageViewsBound)))

	// The key travels inside the value, so a late view leaves as it came.
	keyed := topology.Map(views, func(k []byte, v PageView) ([]byte, PageView) { v.rawKey = k; return k, v })
	byPage := topology.WindowedBy(
		topology.GroupBy(keyed, func(_ []byte, v PageView) string { return v.Page },
			topology.Grouped[string, PageView]("pageviews-by-page", serde.String, envelopeSerde{})),
		window.Tumbling(PageViewsWindow), topology.AllowedLateness(PageViewsLateness), topology.EmitFinal())
	counts := topology.CountWindows(byPage, topology.Materialized("page-counts", serde.String, serde.Int64))
	topology.To(topology.Map(topology.ToStream(counts), func(w topology.Windowed[string], n int64) (string, PageCount) {
		return w.Key, PageCount{WindowStart: w.Window.Start, WindowEnd: w.Window.End, Count: n}
	}), perMinute, serde.String, serde.JSON[PageCount]())
	topology.To(topology.Map(topology.LateRecords(byPage), func(_ string, v PageView) ([]byte, PageView) {
		return v.rawKey, v
	}), late, serde.Bytes, pageViewSerde{})

	byUser := topology.WindowedBy(topology.GroupByKey(views),
		window.InactivityGap(PageViewsGap), topology.AllowedLateness(PageViewsLateness), topology.EmitFinal())
	sess := topology.CountWindows(byUser, topology.Materialized("user-sessions", serde.Bytes, serde.Int64))
	topology.To(topology.Map(topology.ToStream(sess), func(w topology.Windowed[[]byte], n int64) ([]byte, Session) {
		return w.Key, Session{SessionStart: w.Window.Start, SessionEnd: w.Window.End - 1, Views: n}
	}), sessions, serde.Bytes, serde.JSON[Session]())
	return t
}

// pageViewSerde decodes a view's JSON and keeps the bytes; it encodes a
// view read from a topic as those same bytes.
type pageViewSerde struct{}

func (pageViewSerde) Encode(v PageView) ([]byte, error) {
	if v.raw != nil {
		return v.raw, nil
	}
	return json.Marshal(v)
}

func (pageViewSerde) Decode(b []byte) (PageView, error) {
	var v PageView
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("%w: page view: %v", serde.ErrDecode, err)
	}
	if v.User == "" || v.Page == "" {
		return v, fmt.Errorf("%w: page view needs a user and a page", serde.ErrDecode)
	}
	v.raw = append([]byte(nil), b...)
	return v, nil
}

// envelopeSerde carries a view through the repartition topic with its
// original key and bytes: uvarint(len(key)), key, value bytes.
type envelopeSerde struct{}

func (envelopeSerde) Encode(v PageView) ([]byte, error) {
	raw, err := pageViewSerde{}.Encode(v)
	if err != nil {
		return nil, err
	}
	b := binary.AppendUvarint(nil, uint64(len(v.rawKey)))
	return append(append(b, v.rawKey...), raw...), nil
}

func (envelopeSerde) Decode(b []byte) (PageView, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return PageView{}, fmt.Errorf("%w: page view envelope", serde.ErrDecode)
	}
	v, err := pageViewSerde{}.Decode(b[w+int(n):])
	v.rawKey = append([]byte{}, b[w:w+int(n)]...)
	return v, err
}
