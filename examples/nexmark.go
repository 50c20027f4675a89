package examples

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-streams/sluice/examples/nexmark"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// The Nexmark benchmark's queries (nexmark-flink's queries/*.sql) written
// in sluice's DSL, one example each: nexmark-q0 ... nexmark-q20. They read
// the three topics `sluice gen nexmark` writes (examples/nexmark's doc
// has the records and why three topics) and write one output topic,
// nexmark-<query> by default. Keys are decimal ids; values are JSON.
//
// Where the SQL leaves an order open the examples choose, and the oracle
// (nexmark.Oracle) chooses the same: q18 keeps the later-arriving bid of
// two with the same time, q19 ranks the earlier of two equal prices
// first.

// NexmarkBound is the bounded out-of-orderness of the Nexmark inputs'
// event time (their dateTime). The generator's event times never go back
// within a topic, but a real source's may, and records crossing a
// repartition topic interleave.
const NexmarkBound = time.Second

// NexmarkTopics are the input topics of a Nexmark query and its output.
type NexmarkTopics struct {
	nexmark.Topics
	Output string
}

func init() {
	for _, q := range nexmarkQueries {
		register(Example{
			Name:    "nexmark-" + q.name,
			Summary: "Nexmark " + q.name + ": " + q.summary,
			Params: []Param{
				{"person", nexmark.PersonTopic, "input: Nexmark persons, JSON keyed by id"},
				{"auction", nexmark.AuctionTopic, "input: Nexmark auctions, JSON keyed by id"},
				{"bid", nexmark.BidTopic, "input: Nexmark bids, JSON keyed by auction id"},
				{"output", "nexmark-" + q.name, "output topic"},
			},
			Inputs: q.inputs,
			Build: func(p map[string]string) *topology.Topology {
				return q.build(NexmarkTopics{Topics: nexmark.Topics{Person: p["person"], Auction: p["auction"], Bid: p["bid"]}, Output: p["output"]})
			},
		})
	}
}

type nexmarkQuery struct {
	name, summary string
	inputs        []string
	build         func(NexmarkTopics) *topology.Topology
}

// NexmarkQuery returns the topology of query q ("q0", "q1", ...).
func NexmarkQuery(q string, topics NexmarkTopics) (*topology.Topology, bool) {
	for _, nq := range nexmarkQueries {
		if nq.name == q {
			return nq.build(topics), true
		}
	}
	return nil, false
}

var nexmarkQueries = []nexmarkQuery{
	{"q0", "pass-through of every bid", []string{"bid"}, NexmarkQ0},
	{"q1", "bids with their price in euros", []string{"bid"}, NexmarkQ1},
	{"q2", "bids on auctions whose id is a multiple of 123", []string{"bid"}, NexmarkQ2},
	{"q3", "sellers in OR, ID or CA and their auctions in category 10 (incremental join)", []string{"person", "auction"}, NexmarkQ3},
	{"q4", "average winning bid per category", []string{"auction", "bid"}, NexmarkQ4},
	{"q7", "the highest bids of every 10 s window", []string{"bid"}, NexmarkQ7},
	{"q8", "persons who opened an auction in the 10 s window they registered in", []string{"person", "auction"}, NexmarkQ8},
	{"q18", "the latest bid per bidder and auction", []string{"bid"}, NexmarkQ18},
	{"q19", "the top 10 bids per auction", []string{"bid"}, NexmarkQ19},
	{"q20", "bids joined with their auction, category 10 only", []string{"auction", "bid"}, NexmarkQ20},
	{"q5", "the auctions with the most bids per 10 s window sliding by 2 s", []string{"bid"}, NexmarkQ5},
	{"q11", "bid sessions per bidder (10 s inactivity gap)", []string{"bid"}, NexmarkQ11},
}

// nexmarkTime is the source options of a Nexmark input: event time from
// dateTime, watermarks NexmarkBound behind it.
func nexmarkTime[V any](dateTime func(V) int64) []topology.SourceOption {
	return []topology.SourceOption{
		topology.TimestampFrom(func(_ string, v V, _ int64) int64 { return dateTime(v) }),
		topology.Watermarks(window.BoundedOutOfOrderness(NexmarkBound)),
	}
}

func nexmarkBids(t *topology.Topology, topic string) topology.Stream[string, nexmark.Bid] {
	return topology.From(t, topic, serde.String, serde.JSON[nexmark.Bid](), nexmarkTime(func(b nexmark.Bid) int64 { return b.DateTime })...)
}

