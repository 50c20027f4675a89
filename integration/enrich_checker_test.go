package integration

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// enrichFixture writes the outputs a correct enrich run would produce for a
// generated input: the reference the negative controls break.
func enrichFixture(t *testing.T) (EnrichTopics, EnrichInput, PageViewOutputs) {
	t.Helper()
	topics := DefaultEnrichTopics()
	in := GenerateEnrich(3, 2_000, 4)
	initial := map[string]enrichCustomer{}
	for _, c := range in.Customers {
		var ec enrichCustomer
		_ = json.Unmarshal(c.Value, &ec)
		initial[string(c.Key)] = ec
	}
	final := map[string]enrichCustomer{}
	for k, c := range initial {
		final[k] = c
	}
	for _, c := range in.Changes {
		if c.Value == nil {
			delete(final, string(c.Key))
		} else {
			var ec enrichCustomer
			_ = json.Unmarshal(c.Value, &ec)
			final[string(c.Key)] = ec
		}
	}
	payments := map[string]enrichPayment{}
	for _, p := range in.Payments {
		var ep enrichPayment
		_ = json.Unmarshal(p.Value, &ep)
		payments[ep.OrderID] = ep
	}
	out := PageViewOutputs{}
	paidBy := map[string]int64{}
	for _, o := range in.Orders {
		var eo enrichOrder
		_ = json.Unmarshal(o.Value, &eo)
		c := initial[eo.CustomerID]
		e := enrichOut{enrichOrder: eo, CustomerName: c.Name, CustomerTier: c.Tier, Status: "unpaid"}
		if p, ok := payments[eo.OrderID]; ok {
			e.Status, e.Payment = "paid", &p
			paidBy[eo.CustomerID] += p.AmountCents
		}
		out[topics.Enriched] = append(out[topics.Enriched], OutRecord{Key: []byte(eo.OrderID), Value: mustMarshal(e)})
	}
	rev := map[string]int64{}
	for id, c := range final {
		rev[c.Tier] += paidBy[id]
	}
	for _, tier := range sortedKeys(rev) {
		out[topics.Revenue] = append(out[topics.Revenue], OutRecord{Key: []byte(tier), Value: mustMarshal(map[string]int64{"revenue_cents": rev[tier]})})
	}
	if len(in.Changes) == 0 || len(payments) == 0 {
		t.Fatal("fixture exercises no changes or no payments")
	}
	return topics, in, out
}

func TestCheckEnrichAcceptsCorrectOutput(t *testing.T) {
	topics, in, out := enrichFixture(t)
	if v := CheckEnrich(topics, in, out); len(v) > 0 {
		t.Fatalf("correct output rejected:\n%s", joinLines(v))
	}
}

func TestCheckEnrichNegativeControls(t *testing.T) {
	topics, in, _ := enrichFixture(t)
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
			v := CheckEnrich(topics, in, out)
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, f.want) }) {
				t.Errorf("fault %q not reported (want %q); got %v", f.name, f.want, v)
			}
		})
	}
}
