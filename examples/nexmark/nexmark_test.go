package nexmark

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func gen(t *testing.T, cfg Config) []Event {
	t.Helper()
	evs, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestGeneratorDeterministic: a seed reproduces every event; another seed
// changes them; the generator streamed equals Generate.
func TestGeneratorDeterministic(t *testing.T) {
	cfg := Config{Seed: 7, Events: 5000}
	a, b := gen(t, cfg), gen(t, cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed made different events")
	}
	cfg.Seed = 8
	if c := gen(t, cfg); reflect.DeepEqual(a, c) {
		t.Fatal("another seed made the same events")
	}
	g, err := NewGenerator(Config{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		e, ok := g.Next()
		if !ok || !bytes.Equal(e.Value(), a[i].Value()) {
			t.Fatalf("event %d of an unbounded generator differs", i)
		}
	}
	if g.Count() != int64(len(a)) {
		t.Fatalf("Count %d", g.Count())
	}
}

// TestGeneratorShape checks Nexmark's proportions, ids, times and
// distributions over 100,000 events.
func TestGeneratorShape(t *testing.T) {
	const n = 100_000
	evs := gen(t, Config{Seed: 1, Events: n})
	var kinds [3]int
	var persons, auctions int64 = FirstPersonID, FirstAuctionID
	var hotAuctionBids, hotBidderBids, hotSellers, futureAuctionBids, hotChannelBids int
	prevTS := int64(0)
	for i, e := range evs {
		if want := DefaultBaseTime + int64(i)/10; e.DateTime() != want { // 10,000/s: 10 events a millisecond
			t.Fatalf("event %d at %d, want %d", i, e.DateTime(), want)
		}
		if e.DateTime() < prevTS {
			t.Fatalf("event %d goes back in time", i)
		}
		prevTS = e.DateTime()
		kinds[e.Kind()]++
		if want := []Kind{KindPerson, KindAuction, KindAuction, KindAuction}; i%50 < 4 && e.Kind() != want[i%50] || i%50 >= 4 && e.Kind() != KindBid {
			t.Fatalf("event %d is a %d: not Nexmark's order of 1 person, 3 auctions, 46 bids", i, e.Kind())
		}
		switch e.Kind() {
		case KindPerson:
			if e.Person.ID != persons {
				t.Fatalf("person id %d, want %d", e.Person.ID, persons)
			}
			persons++
			if !slices.Contains(usStates, e.Person.State) || !strings.Contains(e.Person.EmailAddress, "@") || len(e.Person.CreditCard) != 19 {
				t.Fatalf("person %+v", e.Person)
			}
		case KindAuction:
			a := e.Auction
			if a.ID != auctions {
				t.Fatalf("auction id %d, want %d", a.ID, auctions)
			}
			auctions++
			if a.Category < FirstCategoryID || a.Category >= FirstCategoryID+NumCategories || a.Expires <= a.DateTime || a.Reserve <= a.InitialBid {
				t.Fatalf("auction %+v", a)
			}
			if a.Seller >= persons+personIDLead {
				t.Fatalf("auction %d's seller %d is more than the lead past the last person %d", a.ID, a.Seller, persons-1)
			}
			if (a.Seller-FirstPersonID)%hotBatch == 0 && a.Seller == (persons-1-FirstPersonID)/hotBatch*hotBatch+FirstPersonID {
				hotSellers++
			}
		default:
			b := e.Bid
			if b.Auction >= auctions+auctionIDLead || b.Price < 100 || b.Price > 100_000_000 {
				t.Fatalf("bid %+v (last auction %d)", b, auctions-1)
			}
			if b.Auction >= auctions {
				futureAuctionBids++
			}
			if b.Auction == (auctions-1-FirstAuctionID)/hotBatch*hotBatch+FirstAuctionID {
				hotAuctionBids++
			}
			if b.Bidder == (persons-1-FirstPersonID)/hotBatch*hotBatch+1+FirstPersonID {
				hotBidderBids++
			}
			if slices.Contains(hotChannels[:], b.Channel) {
				hotChannelBids++
			}
		}
	}
	if kinds != [3]int{n / 50, n / 50 * 3, n / 50 * 46} {
		t.Fatalf("kinds %v, want 1:3:46", kinds)
	}
	share := func(k, of int) float64 { return float64(k) / float64(of) }
	bids := kinds[KindBid]
	for _, c := range []struct {
		name     string
		got, min float64
		max      float64
	}{
		{"hot auctions (1/2 + chance)", share(hotAuctionBids, bids), 0.49, 0.56},
		{"hot bidders (3/4 + chance)", share(hotBidderBids, bids), 0.74, 0.78},
		{"hot sellers (3/4 + chance)", share(hotSellers, kinds[KindAuction]), 0.73, 0.79},
		{"hot channels (1/2)", share(hotChannelBids, bids), 0.48, 0.52},
	} {
		if c.got < c.min || c.got > c.max {
			t.Errorf("%s: %.3f, want in [%v, %v]", c.name, c.got, c.min, c.max)
		}
	}
	if futureAuctionBids == 0 {
		t.Error("no bid names an auction not made yet: the join queries' out-of-order case is not exercised")
	}
}

// TestRecordsAreNexmarkJSON: the field names are Nexmark's, keys are the
// decimal ids, and Record routes by kind.
func TestRecordsAreNexmarkJSON(t *testing.T) {
	evs := gen(t, Config{Seed: 3, Events: 50})
	want := map[Kind][]string{
		KindPerson:  {"city", "creditCard", "dateTime", "emailAddress", "extra", "id", "name", "state"},
		KindAuction: {"category", "dateTime", "description", "expires", "extra", "id", "initialBid", "itemName", "reserve", "seller"},
		KindBid:     {"auction", "bidder", "channel", "dateTime", "extra", "price", "url"},
	}
	topics := Topics{"p", "a", "b"}
	for _, e := range evs {
		var m map[string]any
		if err := json.Unmarshal(e.Value(), &m); err != nil {
			t.Fatal(err)
		}
		var names []string
		for k := range m {
			names = append(names, k)
		}
		slices.Sort(names)
		if !slices.Equal(names, want[e.Kind()]) {
			t.Fatalf("kind %d fields %v, want %v", e.Kind(), names, want[e.Kind()])
		}
		r := e.Record(topics, time.Unix(0, 0))
		if r.Topic != []string{"p", "a", "b"}[e.Kind()] || string(r.Key) != ID(map[Kind]int64{KindPerson: int64OrZero(e.Person), KindAuction: auctionID(e.Auction), KindBid: bidAuction(e.Bid)}[e.Kind()]) {
			t.Fatalf("record %s/%s for kind %d", r.Topic, r.Key, e.Kind())
		}
	}
}

func int64OrZero(p *Person) int64 {
	if p == nil {
		return 0
	}
	return p.ID
}

func auctionID(a *Auction) int64 {
	if a == nil {
		return 0
	}
	return a.ID
}

func bidAuction(b *Bid) int64 {
	if b == nil {
		return 0
	}
	return b.Auction
}

// TestCheckerCatchesFaults is the checker's negative control: for every
// query, a lost record, a duplicated one, a changed value and a stray key
// are each reported, and the untouched output passes.
func TestCheckerCatchesFaults(t *testing.T) {
	evs := gen(t, Config{Seed: 20, Rate: 200, Events: 5_000})
	for _, q := range Queries {
		want, err := Oracle(q, evs)
		if err != nil {
			t.Fatal(err)
		}
		if len(want.Records) == 0 {
			t.Fatalf("%s: no output to check", q)
		}
		got := slices.Clone(want.Records)
		if err := Check(want, got); err != nil {
			t.Fatalf("%s: the oracle's own output fails: %v", q, err)
		}
		// The same output reordered (and, for tables, with an earlier
		// value superseded) still passes.
		slices.Reverse(got)
		if want.Mode == Append {
			if err := Check(want, got); err != nil {
				t.Fatalf("%s: reordered output fails: %v", q, err)
			}
		} else {
			stale := Record{Key: want.Records[0].Key, Value: []byte(`{"stale":true}`)}
			if err := Check(want, append([]Record{stale}, want.Records...)); err != nil {
				t.Fatalf("%s: a superseded value fails: %v", q, err)
			}
		}
		mutations := map[string][]Record{
			"lost":    want.Records[1:],
			"changed": append([]Record{{Key: want.Records[0].Key, Value: bytes.Replace(want.Records[0].Value, []byte(`:`), []byte(`:1`), 1)}}, want.Records[1:]...),
			"stray":   append(slices.Clone(want.Records), Record{Key: "stray", Value: []byte(`{}`)}),
			"deleted": append(slices.Clone(want.Records), Record{Key: want.Records[0].Key}),
		}
		if want.Mode == Append {
			mutations["duplicated"] = append(slices.Clone(want.Records), want.Records[0])
		}
		for name, m := range mutations {
			if want.Mode == Upsert && name == "lost" && hasKey(m, want.Records[0].Key) {
				continue // a table's earlier row of the same key is not lost
			}
			if err := Check(want, m); err == nil {
				t.Errorf("%s: a %s record passed the check", q, name)
			}
		}
	}
}

func hasKey(rs []Record, k string) bool {
	return slices.ContainsFunc(rs, func(r Record) bool { return r.Key == k })
}

// TestDecoysChangeEveryQuery: the aborted decoy transactions the
// end-to-end tests write would change every query's output if a query read
// them, so a run passing those tests did not.
func TestDecoysChangeEveryQuery(t *testing.T) {
	evs := gen(t, Config{Seed: 20, Rate: 500, Events: 20_000}) // the end-to-end tests' input
	var withDecoys []Event
	for i := 0; i < len(evs); i += 500 {
		batch := evs[i:min(i+500, len(evs))]
		if (i/500)%2 == 1 {
			withDecoys = append(withDecoys, Decoys(batch)...)
		}
		withDecoys = append(withDecoys, batch...)
	}
	for _, q := range Queries {
		want, _ := Oracle(q, evs)
		polluted, _ := Oracle(q, withDecoys)
		if err := Check(want, polluted.Records); err == nil {
			t.Errorf("%s: reading the decoys would not change the output", q)
		}
	}
}

func TestOracleUnknownQuery(t *testing.T) {
	if _, err := Oracle("q99", nil); err == nil {
		t.Fatal("q99 has an oracle")
	}
	if _, err := NewGenerator(Config{Rate: -1}); err == nil {
		t.Fatal("a negative rate was accepted")
	}
}

// TestQ19Insert: ranks by price, the earlier of equal prices first, at
// most 10.
func TestQ19Insert(t *testing.T) {
	var top []Bid
	for i, p := range []int64{5, 9, 5, 1, 9, 7, 3, 3, 8, 2, 6, 5, 4} {
		top = Q19Insert(top, Bid{Price: p, Extra: string(rune('a' + i))})
	}
	var got []string
	for _, b := range top {
		got = append(got, string(rune('0'+b.Price))+b.Extra)
	}
	want := []string{"9b", "9e", "8i", "7f", "6k", "5a", "5c", "5l", "4m", "3g"}
	if !slices.Equal(got, want) {
		t.Fatalf("top %v, want %v", got, want)
	}
}

func TestQ1IsExact(t *testing.T) {
	for p, want := range map[int64]string{100: "90.800", 1: "0.908", 123456789: "112098764.412", 0: "0.000"} {
		if got := Q1(Bid{Price: p}).Price; string(got) != want {
			t.Errorf("Q1(%d) = %s, want %s", p, got, want)
		}
	}
}

// TestTrackerAgreesWithCheck: the tracker is done exactly when Check
// passes, over the oracle's output fed in order, and not before the last
// needed record; a stray or duplicated record keeps it from being done.
func TestTrackerAgreesWithCheck(t *testing.T) {
	evs := gen(t, Config{Seed: 20, Rate: 200, Events: 5_000})
	for _, q := range Queries {
		want, _ := Oracle(q, evs)
		recs := slices.Clone(want.Records)
		if want.Mode == Upsert {
			// Earlier values first, as a table's updates come.
			recs = append([]Record{{Key: recs[0].Key, Value: []byte(`{"early":1}`)}, {Key: "gone", Value: []byte(`{}`)}, {Key: "gone"}}, recs...)
		}
		tr := NewTracker(want)
		for i, r := range recs {
			if tr.Done() {
				t.Fatalf("%s: done after %d of %d records", q, i, len(recs))
			}
			tr.Add(r)
		}
		if !tr.Done() || Check(want, recs) != nil {
			t.Fatalf("%s: tracker done %v, check %v", q, tr.Done(), Check(want, recs))
		}
		tr.Add(Record{Key: "stray", Value: []byte(`{}`)})
		if tr.Done() {
			t.Errorf("%s: done with a stray record", q)
		}
		if want.Mode == Append {
			tr2 := NewTracker(want)
			for _, r := range append(slices.Clone(recs), recs[0]) {
				tr2.Add(r)
			}
			if tr2.Done() {
				t.Errorf("%s: done with a duplicate", q)
			}
		}
	}
}