func nexmarkAuctions(t *topology.Topology, topic string) topology.Stream[string, nexmark.Auction] {
	return topology.From(t, topic, serde.String, serde.JSON[nexmark.Auction](), nexmarkTime(func(a nexmark.Auction) int64 { return a.DateTime })...)
}

func nexmarkPersons(t *topology.Topology, topic string) topology.Stream[string, nexmark.Person] {
	return topology.From(t, topic, serde.String, serde.JSON[nexmark.Person](), nexmarkTime(func(p nexmark.Person) int64 { return p.DateTime })...)
}

// NexmarkQ0 passes every bid through (the columns q0 selects).
func NexmarkQ0(tp NexmarkTopics) *topology.Topology {
	t := topology.New()
	topology.To(topology.MapValues(nexmarkBids(t, tp.Bid), nexmark.Q0), tp.Output, serde.String, serde.JSON[nexmark.Q0Row]())
	return t
}

// NexmarkQ1 converts every bid's price to euros (exactly, to 3 decimals).
func NexmarkQ1(tp NexmarkTopics) *topology.Topology {
	t := topology.New()
	topology.To(topology.MapValues(nexmarkBids(t, tp.Bid), nexmark.Q1), tp.Output, serde.String, serde.JSON[nexmark.Q1Row]())
	return t
}

// NexmarkQ2 selects the bids on auctions whose id is a multiple of 123.
func NexmarkQ2(tp NexmarkTopics) *topology.Topology { return NexmarkQ2Modulus(tp, nexmark.Q2Modulus) }

// NexmarkQ2Modulus is q2 with another modulus (a wrong q2, for the
// checker's negative control).
func NexmarkQ2Modulus(tp NexmarkTopics, modulus int64) *topology.Topology {
	t := topology.New()
	sel := topology.Filter(nexmarkBids(t, tp.Bid), func(_ string, b nexmark.Bid) bool { return b.Auction%modulus == 0 })
	topology.To(topology.MapValues(sel, func(b nexmark.Bid) nexmark.Q2Row { return nexmark.Q2Row{Auction: b.Auction, Price: b.Price} }),
		tp.Output, serde.String, serde.JSON[nexmark.Q2Row]())
	return t
}

// NexmarkQ3 joins the auctions of category 10 with their seller, if the
// seller lives in OR, ID or CA: an incremental join of two tables on a
// foreign key, so an auction whose seller registers later (the generator
// makes some) joins when the seller arrives. The output is a table keyed
// by auction id.
func NexmarkQ3(tp NexmarkTopics) *topology.Topology {
	t := topology.New()
	// The filters run on the streams, before the tables are made, so
	// the tables (which a foreign-key join needs materialized) hold only
	// the rows that can join. Each id comes once, so the latest value is
	// the only one.
	latest := func(_, v nexmark.Person) nexmark.Person { return v }
	persons := topology.Reduce(topology.GroupByKey(topology.Filter(nexmarkPersons(t, tp.Person),
		func(_ string, p nexmark.Person) bool { return nexmark.Q3Seller(p) })),
		latest, topology.Materialized("q3-sellers", serde.String, serde.JSON[nexmark.Person]()))
	auctions := topology.Reduce(topology.GroupByKey(topology.Filter(nexmarkAuctions(t, tp.Auction),
		func(_ string, a nexmark.Auction) bool { return a.Category == nexmark.Q3Category })),
		func(_, v nexmark.Auction) nexmark.Auction { return v },
		topology.Materialized("q3-auctions", serde.String, serde.JSON[nexmark.Auction]()))
	joined := topology.JoinTablesByForeignKey(auctions, persons,
		func(a nexmark.Auction) string { return nexmark.ID(a.Seller) },
		func(a nexmark.Auction, p nexmark.Person) nexmark.Q3Row {
			return nexmark.Q3Row{Name: p.Name, City: p.City, State: p.State, ID: a.ID}
		},
		topology.ForeignKeyJoined[nexmark.Q3Row]{Name: "q3-auction-seller", Result: serde.JSON[nexmark.Q3Row]()})
	topology.To(topology.ToStream(joined), tp.Output, serde.String, serde.JSON[nexmark.Q3Row]())
	return t
}

