package integration

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// enrichFixture writes the outputs a correct enrich run would produce for a
// generated input: the reference the negative controls break.
func enrichFixture(t *testing.T) (EnrichTopics, EnrichExpectation, Outputs) {
	t.Helper()
	topics := DefaultEnrichTopics()
	in := GenerateEnrich(3, 2_000, 4)
	if len(in.Changes) == 0 {
		t.Fatal("fixture exercises no customer changes")
	}
	exp := ExpectEnrich(in)
	out := Outputs{}
	paid := 0
	for _, id := range sortedKeys(exp.Orders) {
		if strings.Contains(exp.Orders[id], `"paid"`) {
			paid++
		}
		out[topics.Enriched] = append(out[topics.Enriched], OutRecord{Key: []byte(id), Value: []byte(exp.Orders[id])})
	}
	if paid == 0 || paid == len(exp.Orders) {
		t.Fatalf("fixture has %d paid orders of %d: it exercises only one kind", paid, len(exp.Orders))
	}
	for _, tier := range sortedKeys(exp.Revenue) {
		out[topics.Revenue] = append(out[topics.Revenue], OutRecord{Key: []byte(tier), Value: mustMarshal(map[string]int64{"revenue_cents": exp.Revenue[tier]})})
	}
	return topics, exp, out
}

func TestCheckEnrichAcceptsCorrectOutput(t *testing.T) {
	topics, exp, out := enrichFixture(t)
	if v := CheckEnrich(topics, exp, out); len(v) > 0 {
		t.Fatalf("correct output rejected:\n%s", joinLines(v))
	}
}

func TestCheckEnrichNegativeControls(t *testing.T) {
	topics, exp, _ := enrichFixture(t)
	faults := []struct {
		name, topic, want string
		edit              func([]OutRecord) []OutRecord
	}{
		{"order lost", topics.Enriched, "never emitted", func(rs []OutRecord) []OutRecord { return rs[1:] }},
		{"order twice", topics.Enriched, "emitted 2 times", func(rs []OutRecord) []OutRecord { return append(rs, rs[5]) }},
		{"payment lost", topics.Enriched, "want", func(rs []OutRecord) []OutRecord {
			for i, r := range rs {
				if strings.Contains(string(r.Value), `"paid"`) {
					var e enrichOut
					_ = json.Unmarshal(r.Value, &e)
					e.Status, e.Payment = "unpaid", nil
					rs[i].Value = mustMarshal(e)
					return rs
				}
			}
			return rs
		}},
		{"tier of the wrong time", topics.Enriched, "want", func(rs []OutRecord) []OutRecord {
			var e enrichOut
			_ = json.Unmarshal(rs[0].Value, &e)
			e.CustomerTier += "x"
			rs[0].Value = mustMarshal(e)
			return rs
		}},
		{"revenue left in the old tier", topics.Revenue, "revenue: tier", func(rs []OutRecord) []OutRecord {
			rs[0].Value = mustMarshal(map[string]int64{"revenue_cents": 1})
			return rs
		}},
		{"revenue tier deleted", topics.Revenue, "revenue: tier", func(rs []OutRecord) []OutRecord {
			return append(rs, OutRecord{Key: rs[0].Key})
		}},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			_, _, out := enrichFixture(t)
			out[f.topic] = f.edit(out[f.topic])
			v := CheckEnrich(topics, exp, out)
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, f.want) }) {
				t.Errorf("fault %q not reported (want %q); got %v", f.name, f.want, v)
			}
		})
	}
}
