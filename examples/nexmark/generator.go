package nexmark

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
)

// Nexmark's constants (GeneratorConfig, NexmarkConfiguration and the
// model generators of nexmark-flink), at their defaults.
const (
	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10
	NumCategories   = 5

	personProportion  = 1
	auctionProportion = 3
	bidProportion     = 46
	totalProportion   = personProportion + auctionProportion + bidProportion

	numActivePeople     = 1000
	numInFlightAuctions = 100
	personIDLead        = 10
	auctionIDLead       = 10
	hotSellersRatio     = 4   // P(hot seller) = 1 - 1/4
	hotBiddersRatio     = 4   // P(hot bidder) = 1 - 1/4
	hotAuctionRatio     = 2   // P(hot auction) = 1 - 1/2
	hotBatch            = 100 // HOT_SELLER_RATIO etc.: the batch whose first id is hot
	hotChannelsRatio    = 2
	channelsNumber      = 10_000
	avgPersonByteSize   = 200
	avgAuctionByteSize  = 500
	avgBidByteSize      = 100
	minStringLength     = 3
)

// DefaultRate is Nexmark's default event rate: 10,000 events per second of
// event time.
const DefaultRate = 10_000

// DefaultBaseTime is the event time of the first event when none is given:
// 2026-01-01T00:00:00Z, fixed so that a seed alone reproduces every field.
const DefaultBaseTime = 1_767_225_600_000

// Config configures a Generator.
type Config struct {
	Seed     uint64 // seed of every random choice
	Rate     int    // events per second of event time; 0: DefaultRate
	BaseTime int64  // event time of event 0, ms since the epoch; 0: DefaultBaseTime
	Events   int64  // events to generate; 0: unbounded
}

func (c Config) validate() error {
	var errs []error
	if c.Rate < 0 {
		errs = append(errs, fmt.Errorf("nexmark: rate %d must not be negative", c.Rate))
	}
	if c.Events < 0 {
		errs = append(errs, fmt.Errorf("nexmark: events %d must not be negative", c.Events))
	}
	if c.BaseTime < 0 {
		errs = append(errs, fmt.Errorf("nexmark: base time %d must not be negative", c.BaseTime))
	}
	return errors.Join(errs...)
}

// Generator makes Nexmark events in order. Its output is a function of its
// Config alone.
type Generator struct {
	cfg     Config
	delayUs float64 // inter-event delay, µs
	rng     *rand.Rand
	n       int64 // events generated
}

// NewGenerator returns a generator for cfg.
func NewGenerator(cfg Config) (*Generator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Rate == 0 {
		cfg.Rate = DefaultRate
	}
	if cfg.BaseTime == 0 {
		cfg.BaseTime = DefaultBaseTime
	}
	return &Generator{
		cfg:     cfg,
		delayUs: 1e6 / float64(cfg.Rate),
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x6e65786d61726b)), // "nexmark"
	}, nil
}

// Generate returns all cfg.Events events (which must be bounded).
func Generate(cfg Config) ([]Event, error) {
	if cfg.Events <= 0 {
		return nil, errors.New("nexmark: Generate needs a positive event count")
	}
	g, err := NewGenerator(cfg)
	if err != nil {
		return nil, err
	}
	evs := make([]Event, 0, cfg.Events)
	for {
		e, ok := g.Next()
		if !ok {
			return evs, nil
		}
		evs = append(evs, e)
	}
}

// Count is the number of events generated so far.
func (g *Generator) Count() int64 { return g.n }

// timestampFor is Nexmark's GeneratorConfig.timestampForEvent.
func (g *Generator) timestampFor(n int64) int64 {
	return g.cfg.BaseTime + int64(float64(n)*g.delayUs)/1000
}

