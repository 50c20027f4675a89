package integration

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
)

// The pageviews example's event-time settings, restated for the oracle (an
// independent checker does not import the application).
const (
	pvBound    = 10_000          // ms of bounded out-of-orderness
	pvWindow   = 60_000          // ms, tumbling
	pvLateness = 30_000          // ms, windows and sessions
	pvGap      = 30 * 60 * 1_000 // ms, session inactivity gap
)

// PageViewTopics names the pageviews example's topics.
type PageViewTopics struct {
	Input, PerMinute, Late, Sessions, DLQ string
}

// DefaultPageViewTopics returns the names the example uses by default.
func DefaultPageViewTopics() PageViewTopics {
	return PageViewTopics{"pageviews", "pageviews-per-minute", "pageviews-late", "user-sessions", "pageviews-dlq"}
}

func (t PageViewTopics) outputs() []string { return []string{t.PerMinute, t.Late, t.Sessions, t.DLQ} }

// GeneratePageViews makes n views by a population of users who come and go
// (so sessions close), arriving out of order within the bound, with about 2%
// far beyond the lateness and 0.5% that are not valid JSON; then one view per
// partition far in the future, so that every partition's watermark passes
// the rest and their windows and sessions close.
func GeneratePageViews(seed int64, n int, partitions int32) []GenRecord {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9a6e))
	const users, pages, pool, block = 60, 25, 8, 1500
	var out []GenRecord
	part := func(u int) int32 { return int32(u) % partitions }
	now := int64(baseTS)
	for i := range n {
		now += int64(rng.IntN(900))
		// Users u with u in [b*4, b*4+pool) of block b are active: each is
		// active for two blocks, then away for hours.
		b := i / block
		u := (b*4 + rng.IntN(pool)) % users
		user := "u" + strconv.Itoa(u)
		ts := now - int64(rng.IntN(pvBound+2_000))
		if rng.IntN(50) == 0 {
			ts = now - pvLateness - pvWindow - int64(rng.IntN(300_000))
		}
		v := mustMarshal(map[string]any{"user": user, "page": "/p" + strconv.Itoa(rng.IntN(pages)), "ts": ts})
		if rng.IntN(200) == 0 {
			v = []byte(`{"user": "` + user + `", "page": `) // truncated
		}
		out = append(out, GenRecord{Partition: part(u), Key: []byte(user), Value: v})
	}
	for p := range partitions {
		u := int(p) // part(u) == p
		user := "u" + strconv.Itoa(u)
		v := mustMarshal(map[string]any{"user": user, "page": "/end", "ts": now + 3*pvGap})
		out = append(out, GenRecord{Partition: p, Key: []byte(user), Value: v})
	}
	return out
}

// PageViewExpectation is what the oracle computes from the input log.
type PageViewExpectation struct {
	PerMinute map[string]int64 // "page|start" → count, every closed window
	Sessions  map[string]int64 // "user|start|end" → views, every closed session
	Late      map[string]int   // "key\x00value" → how often
	Dead      map[string]bool  // "partition@offset" of unreadable views
}