// auctionOrBid is an auction or a bid, so both can share one stream.
type auctionOrBid struct {
	Auction *nexmark.Auction `json:"auction,omitempty"`
	Bid     *nexmark.Bid     `json:"bid,omitempty"`
}

// AuctionBid is a bid with its auction.
type AuctionBid struct {
	Auction nexmark.Auction `json:"auction"`
	Bid     nexmark.Bid     `json:"bid"`
}

// bidsWithAuctions joins each bid with its auction, whichever comes
// first: the regular (unwindowed) inner join of Flink SQL, which sluice's
// DSL has only for tables and windows, so it is written with the
// Processor API. Bids are keyed by their auction and auctions by their id,
// so with equal partition counts both arrive at the same task and the
// join needs no repartition. An auction is kept for good (a bid may come
// at any time); a bid that comes before its auction waits in a list state
// until the auction does.
func bidsWithAuctions(t *topology.Topology, tp NexmarkTopics, name string) topology.Stream[string, AuctionBid] {
	auctions := topology.MapValues(nexmarkAuctions(t, tp.Auction), func(a nexmark.Auction) auctionOrBid { return auctionOrBid{Auction: &a} })
	bids := topology.MapValues(nexmarkBids(t, tp.Bid), func(b nexmark.Bid) auctionOrBid { return auctionOrBid{Bid: &b} })
	known := topology.ValueState(name+"-auctions", serde.String, serde.JSON[nexmark.Auction]())
	waiting := topology.ListState(name+"-waiting-bids", serde.String, serde.JSON[nexmark.Bid]())
	return topology.Process(topology.Merge(auctions, bids), name, func() topology.Processor[string, auctionOrBid, string, AuctionBid] {
		return &auctionBidJoin{known: known, waiting: waiting}
	}, known, waiting)
}

type auctionBidJoin struct {
	known      topology.ValueSpec[string, nexmark.Auction]
	waiting    topology.ListSpec[string, nexmark.Bid]
	ctx        *topology.ProcessorContext[string, AuctionBid]
	auctions   *topology.KeyedValue[string, nexmark.Auction]
	waitingFor *topology.KeyedList[string, nexmark.Bid]
}

func (j *auctionBidJoin) Init(ctx *topology.ProcessorContext[string, AuctionBid]) error {
	j.ctx, j.auctions, j.waitingFor = ctx, j.known.Open(ctx), j.waiting.Open(ctx)
	return nil
}

func (j *auctionBidJoin) Process(r topology.Record[string, auctionOrBid]) error {
	emit := func(a nexmark.Auction, b nexmark.Bid) error {
		ts := max(a.DateTime, b.DateTime)
		return j.ctx.Forward(topology.Record[string, AuctionBid]{Key: r.Key, Value: AuctionBid{Auction: a, Bid: b}, Timestamp: ts})
	}
	// The join is local only if the inputs are keyed as documented; a
	// record keyed otherwise would wait for a partner in the wrong task
	// for ever, so it stops the instance instead (invariant 6).
	if err := checkNexmarkKey(r.Key, r.Value); err != nil {
		return err
	}
	if a := r.Value.Auction; a != nil {
		if err := j.auctions.Set(r.Key, *a); err != nil {
			return err
		}
		bids, err := j.waitingFor.Get(r.Key)
		if err != nil {
			return err
		}
		for _, b := range bids {
			if err := emit(*a, b); err != nil {
				return err
			}
		}
		if len(bids) > 0 {
			return j.waitingFor.Clear(r.Key)
		}
		return nil
	}
	if r.Value.Bid == nil {
		return nil
	}
	a, ok, err := j.auctions.Get(r.Key)
	if err != nil {
		return err
	}
	if !ok {
		return j.waitingFor.Add(r.Key, *r.Value.Bid)
	}
	return emit(a, *r.Value.Bid)
}

func (j *auctionBidJoin) Close() error { return nil }

// ErrNexmarkKey is returned for an auction not keyed by its id or a bid not
// keyed by its auction: the joins of q4 and q20 rely on that keying.
var ErrNexmarkKey = errors.New("examples: nexmark record keyed against the topics' contract")