// Next returns the next event, or false once Events are generated.
func (g *Generator) Next() (Event, bool) {
	if g.cfg.Events > 0 && g.n >= g.cfg.Events {
		return Event{}, false
	}
	n := g.n
	id := n // firstEventId 0, outOfOrderGroupSize 1: the event id is its number
	ts := g.timestampFor(n)
	var e Event
	switch rem := id % totalProportion; {
	case rem < personProportion:
		e.Person = g.person(id, ts)
	case rem < personProportion+auctionProportion:
		e.Auction = g.auction(n, id, ts)
	default:
		e.Bid = g.bid(id, ts)
	}
	g.n++
	return e, true
}

// lastBase0PersonID is the latest person id (base 0) at event id: the
// current one if id is a person.
func lastBase0PersonID(id int64) int64 {
	epoch, offset := id/totalProportion, id%totalProportion
	if offset >= personProportion {
		offset = personProportion - 1
	}
	return epoch*personProportion + offset
}

// lastBase0AuctionID is the latest auction id (base 0) at event id.
func lastBase0AuctionID(id int64) int64 {
	epoch, offset := id/totalProportion, id%totalProportion
	switch {
	case offset < personProportion:
		epoch--
		offset = auctionProportion - 1
	case offset >= personProportion+auctionProportion:
		offset = auctionProportion - 1
	default:
		offset -= personProportion
	}
	return epoch*auctionProportion + offset
}

// nextLong is Nexmark's LongGenerator.nextLong: uniform in [0, n).
func (g *Generator) nextLong(n int64) int64 { return g.rng.Int64N(max(n, 1)) }

func (g *Generator) nextBase0PersonID(id int64) int64 {
	numPeople := lastBase0PersonID(id) + 1
	active := min(numPeople, numActivePeople)
	return numPeople - active + g.nextLong(active+personIDLead)
}

func (g *Generator) nextBase0AuctionID(id int64) int64 {
	maxAuction := lastBase0AuctionID(id)
	minAuction := max(maxAuction-numInFlightAuctions, 0)
	return minAuction + g.nextLong(maxAuction-minAuction+1+auctionIDLead)
}

func (g *Generator) nextPrice() int64 {
	return int64(math.Round(math.Pow(10, g.rng.Float64()*6) * 100))
}

// nextString is a string of 3 to maxLength-1 letters, with special instead
// of a letter one time in 13, trimmed of spaces.
func nextString(rng *rand.Rand, maxLength int, special byte) string {
	n := minStringLength + rng.IntN(maxLength-minStringLength)
	b := make([]byte, n)
	for i := range b {
		if rng.IntN(13) == 0 {
			b[i] = special
		} else {
			b[i] = byte('a' + rng.IntN(26))
		}
	}
	return strings.TrimSpace(string(b))
}

// The fixed tables Nexmark makes once per process from an unseeded source:
// here from a fixed seed, so they are the same in every process.
var (
	tablesOnce  sync.Once
	reusable    string    // REUSABLE_EXTRA_STRING: 1 MiB of letters
	hotURLs     [4]string // the hot channels' urls
	channelURLs []string  // channel-<i>'s url
)

var hotChannels = [4]string{"Google", "Facebook", "Baidu", "Apple"}

func tables() {
	tablesOnce.Do(func() {
		rng := rand.New(rand.NewPCG(0x6e6578, 0x6d61726b))
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		reusable = string(b)
		baseURL := func() string {
			return "https://www.nexmark.com/" + nextString(rng, 5, '_') + "/" + nextString(rng, 5, '_') + "/" +
				nextString(rng, 5, '_') + "/item.htm?query=1"
		}
		for i := range hotURLs {
			hotURLs[i] = baseURL()
		}
		channelURLs = make([]string, channelsNumber)
		for i := range channelURLs {
			u := baseURL()
			if rng.IntN(10) > 0 {
				u += fmt.Sprintf("&channel_id=%d", reverse32(int32(i)))
			}
			channelURLs[i] = u
		}
	})
}

// reverse32 is Java's Math.abs(Integer.reverse(i)).
func reverse32(i int32) int64 {
	var r uint32
	u := uint32(i)
	for range 32 {
		r = r<<1 | u&1
		u >>= 1
	}
	v := int64(int32(r))
	if v < 0 {
		v = -v
	}
	return v
}