// ExpectPageViews replays the input log partition by partition, as the
// example's source tasks do: a partition's watermark is max(ts) - bound - 1
// after each view; a view is late for its minute when window end - 1 +
// lateness is at or below the watermark before it; a minute closes
// once the minimum over partitions of their final watermarks reaches that
// time (the per-minute counts combine every partition); a user's sessions
// (all in one partition) close on that partition's watermark.
func ExpectPageViews(input []InputRecord) PageViewExpectation {
	exp := PageViewExpectation{PerMinute: map[string]int64{}, Sessions: map[string]int64{}, Late: map[string]int{}, Dead: map[string]bool{}}
	byPart := map[int32][]InputRecord{}
	for _, r := range input {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	type session struct{ first, last, views int64 }
	finalWM := int64(1<<63 - 1)
	windows := map[string]int64{}
	closeAt := map[string]int64{}
	for _, p := range sortedKeys(byPart) {
		rs := byPart[p]
		slices.SortFunc(rs, func(a, b InputRecord) int { return cmp.Compare(a.Offset, b.Offset) })
		wm := int64(-1 << 63)
		sessions := map[string][]session{}
		for _, r := range rs {
			v, ok := parsePageView(r.Value)
			if !ok {
				exp.Dead[fmt.Sprintf("%d@%d", r.Partition, r.Offset)] = true
				continue
			}
			start := v.TS - v.TS%pvWindow
			if start+pvWindow-1+pvLateness <= wm {
				exp.Late[string(r.Key)+"\x00"+string(r.Value)]++
			} else {
				k := v.Page + "|" + strconv.FormatInt(start, 10)
				windows[k]++
				closeAt[k] = start + pvWindow - 1 + pvLateness
			}
			// Sessions: merge every session the view is within a gap of.
			merged := session{v.TS, v.TS, 1}
			var rest []session
			for _, s := range sessions[string(r.Key)] {
				if s.first-pvGap <= v.TS && v.TS <= s.last+pvGap {
					merged = session{min(merged.first, s.first), max(merged.last, s.last), merged.views + s.views}
				} else {
					rest = append(rest, s)
				}
			}
			if merged.last+pvGap+pvLateness > wm {
				sessions[string(r.Key)] = append(rest, merged)
			}
			wm = max(wm, v.TS-pvBound-1)
			// Close the sessions the watermark passed.
			for user, ss := range sessions {
				var open []session
				for _, s := range ss {
					if s.last+pvGap+pvLateness <= wm {
						exp.Sessions[fmt.Sprintf("%s|%d|%d", user, s.first, s.last)] = s.views
					} else {
						open = append(open, s)
					}
				}
				sessions[user] = open
			}
		}
		finalWM = min(finalWM, wm)
	}
	for k, n := range windows {
		if closeAt[k] <= finalWM {
			exp.PerMinute[k] = n
		}
	}
	return exp
}

// pageView is a view as the example reads it.
type pageView struct {
	User string `json:"user"`
	Page string `json:"page"`
	TS   int64  `json:"ts"`
}

// parsePageView decodes a view; ok is false for one the example
// dead-letters.
func parsePageView(b []byte) (v pageView, ok bool) {
	err := json.Unmarshal(b, &v)
	return v, err == nil && v.User != "" && v.Page != "" && v.TS >= 0
}

// CheckPageViews compares the committed outputs with the expectation: each
// closed minute and each closed session exactly once with the oracle's
// count, nothing else; every late view exactly once, unchanged; every
// unreadable view dead-lettered exactly once.
func CheckPageViews(topics PageViewTopics, exp PageViewExpectation, out Outputs) []string {
	var v []string
	violate := func(format string, args ...any) {
		if len(v) < 50 {
			v = append(v, fmt.Sprintf(format, args...))
		}
	}
	// exactlyOnce checks emitted (key, n) results against want: every
	// wanted key once with its n, nothing else.
	type result struct {
		k string
		n int64
	}
	exactlyOnce := func(topic, noun, unknown string, got []result, want map[string]int64) {
		seen := map[string]int{}
		for _, r := range got {
			seen[r.k]++
			w, ok := want[r.k]
			switch {
			case !ok:
				violate("%s: %s emitted (%s %d) but %s", topic, r.k, noun, r.n, unknown)
			case seen[r.k] > 1:
				violate("%s: %s emitted %d times", topic, r.k, seen[r.k])
			case r.n != w:
				violate("%s: %s %s %d, want %d", topic, r.k, noun, r.n, w)
			}
		}
		for _, k := range sortedKeys(want) {
			if seen[k] == 0 {
				violate("%s: %s (%s %d) never emitted", topic, k, noun, want[k])
			}
		}
	}
	var minutes, sessions []result
	for _, r := range out[topics.PerMinute] {
		var pc struct {
			Start int64 `json:"window_start"`
			End   int64 `json:"window_end"`
			Count int64 `json:"count"`
		}
		if err := json.Unmarshal(r.Value, &pc); err != nil || pc.End != pc.Start+pvWindow {
			violate("per-minute: malformed %q", r.Value)
			continue
		}
		minutes = append(minutes, result{string(r.Key) + "|" + strconv.FormatInt(pc.Start, 10), pc.Count})
	}
	exactlyOnce("per-minute", "count", "the oracle has it open or empty", minutes, exp.PerMinute)
	for _, r := range out[topics.Sessions] {
		var s struct {
			Start int64 `json:"session_start"`
			End   int64 `json:"session_end"`
			Views int64 `json:"views"`
		}
		if err := json.Unmarshal(r.Value, &s); err != nil {
			violate("sessions: malformed %q", r.Value)
			continue
		}
		sessions = append(sessions, result{fmt.Sprintf("%s|%d|%d", r.Key, s.Start, s.End), s.Views})
	}
	exactlyOnce("sessions", "views", "the oracle has no such closed session", sessions, exp.Sessions)
	late := map[string]int{}
	for _, r := range out[topics.Late] {
		late[string(r.Key)+"\x00"+string(r.Value)]++
	}
	for _, k := range sortedKeys(late) {
		if late[k] != exp.Late[k] {
			violate("late: %q written %d times, want %d", clipString(k), late[k], exp.Late[k])
		}
	}
	for _, k := range sortedKeys(exp.Late) {
		if late[k] == 0 {
			violate("late: %q never written", clipString(k))
		}
	}
	dead := map[string]int{}
	for _, r := range out[topics.DLQ] {
		dead[r.Headers["sluice.source.partition"]+"@"+r.Headers["sluice.source.offset"]]++
	}
	for _, k := range sortedKeys(dead) {
		if !exp.Dead[k] || dead[k] > 1 {
			violate("dlq: input %s dead-lettered %d times, want %d", k, dead[k], b2i(exp.Dead[k]))
		}
	}
	for _, k := range sortedKeys(exp.Dead) {
		if dead[k] == 0 {
			violate("dlq: input %s never dead-lettered", k)
		}
	}
	return v
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// PerKeySequences is a topic's records as each key's sequence of values:
// what must be byte-identical between two runs over the same input.
func PerKeySequences(rs []OutRecord) map[string][][]byte {
	m := map[string][][]byte{}
	for _, r := range rs {
		m[string(r.Key)] = append(m[string(r.Key)], r.Value)
	}
	return m
}

// SortedRecords is a topic's records as a sorted multiset of key and value.
func SortedRecords(rs []OutRecord) []string {
	var s []string
	for _, r := range rs {
		s = append(s, string(r.Key)+"\x00"+string(r.Value))
	}
	sort.Strings(s)
	return s
}

// SameSequences reports the keys whose value sequences differ.
func SameSequences(a, b map[string][][]byte) []string {
	var diff []string
	for _, k := range sortedKeys(a) {
		if !slices.EqualFunc(a[k], b[k], bytes.Equal) {
			diff = append(diff, k)
		}
	}
	for _, k := range sortedKeys(b) {
		if _, ok := a[k]; !ok {
			diff = append(diff, k)
		}
	}
	return diff
}