func checkNexmarkKey(key string, v auctionOrBid) error {
	var id int64
	var what string
	switch {
	case v.Auction != nil:
		id, what = v.Auction.ID, "auction"
	case v.Bid != nil:
		id, what = v.Bid.Auction, "bid for auction"
	default:
		return nil
	}
	var buf [20]byte
	if string(strconv.AppendInt(buf[:0], id, 10)) != key {
		return fmt.Errorf("%w: %s %d keyed %q (want the auction id, as sluice gen nexmark writes)", ErrNexmarkKey, what, id, key)
	}
	return nil
}

// q4Max is q4's highest in-time bid of one auction.
type q4Max struct {
	Category int64 `json:"category"`
	Final    int64 `json:"final"`
}

// q4Sum is q4's running sum and count of one category's winning bids.
type q4Sum struct {
	Sum   int64 `json:"sum"`
	Count int64 `json:"count"`
}

// NexmarkQ4 averages, per category, the highest bid of each auction made
// between its start and its expiry: the bids joined with their auctions
// (bidsWithAuctions), the maximum per auction as a table, and that table
// re-grouped by category, whose sum and count follow each auction's
// maximum as it rises (the old value subtracted, the new one added).
func NexmarkQ4(tp NexmarkTopics) *topology.Topology {
	t := topology.New()
	joined := topology.Filter(bidsWithAuctions(t, tp, "q4-join"), func(_ string, ab AuctionBid) bool {
		return nexmark.Q4InTime(ab.Auction, ab.Bid)
	})
	prices := topology.MapValues(joined, func(ab AuctionBid) q4Max { return q4Max{Category: ab.Auction.Category, Final: ab.Bid.Price} })
	maxPerAuction := topology.Reduce(
		topology.GroupByKey(prices, topology.Grouped("q4-by-auction", serde.String, serde.JSON[q4Max]())),
		func(old, b q4Max) q4Max {
			if b.Final > old.Final {
				return b
			}
			return old
		},
		topology.Materialized("q4-max-per-auction", serde.String, serde.JSON[q4Max]()))
	perCategory := topology.AggregateTable(
		topology.GroupTableBy(maxPerAuction, func(_ string, m q4Max) (string, int64) { return nexmark.ID(m.Category), m.Final },
			topology.Grouped("q4-by-category", serde.String, serde.Int64)),
		func() q4Sum { return q4Sum{} },
		func(_ string, f int64, s q4Sum) q4Sum { return q4Sum{s.Sum + f, s.Count + 1} },
		func(_ string, f int64, s q4Sum) q4Sum { return q4Sum{s.Sum - f, s.Count - 1} },
		topology.Materialized("q4-per-category", serde.String, serde.JSON[q4Sum]()))
	avg := topology.Map(topology.ToStream(perCategory), func(cat string, s q4Sum) (string, nexmark.Q4Row) {
		id, _ := strconv.ParseInt(cat, 10, 64)
		if s.Count == 0 {
			return cat, nexmark.Q4Row{ID: id}
		}
		return cat, nexmark.Q4Row{ID: id, Final: s.Sum / s.Count}
	})
	topology.To(avg, tp.Output, serde.String, serde.JSON[nexmark.Q4Row]())
	return t
}

// q7Bid is a bid in q7's windows; Edge marks the copy of a bid made at
// exactly a window's end, which belongs to that window as well as to the
// next (SQL's BETWEEN includes both ends) but does not count for its
// maximum (the window's aggregate is over [start, end)).
type q7Bid struct {
	Bid  nexmark.Bid `json:"bid"`
	Edge bool        `json:"edge,omitempty"`
}

// NexmarkQ7 finds, per 10 s tumbling window, the bids with the window's
// highest price. All bids go to one key (the query is a global maximum,
// as in Flink, where it runs with parallelism one for that step); a bid
// exactly at a window's end is also offered to the window before, with a
// timestamp 1 ms earlier, by a small processor (the DSL cannot change a
// record's time).
func NexmarkQ7(tp NexmarkTopics) *topology.Topology {
	t := topology.New()
	withEdges := topology.Process(nexmarkBids(t, tp.Bid), "q7-window-edges", func() topology.Processor[string, nexmark.Bid, string, q7Bid] {
		return &q7Edges{}
	})
	all := topology.GroupBy(withEdges, func(string, q7Bid) string { return "all" },
		topology.Grouped("q7-all", serde.String, serde.JSON[q7Bid]()))
	windows := topology.WindowedBy(all, window.Tumbling(nexmark.Q7WindowMs*time.Millisecond), topology.EmitFinal())
	highest := topology.ProcessWindows(windows, func(_ string, w window.Bounds, elems []topology.Element[q7Bid]) []nexmark.Q7Row {
		var top int64
		found := false
		for _, e := range elems {
			if !e.Value.Edge && (!found || e.Value.Bid.Price > top) {
				top, found = e.Value.Bid.Price, true
			}
		}
		var out []nexmark.Q7Row
		for _, e := range elems {
			if b := e.Value.Bid; found && b.Price == top {
				out = append(out, nexmark.Q7Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra})
			}
		}
		return out
	}, topology.Materialized("q7-window-bids", serde.String, serde.JSON[q7Bid]()))
	topology.To(topology.Map(highest, func(w topology.Windowed[string], r nexmark.Q7Row) (string, nexmark.Q7Row) {
		return nexmark.ID(w.Window.End), r
	}), tp.Output, serde.String, serde.JSON[nexmark.Q7Row]())
	return t
}

