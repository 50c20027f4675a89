package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pageViewsFixture runs the oracle over a generated input log and writes the
// outputs a correct run would: the reference the negative controls break.
func pageViewsFixture(t *testing.T) (PageViewTopics, PageViewExpectation, Outputs) {
	t.Helper()
	topics := DefaultPageViewTopics()
	gen := GeneratePageViews(7, 20_000, 4)
	var input []InputRecord
	offsets := map[int32]int64{}
	for _, g := range gen {
		input = append(input, InputRecord{Topic: topics.Input, Partition: g.Partition, Offset: offsets[g.Partition], Key: g.Key, Value: g.Value})
		offsets[g.Partition]++
	}
	exp := ExpectPageViews(input)
	if len(exp.PerMinute) == 0 || len(exp.Sessions) == 0 || len(exp.Late) == 0 || len(exp.Dead) == 0 {
		t.Fatalf("fixture does not exercise every output: %d minutes, %d sessions, %d late, %d dead",
			len(exp.PerMinute), len(exp.Sessions), len(exp.Late), len(exp.Dead))
	}
	out := Outputs{}
	for _, k := range sortedKeys(exp.PerMinute) {
		page, start, _ := strings.Cut(k, "|")
		s, _ := strconv.ParseInt(start, 10, 64)
		v, _ := json.Marshal(map[string]int64{"window_start": s, "window_end": s + pvWindow, "count": exp.PerMinute[k]})
		out[topics.PerMinute] = append(out[topics.PerMinute], OutRecord{Key: []byte(page), Value: v})
	}
	for _, k := range sortedKeys(exp.Sessions) {
		parts := strings.Split(k, "|")
		s, _ := strconv.ParseInt(parts[1], 10, 64)
		e, _ := strconv.ParseInt(parts[2], 10, 64)
		v, _ := json.Marshal(map[string]int64{"session_start": s, "session_end": e, "views": exp.Sessions[k]})
		out[topics.Sessions] = append(out[topics.Sessions], OutRecord{Key: []byte(parts[0]), Value: v})
	}
	for _, k := range sortedKeys(exp.Late) {
		key, val, _ := strings.Cut(k, "\x00")
		for range exp.Late[k] {
			out[topics.Late] = append(out[topics.Late], OutRecord{Key: []byte(key), Value: []byte(val)})
		}
	}
	for _, k := range sortedKeys(exp.Dead) {
		p, o, _ := strings.Cut(k, "@")
		out[topics.DLQ] = append(out[topics.DLQ], OutRecord{Headers: map[string]string{"sluice.source.partition": p, "sluice.source.offset": o}})
	}
	return topics, exp, out
}

func TestCheckPageViewsAcceptsCorrectOutput(t *testing.T) {
	topics, exp, out := pageViewsFixture(t)
	if v := CheckPageViews(topics, exp, out); len(v) > 0 {
		t.Fatalf("correct output rejected:\n%s", joinLines(v))
	}
}

// TestCheckPageViewsNegativeControls breaks a correct output in each way an
// exactly-once failure could, and requires the checker to say so.
func TestCheckPageViewsNegativeControls(t *testing.T) {
	topics, exp, _ := pageViewsFixture(t)
	faults := []struct {
		name  string
		topic string
		edit  func([]OutRecord) []OutRecord
		want  string
	}{
		{"minute lost", topics.PerMinute, func(rs []OutRecord) []OutRecord { return rs[1:] }, "never emitted"},
		{"minute twice", topics.PerMinute, func(rs []OutRecord) []OutRecord { return append(rs, rs[3]) }, "emitted 2 times"},
		{"minute wrong count", topics.PerMinute, func(rs []OutRecord) []OutRecord {
			rs[0].Value = []byte(strings.Replace(string(rs[0].Value), `"count":`, `"count":1`, 1))
			return rs
		}, "want"},
		{"open minute emitted", topics.PerMinute, func(rs []OutRecord) []OutRecord {
			return append(rs, OutRecord{Key: []byte("/end"), Value: []byte(`{"window_start":0,"window_end":60000,"count":1}`)})
		}, "open or empty"},
		{"session lost", topics.Sessions, func(rs []OutRecord) []OutRecord { return rs[:len(rs)-1] }, "never emitted"},
		{"session twice", topics.Sessions, func(rs []OutRecord) []OutRecord { return append(rs, rs[0]) }, "emitted 2 times"},
		{"session split", topics.Sessions, func(rs []OutRecord) []OutRecord {
			rs[0].Value = []byte(strings.Replace(string(rs[0].Value), `"session_start":`, `"session_start":1`, 1))
			return rs
		}, "no such closed session"},
		{"late view lost", topics.Late, func(rs []OutRecord) []OutRecord { return rs[1:] }, "never written"},
		{"late view twice", topics.Late, func(rs []OutRecord) []OutRecord { return append(rs, rs[0]) }, "written 2 times"},
		{"late view changed", topics.Late, func(rs []OutRecord) []OutRecord {
			rs[0].Value = append(slices.Clone(rs[0].Value), ' ')
			return rs
		}, "written 1 times, want 0"},
		{"dead letter lost", topics.DLQ, func(rs []OutRecord) []OutRecord { return rs[1:] }, "never dead-lettered"},
		{"dead letter twice", topics.DLQ, func(rs []OutRecord) []OutRecord { return append(rs, rs[0]) }, "dead-lettered 2 times"},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			_, _, out := pageViewsFixture(t)
			out[f.topic] = f.edit(out[f.topic])
			v := CheckPageViews(topics, exp, out)
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, f.want) }) {
				t.Errorf("fault %q not reported (want %q); got %v", f.name, f.want, v)
			}
		})
	}
}

func TestSameSequencesCatchesADifference(t *testing.T) {
	a := []OutRecord{{Key: []byte("k"), Value: []byte("1")}, {Key: []byte("k"), Value: []byte("2")}}
	b := []OutRecord{{Key: []byte("k"), Value: []byte("2")}, {Key: []byte("k"), Value: []byte("1")}}
	if d := SameSequences(PerKeySequences(a), PerKeySequences(a)); len(d) != 0 {
		t.Errorf("equal sequences reported different: %v", d)
	}
	if d := SameSequences(PerKeySequences(a), PerKeySequences(b)); fmt.Sprint(d) != "[k]" {
		t.Errorf("reordered sequence not reported: %v", d)
	}
	if d := SameSequences(PerKeySequences(a), PerKeySequences(a[:1])); fmt.Sprint(d) != "[k]" {
		t.Errorf("shorter sequence not reported: %v", d)
	}
}
