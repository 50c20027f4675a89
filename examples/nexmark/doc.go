// Package nexmark is the Nexmark benchmark's data for sluice: a
// deterministic generator of persons, auctions and bids with the
// distributions of the nexmark/nexmark repository's Flink generator, the
// JSON records it writes to Kafka, and an oracle, a plain in-memory
// computation of each query that sluice's examples implement
// (the nexmark-q* examples, examples/nexmark.go), with a checker
// comparing a run's output with it.
//
// # The generator
//
// Event n (0-based) has event time BaseTime + n·(10⁶/Rate) µs, truncated
// to milliseconds, as Nexmark's with one generator and
// outOfOrderGroupSize 1 (so event times never go back). Of every 50
// events, 1 is a person, 3 are auctions and 46 are bids. Ids start at
// 1000 (persons, auctions) and categories at 10 (five of them). Sellers
// are hot (the first person of the latest batch of 100) with probability
// 3/4, bidders (the second person of that batch) 3/4, auctions (the
// first of the latest batch of 100) 1/2; the others are drawn from the
// 1000 most recent persons or the 100 most recent auctions, plus a lead
// of 10 ids not generated yet, so a bid can name an auction (and an
// auction a seller) that appears slightly later, as in Nexmark. Prices
// are 100·10^U(0,6) rounded. The pseudo-random source is math/rand/v2's
// PCG seeded from Seed, not Java's SplittableRandom, so the values differ
// from Flink's but their distributions match.
//
// One deliberate difference: Flink's BidGenerator adds FIRST_PERSON_ID to
// the bidder twice (a bug that makes every bidder a person id that never
// exists); here it is added once, as in Beam's original generator.
//
// # Topics and records
//
// The generator writes three topics, not Nexmark's single one with an
// event-type column: each query reads only the kinds it needs (q0, q1 and
// q2 decode no person or auction), and each topic is keyed for the
// queries' joins, so they need no repartition:
//
//	nexmark-person   key: id (decimal)           value: Person JSON
//	nexmark-auction  key: id (decimal)           value: Auction JSON
//	nexmark-bid      key: auction id (decimal)   value: Bid JSON
//
// With the same partition count, a bid lands in the partition of its
// auction, so a join of bids with auctions is local to a task. Field
// names are Nexmark's; dateTime and expires are event times in
// milliseconds since the epoch (JSON numbers).
//
//	person  {"id","name","emailAddress","creditCard","city","state","dateTime","extra"}
//	auction {"id","itemName","description","initialBid","reserve","dateTime","expires","seller","category","extra"}
//	bid     {"auction","bidder","price","channel","url","dateTime","extra"}
//
// # Queries and outputs
//
// Each query writes one topic, keys decimal unless said, values JSON of the
// row type named. Append outputs are checked as multisets (every row exactly
// once), upsert outputs (tables) by the last value per key.
//
//	q0   append  key auction        Q0Row: the bid's auction, bidder, price, dateTime, extra
//	q1   append  key auction        Q1Row: q0 with price·0.908 exactly, to 3 decimals
//	q2   append  key auction        Q2Row: bids on auctions whose id is a multiple of 123
//	q3   upsert  key auction        Q3Row: category-10 auctions of sellers in OR, ID, CA
//	q4   upsert  key category       Q4Row: the average of the auctions' highest in-time bid
//	q5   append  key window start   Q5Row: the auctions with the most bids per 10 s hop window (2 s slide)
//	q7   append  key window end     Q7Row: the bids at the highest price of each 10 s window
//	q8   append  key person id      Q8Row: persons with an auction in the 10 s window they registered in
//	q11  append  key bidder         Q11Row: bid sessions (10 s gap), end = last bid + gap
//	q18  upsert  key bidder/auction Bid: the latest bid per bidder and auction
//	q19  upsert  key auction        []Q19Row: the 10 highest bids, ranked
//	q20  append  key auction        Q20Row: bids joined with their category-10 auction
//
// Where the SQL leaves a choice open, the queries and the oracle make the
// same one: q18 keeps the later-arriving of two bids with equal times, q19
// ranks the earlier of two equal prices first, q7 follows the SQL's
// BETWEEN (a bid exactly at a window's end belongs to that window too).
// nexmark-flink's q7 selects price into the bidder column and the other
// way round; Q7Row does not.
package nexmark