type q7Edges struct {
	ctx *topology.ProcessorContext[string, q7Bid]
}

func (p *q7Edges) Init(ctx *topology.ProcessorContext[string, q7Bid]) error { p.ctx = ctx; return nil }
func (p *q7Edges) Close() error                                             { return nil }

func (p *q7Edges) Process(r topology.Record[string, nexmark.Bid]) error {
	if err := p.ctx.Forward(topology.Record[string, q7Bid]{Key: r.Key, Value: q7Bid{Bid: r.Value}, Timestamp: r.Timestamp}); err != nil {
		return err
	}
	if r.Value.DateTime%nexmark.Q7WindowMs != 0 {
		return nil
	}
	return p.ctx.Forward(topology.Record[string, q7Bid]{Key: r.Key, Value: q7Bid{Bid: r.Value, Edge: true}, Timestamp: r.Timestamp - 1})
}

// q8Seen is what q8's window of one person id saw: the person (their
// name) and whether they opened an auction.
type q8Seen struct {
	Name    string `json:"name,omitempty"`
	Person  bool   `json:"person,omitempty"`
	Auction bool   `json:"auction,omitempty"`
}

// NexmarkQ8 finds the persons who opened an auction in the 10 s tumbling
// window in which they registered: persons (keyed by id) and auctions
// re-keyed by seller, merged and windowed per person id.
func NexmarkQ8(tp NexmarkTopics) *topology.Topology {
	t := topology.New()
	persons := topology.MapValues(nexmarkPersons(t, tp.Person), func(p nexmark.Person) q8Seen { return q8Seen{Name: p.Name, Person: true} })
	sellers := topology.Map(nexmarkAuctions(t, tp.Auction), func(_ string, a nexmark.Auction) (string, q8Seen) {
		return nexmark.ID(a.Seller), q8Seen{Auction: true}
	})
	windows := topology.WindowedBy(
		topology.GroupByKey(topology.Merge(persons, sellers), topology.Grouped("q8-by-person", serde.String, serde.JSON[q8Seen]())),
		window.Tumbling(nexmark.Q8WindowMs*time.Millisecond), topology.EmitFinal())
	seen := topology.AggregateWindows(windows, func() q8Seen { return q8Seen{} }, func(_ string, v, acc q8Seen) q8Seen {
		if v.Person {
			acc.Person, acc.Name = true, v.Name
		}
		acc.Auction = acc.Auction || v.Auction
		return acc
	}, topology.Materialized("q8-windows", serde.String, serde.JSON[q8Seen]()))
	both := topology.Filter(topology.ToStream(seen), func(_ topology.Windowed[string], s q8Seen) bool { return s.Person && s.Auction })
	topology.To(topology.Map(both, func(w topology.Windowed[string], s q8Seen) (string, nexmark.Q8Row) {
		id, _ := strconv.ParseInt(w.Key, 10, 64)
		return w.Key, nexmark.Q8Row{ID: id, Name: s.Name, Stime: w.Window.Start}
	}), tp.Output, serde.String, serde.JSON[nexmark.Q8Row]())
	return t
}

