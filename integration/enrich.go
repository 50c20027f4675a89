package integration

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
)

// The enrich example's settings, restated for the oracle.
const (
	enrichWithin = 10 * 60_000 // a payment joins its order up to 10 minutes later
)

// EnrichTopics names the enrich example's topics.
type EnrichTopics struct {
	Orders, Customers, Payments, Enriched, Revenue, DLQ string
}

// DefaultEnrichTopics returns the names the example uses by default.
func DefaultEnrichTopics() EnrichTopics {
	return EnrichTopics{"orders", "customers", "payments", "orders-enriched", "revenue-by-tier", "enrich-dlq"}
}

func (t EnrichTopics) outputs() []string { return []string{t.Enriched, t.Revenue, t.DLQ} }

// The records of enrich, as the oracle sees them (not the application's
// types: an independent checker does not import the application).
type (
	enrichOrder struct {
		OrderID     string `json:"order_id"`
		CustomerID  string `json:"customer_id"`
		AmountCents int64  `json:"amount_cents"`
		TS          int64  `json:"ts"`
	}
	enrichCustomer struct {
		Name string `json:"name"`
		Tier string `json:"tier"`
	}
	enrichPayment struct {
		OrderID     string `json:"order_id"`
		AmountCents int64  `json:"amount_cents"`
		TS          int64  `json:"ts"`
	}
	enrichOut struct {
		enrichOrder
		CustomerName string         `json:"customer_name"`
		CustomerTier string         `json:"customer_tier"`
		Status       string         `json:"status"`
		Payment      *enrichPayment `json:"payment,omitempty"`
	}
)

// EnrichInput is a generated run of enrich: the customers before the
// orders, the orders and payments (each in time order, keyed by order id),
// one far-future order and payment per partition so every window closes,
// and the customer changes made after all orders were processed.
type EnrichInput struct {
	Customers, Orders, Payments, Changes []GenRecord // Partition -1: by key
	partitions                           int32
}

// GenerateEnrich makes n orders of 50 customers; three in four get a
// payment 1 to 8 minutes later.
func GenerateEnrich(seed int64, n int, partitions int32) EnrichInput {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xe1c4))
	tiers := []string{"gold", "silver", "bronze"}
	in := EnrichInput{partitions: partitions}
	const customers = 50
	for i := range customers {
		c := enrichCustomer{Name: "name-" + strconv.Itoa(i), Tier: tiers[rng.IntN(len(tiers))]}
		in.Customers = append(in.Customers, GenRecord{Partition: -1, Key: []byte("c" + strconv.Itoa(i)), Value: mustMarshal(c)})
	}
	now := int64(baseTS)
	var pays []enrichPayment
	for i := range n {
		now += int64(rng.IntN(3_000))
		o := enrichOrder{OrderID: "o" + strconv.Itoa(i), CustomerID: "c" + strconv.Itoa(rng.IntN(customers)), AmountCents: int64(100 + rng.IntN(900)), TS: now}
		in.Orders = append(in.Orders, GenRecord{Partition: -1, Key: []byte(o.OrderID), Value: mustMarshal(o)})
		if rng.IntN(4) > 0 {
			pays = append(pays, enrichPayment{OrderID: o.OrderID, AmountCents: o.AmountCents, TS: now + 60_000 + int64(rng.IntN(7*60_000))})
		}
	}
	slices.SortStableFunc(pays, func(a, b enrichPayment) int { return cmp.Compare(a.TS, b.TS) })
	for _, p := range pays {
		in.Payments = append(in.Payments, GenRecord{Partition: -1, Key: []byte(p.OrderID), Value: mustMarshal(p)})
	}
	end := now + 3*enrichWithin
	for p := range partitions {
		id := "end-" + strconv.Itoa(int(p))
		in.Orders = append(in.Orders, GenRecord{Partition: p, Key: []byte(id), Value: mustMarshal(enrichOrder{OrderID: id, CustomerID: "nobody", TS: end})})
		in.Payments = append(in.Payments, GenRecord{Partition: p, Key: []byte(id), Value: mustMarshal(enrichPayment{OrderID: id, TS: end})})
	}
	// After the orders: half the customers change tier, a few leave.
	for i := range customers {
		id := []byte("c" + strconv.Itoa(i))
		switch rng.IntN(10) {
		case 0:
			in.Changes = append(in.Changes, GenRecord{Partition: -1, Key: id})
		case 1, 2, 3, 4:
			c := enrichCustomer{Name: "name-" + strconv.Itoa(i), Tier: tiers[rng.IntN(len(tiers))]}
			in.Changes = append(in.Changes, GenRecord{Partition: -1, Key: id, Value: mustMarshal(c)})
		}
	}
	return in
}

