package nexmark

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-streams/sluice/serde"
)

// BidsBinary is a binary serde of a list of bids, for state that only the
// job reads (q19's top bids of each auction): a uvarint count, then per
// bid its auction, bidder and price as varints, its channel, URL and
// extra as uvarint-length strings, and its time as a varint. JSON there
// cost most of q19's time: every bid decoded and encoded the whole list.
var BidsBinary serde.Serde[[]Bid] = bidsBinary{}

type bidsBinary struct{}

func (bidsBinary) SerdeID() string { return "nexmark.bids/binary/v1" }

func (c bidsBinary) Encode(bids []Bid) ([]byte, error) {
	return c.AppendEncode(make([]byte, 0, 64+len(bids)*160), bids)
}

func (bidsBinary) AppendEncode(dst []byte, bids []Bid) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(bids)))
	for _, b := range bids {
		dst = binary.AppendVarint(dst, b.Auction)
		dst = binary.AppendVarint(dst, b.Bidder)
		dst = binary.AppendVarint(dst, b.Price)
		dst = appendString(dst, b.Channel)
		dst = appendString(dst, b.URL)
		dst = binary.AppendVarint(dst, b.DateTime)
		dst = appendString(dst, b.Extra)
	}
	return dst, nil
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

var errBids = errors.New("bids")

func (bidsBinary) Decode(b []byte) ([]Bid, error) {
	r := binReader{b: b}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(b)) { // a bid takes at least a byte
		return nil, fmt.Errorf("%w: nexmark bids: a list of %d in %d bytes", serde.ErrDecode, n, len(b))
	}
	bids := make([]Bid, n)
	for i := range bids {
		bid := &bids[i]
		bid.Auction, bid.Bidder, bid.Price = r.varint(), r.varint(), r.varint()
		bid.Channel, bid.URL = r.string(), r.string()
		bid.DateTime, bid.Extra = r.varint(), r.string()
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %d bytes past the last bid", errBids, len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: nexmark bids: %v", serde.ErrDecode, r.err)
	}
	return bids, nil
}

// binReader reads BidsBinary's fields, keeping the first error.
type binReader struct {
	b   []byte
	err error
}

func (r *binReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: a truncated or overlong number", errBids)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// varint undoes binary.AppendVarint's zig-zag over a uvarint.
func (r *binReader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *binReader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: a string of %d bytes with %d left", errBids, n, len(r.b))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
