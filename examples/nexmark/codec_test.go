package nexmark

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sluice-streams/sluice/serde"
)

// TestBidsBinaryRoundTrip: lists of the generator's bids, empty strings,
// extreme numbers and non-ASCII text come back as they went.
func TestBidsBinaryRoundTrip(t *testing.T) {
	gen := someBids(t, 1, 25)
	odd := []Bid{{}, {Auction: -1 << 63, Bidder: 1<<63 - 1, Price: -1, Channel: "ç\x00\xff", URL: "", DateTime: -5, Extra: "€"}}
	for _, bids := range [][]Bid{nil, gen[:1], gen[:10], gen, odd} {
		b, err := BidsBinary.Encode(bids)
		if err != nil {
			t.Fatal(err)
		}
		got, err := BidsBinary.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(bids) == 0 && len(got) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, bids) {
			t.Errorf("round trip of %d bids: got %+v, want %+v", len(bids), got, bids)
		}
	}
}

// TestBidsBinaryRefusesDamage: every truncation and a trailing byte are
// decode errors, never a panic or a shorter list.
func TestBidsBinaryRefusesDamage(t *testing.T) {
	bids := someBids(t, 2, 3)
	b, err := BidsBinary.Encode(bids)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(b) {
		if _, err := BidsBinary.Decode(b[:n]); !errors.Is(err, serde.ErrDecode) {
			t.Fatalf("the first %d of %d bytes: %v, want a decode error", n, len(b), err)
		}
	}
	if _, err := BidsBinary.Decode(append(b, 0)); !errors.Is(err, serde.ErrDecode) {
		t.Errorf("a trailing byte: %v, want a decode error", err)
	}
}

// someBids is the first n bids of the generator with seed.
func someBids(t *testing.T, seed uint64, n int) []Bid {
	t.Helper()
	g, err := NewGenerator(Config{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	var bids []Bid
	for i := 0; len(bids) < n && i < 100*n; i++ {
		e, ok := g.Next()
		if !ok {
			break
		}
		if e.Bid != nil {
			bids = append(bids, *e.Bid)
		}
	}
	if len(bids) < n {
		t.Fatalf("the generator made %d bids, want %d", len(bids), n)
	}
	return bids
}