// NexmarkQ18 keeps the latest bid (by dateTime; of equal times, the one
// that came later) per bidder and auction: a table keyed bidder/auction.
func NexmarkQ18(tp NexmarkTopics) *topology.Topology {
	t := topology.New()
	latest := topology.Reduce(
		topology.GroupBy(nexmarkBids(t, tp.Bid), func(_ string, b nexmark.Bid) string { return nexmark.Q18Key(b) },
			topology.Grouped("q18-by-bidder-auction", serde.String, serde.JSON[nexmark.Bid]())),
		func(old, b nexmark.Bid) nexmark.Bid {
			if b.DateTime >= old.DateTime {
				return b
			}
			return old
		},
		topology.Materialized("q18-latest", serde.String, serde.JSON[nexmark.Bid]()))
	topology.To(topology.ToStream(latest), tp.Output, serde.String, serde.JSON[nexmark.Bid]())
	return t
}

// NexmarkQ19 keeps the 10 highest bids of each auction, ranked: a table
// keyed by auction whose value is the ranked list. Bids are keyed by
// auction already, so there is no repartition.
//
// A top-N written with the Processor API, as Kafka Streams users write
// one: a bid that does not enter its auction's top changes neither the
// state nor the table, so it writes and emits nothing (Flink's rank
// operator emits only changed ranks too), and the lists are kept in a
// binary serde only the job reads (nexmark.BidsBinary), not JSON.
func NexmarkQ19(tp NexmarkTopics) *topology.Topology {
	t := topology.New()
	tops := topology.Materialized("q19-top", serde.String, nexmark.BidsBinary)
	ranked := topology.Process(nexmarkBids(t, tp.Bid), "q19-rank", func() topology.Processor[string, nexmark.Bid, string, []nexmark.Q19Row] {
		return &q19Rank{tops: tops}
	}, tops)
	topology.To(ranked, tp.Output, serde.String, serde.JSON[[]nexmark.Q19Row]())
	return t
}

// q19Rank keeps each auction's top bids and forwards the ranked list
// whenever it changes.
type q19Rank struct {
	tops topology.Materialization[string, []nexmark.Bid]
	kv   *topology.KV[string, []nexmark.Bid]
	ctx  *topology.ProcessorContext[string, []nexmark.Q19Row]
}

func (q *q19Rank) Init(ctx *topology.ProcessorContext[string, []nexmark.Q19Row]) error {
	q.ctx, q.kv = ctx, q.tops.Open(ctx)
	return nil
}

func (q *q19Rank) Process(r topology.Record[string, nexmark.Bid]) error {
	top, _, err := q.kv.Get(r.Key)
	if err != nil || nexmark.Q19Rank(top, r.Value) >= nexmark.Q19TopN {
		return err
	}
	top = nexmark.Q19Insert(top, r.Value)
	if err := q.kv.Put(r.Key, top); err != nil {
		return err
	}
	return q.ctx.Forward(topology.Record[string, []nexmark.Q19Row]{Key: r.Key, Value: nexmark.Q19Rows(top), Timestamp: r.Timestamp})
}

func (q *q19Rank) Close() error { return nil }

// NexmarkQ20 joins each bid with its auction (bidsWithAuctions) and keeps
// the auctions of category 10.
func NexmarkQ20(tp NexmarkTopics) *topology.Topology {
	t := topology.New()
	joined := topology.Filter(bidsWithAuctions(t, tp, "q20-join"), func(_ string, ab AuctionBid) bool {
		return ab.Auction.Category == nexmark.Q20Category
	})
	topology.To(topology.MapValues(joined, func(ab AuctionBid) nexmark.Q20Row { return nexmark.Q20(ab.Auction, ab.Bid) }),
		tp.Output, serde.String, serde.JSON[nexmark.Q20Row]())
	return t
}

// NexmarkQ11 counts each bidder's bids per session (10 s of inactivity
// closes one). Flink's SESSION_END is the last bid's time plus the gap.
func NexmarkQ11(tp NexmarkTopics) *topology.Topology {
	t := topology.New()
	sessions := topology.WindowedBy(
		topology.GroupBy(nexmarkBids(t, tp.Bid), func(_ string, b nexmark.Bid) string { return nexmark.ID(b.Bidder) },
			topology.Grouped("q11-by-bidder", serde.String, serde.JSON[nexmark.Bid]())),
		window.InactivityGap(nexmark.Q11GapMs*time.Millisecond), topology.EmitFinal())
	counts := topology.CountWindows(sessions, topology.Materialized("q11-sessions", serde.String, serde.Int64))
	topology.To(topology.Map(topology.ToStream(counts), func(w topology.Windowed[string], n int64) (string, nexmark.Q11Row) {
		id, _ := strconv.ParseInt(w.Key, 10, 64)
		return w.Key, nexmark.Q11Row{Bidder: id, BidCount: n, Starttime: w.Window.Start, Endtime: w.Window.End - 1 + nexmark.Q11GapMs}
	}), tp.Output, serde.String, serde.JSON[nexmark.Q11Row]())
	return t
}

