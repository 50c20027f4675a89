package nexmark

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Mode is how a query's output is compared.
type Mode int

const (
	// Append outputs are compared as multisets of records: every result
	// exactly once, none missing, none extra.
	Append Mode = iota
	// Upsert outputs are tables: compared by the last value per key (a
	// nil value deletes the key).
	Upsert
)

// Record is an output record: key and value bytes (a nil value is a
// tombstone).
type Record struct {
	Key   string
	Value []byte
}

// Expected is an oracle's answer for one query.
type Expected struct {
	Mode    Mode
	Records []Record
}

func rec(key string, v any) Record {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the rows are plain structs
	}
	return Record{Key: key, Value: b}
}

// Oracle computes query q ("q0", "q1", ...) over events in memory, the way
// its SQL in nexmark-flink defines it (with the documented choices where
// the SQL leaves the order of ties open).
func Oracle(q string, events []Event) (Expected, error) {
	var persons []Person
	var auctions []Auction
	var bids []Bid
	for _, e := range events {
		switch e.Kind() {
		case KindPerson:
			persons = append(persons, *e.Person)
		case KindAuction:
			auctions = append(auctions, *e.Auction)
		default:
			bids = append(bids, *e.Bid)
		}
	}
	out := Expected{Mode: Append}
	add := func(key string, v any) { out.Records = append(out.Records, rec(key, v)) }
	switch q {
	case "q0":
		for _, b := range bids {
			add(ID(b.Auction), Q0(b))
		}
	case "q1":
		for _, b := range bids {
			add(ID(b.Auction), Q1(b))
		}
	case "q2":
		for _, b := range bids {
			if Q2Selected(b) {
				add(ID(b.Auction), Q2Row{Auction: b.Auction, Price: b.Price})
			}
		}
	case "q3":
		out.Mode = Upsert
		sellers := map[int64]Person{}
		for _, p := range persons {
			if Q3Seller(p) {
				sellers[p.ID] = p
			}
		}
		for _, a := range auctions {
			if p, ok := sellers[a.Seller]; ok && a.Category == Q3Category {
				add(ID(a.ID), Q3Row{Name: p.Name, City: p.City, State: p.State, ID: a.ID})
			}
		}
	case "q4":
		out.Mode = Upsert
		byID := map[int64]Auction{}
		for _, a := range auctions {
			byID[a.ID] = a
		}
		final := map[int64]int64{}
		for _, b := range bids {
			if a, ok := byID[b.Auction]; ok && Q4InTime(a, b) {
				if f, ok := final[a.ID]; !ok || b.Price > f {
					final[a.ID] = b.Price
				}
			}
		}
		type sc struct{ sum, n int64 }
		cats := map[int64]sc{}
		for id, f := range final {
			c := cats[byID[id].Category]
			cats[byID[id].Category] = sc{c.sum + f, c.n + 1}
		}
		for cat, c := range cats {
			add(ID(cat), Q4Row{ID: cat, Final: c.sum / c.n})
		}
	case "q7":
		// Per 10 s window: the highest price; then every bid at that
		// price whose time is in [start, end], both ends included (SQL's
		// BETWEEN), so a bid exactly at a window's end can be the
		// highest of that window as well as a candidate of the next.
		maxOf := map[int64]int64{}
		for _, b := range bids {
			end := b.DateTime - b.DateTime%Q7WindowMs + Q7WindowMs
			if m, ok := maxOf[end]; !ok || b.Price > m {
				maxOf[end] = b.Price
			}
		}
		for _, b := range bids {
			end := b.DateTime - b.DateTime%Q7WindowMs + Q7WindowMs
			row := Q7Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}
			if maxOf[end] == b.Price {
				add(ID(end), row)
			}
			if b.DateTime%Q7WindowMs == 0 {
				if m, ok := maxOf[b.DateTime]; ok && m == b.Price {
					add(ID(b.DateTime), row)
				}
			}
		}
	case "q8":
		type pw struct{ id, start int64 }
		sold := map[pw]bool{}
		for _, a := range auctions {
			sold[pw{a.Seller, a.DateTime - a.DateTime%Q8WindowMs}] = true
		}
		seen := map[pw]bool{}
		for _, p := range persons {
			k := pw{p.ID, p.DateTime - p.DateTime%Q8WindowMs}
			if sold[k] && !seen[k] {
				seen[k] = true
				add(ID(p.ID), Q8Row{ID: p.ID, Name: p.Name, Stime: k.start})
			}
		}
	case "q11":
		type session struct{ first, last, n int64 }
		open := map[int64]*session{}
		var order []int64
		flush := func(bidder int64, s *session) {
			add(ID(bidder), Q11Row{Bidder: bidder, BidCount: s.n, Starttime: s.first, Endtime: s.last + Q11GapMs})
		}
		for _, b := range bids { // in event-time order: the generator's
			s := open[b.Bidder]
			if s != nil && b.DateTime <= s.last+Q11GapMs {
				s.last, s.n = b.DateTime, s.n+1
				continue
			}
			if s != nil {
				flush(b.Bidder, s)
			} else {
				order = append(order, b.Bidder)
			}
			open[b.Bidder] = &session{b.DateTime, b.DateTime, 1}
		}
		for _, bidder := range order {
			flush(bidder, open[bidder])
		}
	case "q18":
		out.Mode = Upsert
		latest := map[string]Bid{}
		for _, b := range bids {
			k := Q18Key(b)
			if old, ok := latest[k]; !ok || b.DateTime >= old.DateTime {
				latest[k] = b
			}
		}
		for k, b := range latest {
			add(k, b)
		}
	case "q19":
		out.Mode = Upsert
		top := map[int64][]Bid{}
		for _, b := range bids {
			top[b.Auction] = Q19Insert(top[b.Auction], b)
		}
		for a, t := range top {
			add(ID(a), Q19Rows(t))
		}
	case "q20":
		byID := map[int64]Auction{}
		for _, a := range auctions {
			byID[a.ID] = a
		}
		for _, b := range bids {
			if a, ok := byID[b.Auction]; ok && a.Category == Q20Category {
				add(ID(b.Auction), Q20(a, b))
			}
		}
	case "q5":
		// Hopping windows [s, s+10 s) for every s a multiple of 2 s.
		counts := map[int64]map[int64]int64{} // window start → auction → bids
		for _, b := range bids {
			last := b.DateTime - b.DateTime%Q5SlideMs
			for s := last; s > b.DateTime-Q5WindowMs; s -= Q5SlideMs {
				if counts[s] == nil {
					counts[s] = map[int64]int64{}
				}
				counts[s][b.Auction]++
			}
		}
		for s, byAuction := range counts {
			var most int64
			for _, n := range byAuction {
				most = max(most, n)
			}
			for a, n := range byAuction {
				if n == most {
					add(ID(s), Q5Row{Auction: a, Num: n})
				}
			}
		}
	default:
		return Expected{}, fmt.Errorf("nexmark: no query %q (have %v)", q, Queries)
	}
	return out, nil
}

