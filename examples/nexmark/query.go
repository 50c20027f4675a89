package nexmark

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// The queries' parameters, as in nexmark-flink's queries/*.sql.
const (
	Q2Modulus      = 123    // q2: auctions whose id is a multiple of it
	Q3Category     = 10     // q3: the category of the auctions
	Q7WindowMs     = 10_000 // q7: tumbling window of the highest bid
	Q8WindowMs     = 10_000 // q8: tumbling window of new users' auctions
	Q11GapMs       = 10_000 // q11: session inactivity gap
	Q19TopN        = 10     // q19: bids kept per auction
	Q20Category    = 10     // q20: the category of the joined auctions
	Q5WindowMs     = 10_000 // q5: hopping window size
	Q5SlideMs      = 2_000  // q5: hopping window slide
	q1EuroPerMille = 908    // q1: 0.908 euro per dollar
)

// Q3States are the states of q3's sellers.
var Q3States = []string{"OR", "ID", "CA"}

// Q0Row is q0's output: the bid's columns that q0 selects.
type Q0Row struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra"`
}

// Q0 is q0's projection of b.
func Q0(b Bid) Q0Row {
	return Q0Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}
}

// Q1Row is q1's output: the bid with its price in euros, exact to three
// decimals (Flink's DECIMAL(23, 3)).
type Q1Row struct {
	Auction  int64       `json:"auction"`
	Bidder   int64       `json:"bidder"`
	Price    json.Number `json:"price"`
	DateTime int64       `json:"dateTime"`
	Extra    string      `json:"extra"`
}

// Q1 converts b's price from dollars to euros, in integer arithmetic so
// that no rounding happens.
func Q1(b Bid) Q1Row {
	m := b.Price * q1EuroPerMille
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	return Q1Row{Auction: b.Auction, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra,
		Price: json.Number(fmt.Sprintf("%s%d.%03d", sign, m/1000, m%1000))}
}

// Q2Row is q2's output.
type Q2Row struct {
	Auction int64 `json:"auction"`
	Price   int64 `json:"price"`
}

// Q2Selected reports whether q2 selects b.
func Q2Selected(b Bid) bool { return b.Auction%Q2Modulus == 0 }

// Q3Row is q3's output: a seller in OR, ID or CA and their auction in
// category 10.
type Q3Row struct {
	Name  string `json:"name"`
	City  string `json:"city"`
	State string `json:"state"`
	ID    int64  `json:"id"`
}

// Q3Seller reports whether p is a seller q3 looks for.
func Q3Seller(p Person) bool { return slices.Contains(Q3States, p.State) }

// Q4Row is q4's output: the average winning (highest in-time) bid of the
// auctions of a category, truncated to an integer as Flink's AVG of a
// BIGINT is.
type Q4Row struct {
	ID    int64 `json:"id"`
	Final int64 `json:"final"`
}

// Q4InTime reports whether b counts for auction a in q4: its time is
// between a's start and expiry, both included (SQL's BETWEEN).
func Q4InTime(a Auction, b Bid) bool { return a.DateTime <= b.DateTime && b.DateTime <= a.Expires }

// Q7Row is q7's output: a bid with the highest price of a window. (The
// SQL of nexmark-flink writes price into the bidder column and the other
// way round; here each goes to its own.)
type Q7Row struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra"`
}

// Q8Row is q8's output: a person who opened an auction in the 10 s window
// they registered in.
type Q8Row struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Stime int64  `json:"stime"`
}

// Q11Row is q11's output: a bidder's session, from its first bid to its
// last plus the gap (Flink's SESSION_END).
type Q11Row struct {
	Bidder    int64 `json:"bidder"`
	BidCount  int64 `json:"bid_count"`
	Starttime int64 `json:"starttime"`
	Endtime   int64 `json:"endtime"`
}

// Q19Row is one of q19's top bids of an auction, with its rank (1 is the
// highest price; among equal prices the earlier bid ranks first).
type Q19Row struct {
	Bid
	RankNumber int64 `json:"rank_number"`
}

// Q19Rank is where b enters top (see Q19Insert): its index, Q19TopN or
// more if it does not enter.
func Q19Rank(top []Bid, b Bid) int {
	i := len(top)
	for i > 0 && top[i-1].Price < b.Price {
		i--
	}
	return i
}

// Q19Insert inserts b into top (at most Q19TopN bids by price, highest
// first, earlier first among equal prices) and returns the new list.
func Q19Insert(top []Bid, b Bid) []Bid {
	i := Q19Rank(top, b)
	if i >= Q19TopN {
		return top
	}
	top = slices.Insert(slices.Clone(top), i, b)
	if len(top) > Q19TopN {
		top = top[:Q19TopN]
	}
	return top
}

// Q19Rows ranks top.
func Q19Rows(top []Bid) []Q19Row {
	rows := make([]Q19Row, len(top))
	for i, b := range top {
		rows[i] = Q19Row{Bid: b, RankNumber: int64(i + 1)}
	}
	return rows
}

// Q18Key is q18's output key: bidder/auction.
func Q18Key(b Bid) string { return fmt.Sprintf("%d/%d", b.Bidder, b.Auction) }

// Q20Row is q20's output: a bid joined with its auction in category 10.
type Q20Row struct {
	Auction         int64  `json:"auction"`
	Bidder          int64  `json:"bidder"`
	Price           int64  `json:"price"`
	Channel         string `json:"channel"`
	URL             string `json:"url"`
	BidDateTime     int64  `json:"bid_dateTime"`
	BidExtra        string `json:"bid_extra"`
	ItemName        string `json:"itemName"`
	Description     string `json:"description"`
	InitialBid      int64  `json:"initialBid"`
	Reserve         int64  `json:"reserve"`
	AuctionDateTime int64  `json:"auction_dateTime"`
	Expires         int64  `json:"expires"`
	Seller          int64  `json:"seller"`
	Category        int64  `json:"category"`
	AuctionExtra    string `json:"auction_extra"`
}

// Q20 joins b with its auction a.
func Q20(a Auction, b Bid) Q20Row {
	return Q20Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, URL: b.URL,
		BidDateTime: b.DateTime, BidExtra: b.Extra, ItemName: a.ItemName, Description: a.Description,
		InitialBid: a.InitialBid, Reserve: a.Reserve, AuctionDateTime: a.DateTime, Expires: a.Expires,
		Seller: a.Seller, Category: a.Category, AuctionExtra: a.Extra}
}

// Q5Row is q5's output: an auction with the most bids of a hopping
// window (every auction tied for the most).
type Q5Row struct {
	Auction int64 `json:"auction"`
	Num     int64 `json:"num"`
}

// ID is the decimal text of id, the keys' form.
func ID(id int64) string { return strconv.FormatInt(id, 10) }