// q5Count is one auction's bid count in one of q5's hopping windows.
type q5Count struct {
	Auction int64 `json:"auction"`
	Num     int64 `json:"num"`
}

// NexmarkQ5 finds, per 10 s window sliding by 2 s, the auctions with the
// most bids (all of them when tied). Counting per auction and window is a
// windowed count on the bids as keyed (by auction, so no repartition);
// the maximum over a window's auctions needs every count of the window,
// so the counts are re-keyed by window start and gathered by a processor
// (the DSL has no "all results of one window" operator) in a map state
// (auction → count: one entry each, where a list state would rewrite the
// whole list on every count, quadratic in a window's auctions) with an
// event-time timer at the window's last millisecond. It fires once the
// watermark of every counting task passed the window's end: each of them
// sends its watermark downstream only after the counts of the windows it
// closed (DESIGN.md: watermark records), so the list is complete then.
func NexmarkQ5(tp NexmarkTopics) *topology.Topology {
	t := topology.New()
	windows := topology.WindowedBy(topology.GroupByKey(nexmarkBids(t, tp.Bid)),
		window.Hopping(nexmark.Q5WindowMs*time.Millisecond, nexmark.Q5SlideMs*time.Millisecond), topology.EmitFinal())
	counts := topology.CountWindows(windows, topology.Materialized("q5-counts", serde.String, serde.Int64))
	byWindow := topology.Repartition(topology.Map(topology.ToStream(counts), func(w topology.Windowed[string], n int64) (string, q5Count) {
		id, _ := strconv.ParseInt(w.Key, 10, 64)
		return nexmark.ID(w.Window.Start), q5Count{Auction: id, Num: n}
	}), "q5-by-window", serde.String, serde.JSON[q5Count]())
	gathered := topology.MapState("q5-window-counts", serde.String, serde.Int64, serde.Int64)
	timers := topology.Timers("q5-window-ends", serde.String)
	hottest := topology.Process(byWindow, "q5-hottest", func() topology.Processor[string, q5Count, string, nexmark.Q5Row] {
		return &q5Hottest{gathered: gathered, timers: timers}
	}, gathered, timers)
	topology.To(hottest, tp.Output, serde.String, serde.JSON[nexmark.Q5Row]())
	return t
}

type q5Hottest struct {
	gathered topology.MapSpec[string, int64, int64]
	timers   topology.TimerSpec[string]
	ctx      *topology.ProcessorContext[string, nexmark.Q5Row]
	counts   *topology.KeyedMap[string, int64, int64]
	ends     *topology.TimerService[string]
}

func (p *q5Hottest) Init(ctx *topology.ProcessorContext[string, nexmark.Q5Row]) error {
	p.ctx, p.counts, p.ends = ctx, p.gathered.Open(ctx), p.timers.Open(ctx)
	return nil
}

func (p *q5Hottest) Close() error { return nil }

func (p *q5Hottest) Process(r topology.Record[string, q5Count]) error {
	start, err := strconv.ParseInt(r.Key, 10, 64)
	if err != nil {
		return fmt.Errorf("examples: q5: window start %q: %w", r.Key, err)
	}
	if err := p.counts.Put(r.Key, r.Value.Auction, r.Value.Num); err != nil {
		return err
	}
	return p.ends.RegisterEventTime(r.Key, start+nexmark.Q5WindowMs-1)
}

func (p *q5Hottest) OnTimer(tm topology.Timer[string]) error {
	var most int64
	var hottest []int64
	if err := p.counts.Range(tm.Key, func(auction, n int64) error {
		switch {
		case n > most:
			most, hottest = n, append(hottest[:0], auction)
		case n == most:
			hottest = append(hottest, auction)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, a := range hottest {
		if err := p.ctx.Forward(topology.Record[string, nexmark.Q5Row]{Key: tm.Key, Value: nexmark.Q5Row{Auction: a, Num: most}, Timestamp: tm.Time}); err != nil {
			return err
		}
	}
	return p.counts.Clear(tm.Key)
}