// nextExtra is a string making currentSize+len about desiredAverageSize on
// average (±20%), cut from the reusable string.
func (g *Generator) nextExtra(currentSize, desiredAverageSize int) string {
	if currentSize > desiredAverageSize {
		return ""
	}
	desired := desiredAverageSize - currentSize
	delta := int(math.Round(float64(desired) * 0.2))
	size := desired - delta
	if delta != 0 {
		size += g.rng.IntN(2 * delta)
	}
	tables()
	off := g.rng.IntN(len(reusable) - size)
	return reusable[off : off+size]
}

var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
)

func (g *Generator) person(id, ts int64) *Person {
	p := &Person{ID: lastBase0PersonID(id) + FirstPersonID, DateTime: ts}
	p.Name = firstNames[g.rng.IntN(len(firstNames))] + " " + lastNames[g.rng.IntN(len(lastNames))]
	p.EmailAddress = nextString(g.rng, 7, ' ') + "@" + nextString(g.rng, 5, ' ') + ".com"
	p.CreditCard = fmt.Sprintf("%04d %04d %04d %04d", g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000))
	p.City = usCities[g.rng.IntN(len(usCities))]
	p.State = usStates[g.rng.IntN(len(usStates))]
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = g.nextExtra(size, avgPersonByteSize)
	return p
}

func (g *Generator) auction(n, id, ts int64) *Auction {
	a := &Auction{ID: lastBase0AuctionID(id) + FirstAuctionID, DateTime: ts}
	if g.rng.IntN(hotSellersRatio) > 0 {
		a.Seller = lastBase0PersonID(id) / hotBatch * hotBatch
	} else {
		a.Seller = g.nextBase0PersonID(id)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + int64(g.rng.IntN(NumCategories))
	a.InitialBid = g.nextPrice()
	// The auction lasts on average until numInFlightAuctions more
	// auctions are made (Nexmark's nextAuctionLengthMs).
	eventsForAuctions := int64(numInFlightAuctions*totalProportion) / auctionProportion
	horizon := g.timestampFor(n+eventsForAuctions) - ts
	a.Expires = ts + 1 + g.nextLong(max(horizon*2, 1))
	a.ItemName = nextString(g.rng, 20, ' ')
	a.Description = nextString(g.rng, 100, ' ')
	a.Reserve = a.InitialBid + g.nextPrice()
	size := 8 + len(a.ItemName) + len(a.Description) + 8 + 8 + 8 + 8 + 8
	a.Extra = g.nextExtra(size, avgAuctionByteSize)
	return a
}

func (g *Generator) bid(id, ts int64) *Bid {
	b := &Bid{DateTime: ts}
	if g.rng.IntN(hotAuctionRatio) > 0 {
		b.Auction = lastBase0AuctionID(id) / hotBatch * hotBatch
	} else {
		b.Auction = g.nextBase0AuctionID(id)
	}
	b.Auction += FirstAuctionID
	if g.rng.IntN(hotBiddersRatio) > 0 {
		// The second person of the batch, so hot bidders and hot
		// sellers differ.
		b.Bidder = lastBase0PersonID(id)/hotBatch*hotBatch + 1
	} else {
		b.Bidder = g.nextBase0PersonID(id)
	}
	b.Bidder += FirstPersonID
	b.Price = g.nextPrice()
	tables()
	if g.rng.IntN(hotChannelsRatio) > 0 {
		i := g.rng.IntN(len(hotChannels))
		b.Channel, b.URL = hotChannels[i], hotURLs[i]
	} else {
		i := g.rng.IntN(channelsNumber)
		b.Channel, b.URL = fmt.Sprintf("channel-%d", i), channelURLs[i]
	}
	b.Extra = g.nextExtra(8+8+8+8, avgBidByteSize)
	return b
}