// EnrichExpectation is what the oracle computes from a generated input.
type EnrichExpectation struct {
	Orders  map[string]string // order id → its enriched JSON
	Revenue map[string]int64  // tier → paid revenue, non-zero tiers only
}

// ExpectEnrich computes enrich's outputs from its input: every order with
// the customer as it was before the changes and its payment if it had one;
// the paid revenue of the remaining customers summed by their final tier.
func ExpectEnrich(in EnrichInput) EnrichExpectation {
	initial := map[string]enrichCustomer{}
	for _, c := range in.Customers {
		var ec enrichCustomer
		_ = json.Unmarshal(c.Value, &ec)
		initial[string(c.Key)] = ec
	}
	final := maps.Clone(initial)
	for _, c := range in.Changes {
		if c.Value == nil {
			delete(final, string(c.Key))
			continue
		}
		var ec enrichCustomer
		_ = json.Unmarshal(c.Value, &ec)
		final[string(c.Key)] = ec
	}
	payments := map[string]enrichPayment{}
	for _, p := range in.Payments {
		var ep enrichPayment
		_ = json.Unmarshal(p.Value, &ep)
		payments[ep.OrderID] = ep
	}
	exp := EnrichExpectation{Orders: map[string]string{}, Revenue: map[string]int64{}}
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
		exp.Orders[eo.OrderID] = string(mustMarshal(e))
	}
	for id, c := range final {
		if paidBy[id] != 0 {
			exp.Revenue[c.Tier] += paidBy[id]
		}
	}
	return exp
}

// CheckEnrich compares enrich's committed outputs with the expectation:
// every order exactly once, as expected; the revenue table's final rows
// (zero rows aside) equal the expected ones.
func CheckEnrich(topics EnrichTopics, exp EnrichExpectation, out Outputs) []string {
	var v []string
	violate := func(format string, args ...any) {
		if len(v) < 50 {
			v = append(v, fmt.Sprintf(format, args...))
		}
	}
	want, wantRev := exp.Orders, exp.Revenue
	seen := map[string]int{}
	for _, r := range out[topics.Enriched] {
		id := string(r.Key)
		seen[id]++
		w, ok := want[id]
		switch {
		case !ok:
			violate("enriched: unknown order %s", id)
		case seen[id] > 1:
			violate("enriched: order %s emitted %d times", id, seen[id])
		default:
			var got enrichOut
			if err := json.Unmarshal(r.Value, &got); err != nil || string(mustMarshal(got)) != w {
				violate("enriched: order %s is %s, want %s", id, clip(r.Value), clipString(w))
			}
		}
	}
	for _, id := range sortedKeys(want) {
		if seen[id] == 0 {
			violate("enriched: order %s never emitted", id)
		}
	}
	gotRev := map[string]int64{}
	for _, r := range out[topics.Revenue] {
		var tr struct {
			RevenueCents int64 `json:"revenue_cents"`
		}
		if r.Value == nil {
			delete(gotRev, string(r.Key))
			continue
		}
		if err := json.Unmarshal(r.Value, &tr); err != nil {
			violate("revenue: malformed %q", r.Value)
			continue
		}
		gotRev[string(r.Key)] = tr.RevenueCents
	}
	for tier, n := range gotRev {
		if n == 0 {
			delete(gotRev, tier)
		}
	}
	for _, tier := range sortedKeys(wantRev) {
		if gotRev[tier] != wantRev[tier] {
			violate("revenue: tier %s has %d, want %d", tier, gotRev[tier], wantRev[tier])
		}
	}
	for _, tier := range sortedKeys(gotRev) {
		if _, ok := wantRev[tier]; !ok {
			violate("revenue: tier %s has %d, want none", tier, gotRev[tier])
		}
	}
	return v
}
