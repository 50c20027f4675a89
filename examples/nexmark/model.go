package nexmark

import (
	"encoding/json"
	"strconv"
)

// The topics the generator writes and the queries read by default.
const (
	PersonTopic  = "nexmark-person"
	AuctionTopic = "nexmark-auction"
	BidTopic     = "nexmark-bid"
)

// Person is a new user of the auction site.
type Person struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	EmailAddress string `json:"emailAddress"`
	CreditCard   string `json:"creditCard"`
	City         string `json:"city"`
	State        string `json:"state"`
	DateTime     int64  `json:"dateTime"`
	Extra        string `json:"extra"`
}

// Auction is an item put up for sale.
type Auction struct {
	ID          int64  `json:"id"`
	ItemName    string `json:"itemName"`
	Description string `json:"description"`
	InitialBid  int64  `json:"initialBid"`
	Reserve     int64  `json:"reserve"`
	DateTime    int64  `json:"dateTime"`
	Expires     int64  `json:"expires"`
	Seller      int64  `json:"seller"`
	Category    int64  `json:"category"`
	Extra       string `json:"extra"`
}

// Bid is a bid on an auction.
type Bid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	Channel  string `json:"channel"`
	URL      string `json:"url"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra"`
}

// Kind is what an event is.
type Kind int

// The kinds of events, numbered as Nexmark's event_type.
const (
	KindPerson Kind = iota
	KindAuction
	KindBid
)

// Event is one generated event: exactly one of its pointers is set.
type Event struct {
	Person  *Person
	Auction *Auction
	Bid     *Bid
}

// Kind is the event's kind.
func (e Event) Kind() Kind {
	switch {
	case e.Person != nil:
		return KindPerson
	case e.Auction != nil:
		return KindAuction
	}
	return KindBid
}

// DateTime is the event's event time (ms since the epoch).
func (e Event) DateTime() int64 {
	switch e.Kind() {
	case KindPerson:
		return e.Person.DateTime
	case KindAuction:
		return e.Auction.DateTime
	}
	return e.Bid.DateTime
}

// Key is the event's record key: Key(id) of a person or an auction, of a
// bid's auction.
func (e Event) Key() []byte {
	switch e.Kind() {
	case KindPerson:
		return Key(e.Person.ID)
	case KindAuction:
		return Key(e.Auction.ID)
	}
	return Key(e.Bid.Auction)
}

// Value is the event's record value, its JSON.
func (e Event) Value() []byte {
	var v any
	switch e.Kind() {
	case KindPerson:
		v = e.Person
	case KindAuction:
		v = e.Auction
	default:
		v = e.Bid
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // strings and integers always marshal
	}
	return b
}

// Topic is the event's topic among topics (person, auction, bid).
func (e Event) Topic(topics Topics) string {
	switch e.Kind() {
	case KindPerson:
		return topics.Person
	case KindAuction:
		return topics.Auction
	}
	return topics.Bid
}

// Topics names the three input topics.
type Topics struct{ Person, Auction, Bid string }

// DefaultTopics are the topics the generator and the queries use unless
// told otherwise.
var DefaultTopics = Topics{PersonTopic, AuctionTopic, BidTopic}

// Key is the record key of id: its decimal digits.
func Key(id int64) []byte { return strconv.AppendInt(nil, id, 10) }
