package examples

import (
	"time"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

func init() {
	params := []Param{
		{"orders", "orders", "input: JSON orders keyed by order_id"},
		{"customers", "customers", "input: the customers table, keyed by customer_id (null deletes)"},
		{"payments", "payments", "input: JSON payments keyed by order_id"},
		{"enriched", "orders-enriched", "output: each order once, with its customer and payment (or unpaid)"},
		{"revenue", "revenue-by-tier", "output table: paid revenue per tier"},
		{"dlq", "enrich-dlq", "dead-letter topic for records that cannot be read"},
	}
	// enrich-memory keeps the order–payment join's records in memory.
	for _, v := range []struct {
		name, summary string
		joinStores    []topology.StoreOption
	}{
		{"enrich", "orders enriched with their customer and payment; paid revenue by the customers' current tier", nil},
		{"enrich-memory", "enrich with the order-payment join's window in memory (topology.InMemory), restored from its changelogs", []topology.StoreOption{topology.InMemory()}},
	} {
		register(Example{
			Name:    v.name,
			Summary: v.summary,
			Params:  params,
			Inputs:  []string{"orders", "customers", "payments"},
			Build: func(p map[string]string) *topology.Topology {
				return Enrich(p["orders"], p["customers"], p["payments"], p["enriched"], p["revenue"], p["dlq"], v.joinStores...)
			},
			Options: func(p map[string]string) []processor.Opt {
				return []processor.Opt{processor.DeadLetterTopic(p["dlq"])}
			},
		})
	}
}

// The event-time settings of enrich.
const (
	EnrichBound         = 10 * time.Second // bounded out-of-orderness of orders and payments
	EnrichPaymentWithin = 10 * time.Minute // a payment joins an order up to this long after it
	EnrichGrace         = time.Minute      // how late (past the watermark) an order or payment may arrive
)

// Order is an input record of enrich.
type Order struct {
	OrderID     string `json:"order_id"`
	CustomerID  string `json:"customer_id"`
	AmountCents int64  `json:"amount_cents"`
	TS          int64  `json:"ts"`
}

// Customer is a row of the customers table.
type Customer struct {
	Name string `json:"name"`
	Tier string `json:"tier"`
}

// Payment is an input record of enrich.
type Payment struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	TS          int64  `json:"ts"`
}

// EnrichedOrder is an output record of enrich: the order, its customer as
// the customers table had it when the order was processed (empty if
// unknown), and its payment if one arrived within 10 minutes.
type EnrichedOrder struct {
	Order
	CustomerName string   `json:"customer_name"`
	CustomerTier string   `json:"customer_tier"`
	Status       string   `json:"status"` // "paid" or "unpaid"
	Payment      *Payment `json:"payment,omitempty"`
}

// TierRevenue is a row of revenue-by-tier.
type TierRevenue struct {
	RevenueCents int64 `json:"revenue_cents"`
}

// Enrich joins orders with their customer (a global table, so orders need
// no re-keying) and with their payment within 10 minutes (a left
// stream-stream join: an order without one is emitted once, unpaid, when
// its window closes), and keeps the paid revenue of each customer summed
// by the customer's current tier: a table-table join of revenue per
// customer with the customers table, re-grouped by tier, so when a customer
// changes tier their whole revenue moves, and when one is deleted it
// leaves.
//
// joinStores are options of the order–payment join's stores
// (StreamJoined.Stores).
func Enrich(orders, customers, payments, enriched, revenue, dlq string, joinStores ...topology.StoreOption) *topology.Topology {
	t := topology.New()
	bound := topology.Watermarks(window.BoundedOutOfOrderness(EnrichBound))
	orderStream := topology.From(t, orders, serde.String, serde.JSON[Order](), topology.DeadLetter(dlq), bound,
		topology.TimestampFrom(func(_ string, o Order, _ int64) int64 { return o.TS }))
	paymentStream := topology.From(t, payments, serde.String, serde.JSON[Payment](), topology.DeadLetter(dlq), bound,
		topology.TimestampFrom(func(_ string, p Payment, _ int64) int64 { return p.TS }))
	customerRows := topology.GlobalTableFrom(t, customers, topology.Materialized("customers-global", serde.String, serde.JSON[Customer]()))

	withCustomer := topology.LeftJoinGlobal(orderStream, customerRows,
		func(_ string, o Order) string { return o.CustomerID },
		func(_ string, o Order, c Customer, _ bool) EnrichedOrder {
			return EnrichedOrder{Order: o, CustomerName: c.Name, CustomerTier: c.Tier, Status: "unpaid"}
		})
	withPayment := topology.LeftJoinStreams(withCustomer, paymentStream,
		topology.JoinWindowsBetween(0, EnrichPaymentWithin).WithGrace(EnrichGrace),
		func(_ string, e EnrichedOrder, p Payment, paid bool) EnrichedOrder {
			if paid {
				e.Status, e.Payment = "paid", &p
			}
			return e
		},
		topology.StreamJoined[string, EnrichedOrder, Payment]{Name: "order-payments", Key: serde.String, Left: serde.JSON[EnrichedOrder](), Right: serde.JSON[Payment](),
			Stores: joinStores})
	topology.To(withPayment, enriched, serde.String, serde.JSON[EnrichedOrder]())

	// Paid revenue per customer, then by the customer's current tier.
	paid := topology.Filter(withPayment, func(_ string, e EnrichedOrder) bool { return e.Payment != nil })
	perCustomer := topology.Aggregate(
		topology.GroupBy(paid, func(_ string, e EnrichedOrder) string { return e.CustomerID },
			topology.Grouped("paid-by-customer", serde.String, serde.JSON[EnrichedOrder]())),
		func() int64 { return 0 },
		func(_ string, e EnrichedOrder, sum int64) int64 { return sum + e.Payment.AmountCents },
		topology.Materialized("revenue-per-customer", serde.String, serde.Int64))
	customerTable := topology.TableFrom(t, customers, topology.Materialized("customers", serde.String, serde.JSON[Customer]()))
	type tierCents struct {
		tier  string
		cents int64
	}
	withTier := topology.JoinTables(perCustomer, customerTable, func(_ string, cents int64, c Customer) tierCents {
		return tierCents{c.Tier, cents}
	})
	byTier := topology.ReduceTable(
		topology.GroupTableBy(withTier, func(_ string, tc tierCents) (string, int64) { return tc.tier, tc.cents },
			topology.Grouped("revenue-by-tier", serde.String, serde.Int64)),
		func(a, b int64) int64 { return a + b },
		func(a, b int64) int64 { return a - b },
		topology.Materialized("revenue-by-tier", serde.String, serde.Int64))
	topology.To(topology.MapValues(topology.ToStream(byTier), func(c int64) TierRevenue { return TierRevenue{RevenueCents: c} }),
		revenue, serde.String, serde.JSON[TierRevenue]())
	return t
}