// Queries lists the queries the oracle and the examples implement, in the
// order of the issue.
var Queries = []string{"q0", "q1", "q2", "q3", "q4", "q7", "q8", "q18", "q19", "q20", "q5", "q11"}

// Check compares a query's output with its oracle's answer and returns
// an error describing the first differences (at most 10).
func Check(want Expected, got []Record) error {
	var diffs []string
	note := func(format string, args ...any) {
		if len(diffs) < 10 {
			diffs = append(diffs, fmt.Sprintf(format, args...))
		} else if len(diffs) == 10 {
			diffs = append(diffs, "...")
		}
	}
	switch want.Mode {
	case Upsert:
		w, g := finalOf(want.Records), finalOf(got)
		for k, v := range w {
			if gv, ok := g[k]; !ok {
				note("key %q missing, want %s", k, v)
			} else if gv != v && string(canonical(Record{Value: []byte(gv)}).Value) != string(canonical(Record{Value: []byte(v)}).Value) {
				note("key %q: got %s, want %s", k, gv, v)
			}
		}
		for k, v := range g {
			if _, ok := w[k]; !ok {
				note("key %q not expected, got %s", k, v)
			}
		}
	default:
		// Raw bytes first (the common case: the same encoder on both
		// sides), then what is left over compared canonically.
		type kv struct{ k, v string }
		count := map[kv]int{}
		for _, r := range want.Records {
			count[kv{r.Key, string(r.Value)}]++
		}
		for _, r := range got {
			count[kv{r.Key, string(r.Value)}]--
		}
		residual := map[kv]int{}
		for r, n := range count {
			if n != 0 {
				c := canonical(Record{Key: r.k, Value: []byte(r.v)})
				residual[kv{c.Key, string(c.Value)}] += n
			}
		}
		count = residual
		var keys []kv
		for r, n := range count {
			if n != 0 {
				keys = append(keys, r)
			}
		}
		slices.SortFunc(keys, func(a, b kv) int {
			if a.k != b.k {
				return strings.Compare(a.k, b.k)
			}
			return strings.Compare(a.v, b.v)
		})
		for _, r := range keys {
			if n := count[r]; n > 0 {
				note("missing %d× key %q value %s", n, r.k, r.v)
			} else {
				note("extra %d× key %q value %s", -n, r.k, r.v)
			}
		}
		if len(got) != len(want.Records) && len(diffs) == 0 {
			note("%d records, want %d", len(got), len(want.Records))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("nexmark: output differs from the oracle (%d records, want %d):\n  %s",
		len(got), len(want.Records), joinLines(diffs))
}

func joinLines(s []string) string { return strings.Join(s, "\n  ") }

// finalOf is the last value per key, tombstones removing.
func finalOf(rs []Record) map[string]string {
	m := map[string]string{}
	for _, r := range rs {
		if r.Value == nil {
			delete(m, r.Key)
			continue
		}
		m[r.Key] = string(r.Value)
	}
	return m
}

// canonical re-encodes a JSON value with sorted keys and exact numbers, so
// that equal values compare equal whatever their field order. A value
// that is not JSON stays as it is (and then differs from the oracle's).
func canonical(r Record) Record {
	var v any
	dec := json.NewDecoder(bytes.NewReader(r.Value))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return r
	}
	b, err := json.Marshal(v)
	if err != nil {
		return r
	}
	return Record{Key: r.Key, Value: b}
}
