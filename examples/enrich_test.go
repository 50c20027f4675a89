package examples_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topologytest"
)

// TestEnrichMatchesOracle runs enrich in the test driver over random
// interleavings of customer updates (tier changes, deletes), orders and
// payments, and compares both outputs with a brute-force model: each order
// once, with the customer as it stood when the order was processed and its
// payment if one came within 10 minutes; revenue by the customers' current
// tiers.
func TestEnrichMatchesOracle(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testEnrich(t, seed) })
	}
}

func testEnrich(t *testing.T, seed uint64) {
	d, err := topologytest.New(examples.Enrich("orders", "customers", "payments", "enriched", "revenue", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	orders := topologytest.NewInputTopic(d, "orders", serde.String, serde.JSON[examples.Order]())
	payments := topologytest.NewInputTopic(d, "payments", serde.String, serde.JSON[examples.Payment]())
	customers := topologytest.NewInputTopic(d, "customers", serde.String, serde.JSON[examples.Customer]())
	enriched := topologytest.NewOutputTopic(d, "enriched", serde.String, serde.JSON[examples.EnrichedOrder]())
	revenue := topologytest.NewOutputTopic(d, "revenue", serde.String, serde.JSON[examples.TierRevenue]())

	rng := rand.New(rand.NewPCG(seed, 99))
	tiers := []string{"gold", "silver", "bronze"}
	table := map[string]examples.Customer{}
	want := map[string]examples.EnrichedOrder{}
	paidBy := map[string]int64{}             // customer → paid cents
	pending := map[string]examples.Payment{} // payments to send later
	const minute = 60_000
	now := int64(1_000_000)
	sendDue := func() {
		// Payments arrive once their time has come, in time order.
		var due []examples.Payment
		for _, p := range pending {
			if p.TS <= now {
				due = append(due, p)
			}
		}
		slices.SortFunc(due, func(a, b examples.Payment) int { return cmp.Compare(a.TS, b.TS) })
		for _, p := range due {
			if err := payments.Pipe(p.OrderID, p, p.TS); err != nil {
				t.Fatal(err)
			}
			delete(pending, p.OrderID)
		}
	}
	for i := range 1500 {
		now += int64(rng.IntN(20_000))
		sendDue()
		switch r := rng.IntN(10); {
		case r < 2: // a customer changes (or appears)
			id := fmt.Sprintf("c%d", rng.IntN(12))
			c := examples.Customer{Name: "name-" + id, Tier: tiers[rng.IntN(len(tiers))]}
			if err := customers.Pipe(id, c, now); err != nil {
				t.Fatal(err)
			}
			table[id] = c
		case r < 3: // a customer is deleted
			id := fmt.Sprintf("c%d", rng.IntN(12))
			if err := customers.PipeBytes([]byte(id), nil, now); err != nil {
				t.Fatal(err)
			}
			delete(table, id)
		case r < 7: // an order; most get a payment within 1 to 8 minutes
			o := examples.Order{OrderID: fmt.Sprintf("o%d", i), CustomerID: fmt.Sprintf("c%d", rng.IntN(12)), AmountCents: int64(100 + rng.IntN(900)), TS: now}
			if err := orders.Pipe(o.OrderID, o, now); err != nil {
				t.Fatal(err)
			}
			c := table[o.CustomerID]
			e := examples.EnrichedOrder{Order: o, CustomerName: c.Name, CustomerTier: c.Tier, Status: "unpaid"}
			if rng.IntN(4) > 0 {
				p := examples.Payment{OrderID: o.OrderID, AmountCents: o.AmountCents, TS: now + int64(minute+rng.IntN(7*minute))}
				pending[o.OrderID] = p
				e.Status, e.Payment = "paid", &p
				paidBy[o.CustomerID] += p.AmountCents
			}
			want[o.OrderID] = e
		}
	}
	// Flush: the remaining payments, then far-future records on both
	// streams so that every order's window closes.
	now += 10 * minute
	sendDue()
	end := now + 60*minute
	if err := orders.Pipe("end", examples.Order{OrderID: "end", CustomerID: "nobody", TS: end}, end); err != nil {
		t.Fatal(err)
	}
	if err := payments.Pipe("end", examples.Payment{OrderID: "end", TS: end}, end); err != nil {
		t.Fatal(err)
	}

	rs, err := enriched.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]examples.EnrichedOrder{}
	for _, r := range rs {
		if _, dup := got[r.Key]; dup {
			t.Errorf("order %s emitted twice", r.Key)
		}
		got[r.Key] = r.Value
	}
	delete(got, "end")
	if len(got) != len(want) {
		t.Errorf("%d orders emitted, want %d", len(got), len(want))
	}
	paid := 0
	for id, w := range want {
		g, ok := got[id]
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		if !ok || string(gj) != string(wj) {
			t.Errorf("order %s: got %s, want %s", id, gj, wj)
		}
		if w.Status == "paid" {
			paid++
		}
	}
	if paid == 0 || paid == len(want) {
		t.Fatalf("%d of %d orders paid: the input does not exercise both", paid, len(want))
	}
	// The end order's own payment joined it; the sentinel has no customer.
	m, err := topologytest.ToMap(revenue)
	if err != nil {
		t.Fatal(err)
	}
	gotRev := map[string]int64{}
	for tier, r := range m {
		if r.RevenueCents != 0 {
			gotRev[tier] = r.RevenueCents
		}
	}
	wantRev := map[string]int64{}
	for id, c := range table {
		if paidBy[id] != 0 {
			wantRev[c.Tier] += paidBy[id]
		}
	}
	if !maps.Equal(gotRev, wantRev) {
		t.Errorf("revenue by tier %v, want %v", gotRev, wantRev)
	}
}
