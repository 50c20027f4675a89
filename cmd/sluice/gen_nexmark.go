package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples/nexmark"
)

// genNexmarkOptions are the settings of one `sluice gen nexmark` run.
type genNexmarkOptions struct {
	events     int64
	seed       uint64
	rate       int
	baseTime   int64
	partitions int32
	topics     nexmark.Topics
	report     time.Duration
}

func (o genNexmarkOptions) validate() error {
	var errs []error
	if o.events < 1 {
		errs = append(errs, fmt.Errorf("gen nexmark: --events %d must be at least 1", o.events))
	}
	if o.rate < 1 {
		errs = append(errs, fmt.Errorf("gen nexmark: --rate %d must be at least 1", o.rate))
	}
	if o.partitions < 1 {
		errs = append(errs, fmt.Errorf("gen nexmark: --partitions %d must be at least 1", o.partitions))
	}
	if o.baseTime < 0 {
		errs = append(errs, fmt.Errorf("gen nexmark: --base-time %d must not be negative", o.baseTime))
	}
	for _, t := range []string{o.topics.Person, o.topics.Auction, o.topics.Bid} {
		if t == "" {
			errs = append(errs, errors.New("gen nexmark: topic names must not be empty"))
			break
		}
	}
	return errors.Join(errs...)
}

func newGenNexmarkCmd() *cobra.Command {
	var o genNexmarkOptions
	cmd := &cobra.Command{
		Use:   "nexmark --events N [--seed 0] [--rate 10000] [--partitions 3] [--brokers host:port,...]",
		Short: "Produce the Nexmark benchmark's persons, auctions and bids for the nexmark-q* examples",
		Long: `gen nexmark produces --events Nexmark events (of every 50: 1 person, 3
auctions, 46 bids, with Nexmark's hot sellers, bidders and auctions) to
three topics, creating those missing with --partitions partitions:

  nexmark-person   key: id           value: {"id","name","emailAddress","creditCard","city","state","dateTime","extra"}
  nexmark-auction  key: id           value: {"id","itemName","description","initialBid","reserve","dateTime","expires","seller","category","extra"}
  nexmark-bid      key: auction id   value: {"auction","bidder","price","channel","url","dateTime","extra"}

Keys are decimal ids; dateTime and expires are event times in milliseconds
since the epoch: --base-time plus one event every 1/--rate seconds (Nexmark's
default rate is 10,000 events a second of event time). The events are a
function of --seed, --rate and --base-time alone. Records are produced as fast
as the brokers take them, stamped with the wall clock.

The three topics must have the same partition count: bids are keyed by their
auction so that the queries joining them with auctions (q4, q20) find both in
one task without a repartition.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			cfg, err := loadAppConfig(cmd, "sluice-gen")
			if err != nil {
				return fmt.Errorf("gen nexmark: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cl, err := kgo.NewClient(append(cfg.clientOpts(), kgo.ProducerLinger(5*time.Millisecond))...)
			if err != nil {
				return fmt.Errorf("gen nexmark: %w", err)
			}
			defer cl.Close()
			if err := ensureNexmarkTopics(ctx, cmd.OutOrStdout(), kadm.NewClient(cl), o); err != nil {
				return err
			}
			return runGenNexmark(ctx, cmd.OutOrStdout(), cl, o)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.events, "events", 0, "number of events to produce (required)")
	f.Uint64Var(&o.seed, "seed", 0, "seed of the generated events")
	f.IntVar(&o.rate, "rate", nexmark.DefaultRate, "events per second of event time (Nexmark's firstEventRate)")
	f.Int64Var(&o.baseTime, "base-time", nexmark.DefaultBaseTime, "event time of the first event, `ms` since the epoch")
	f.Int32Var(&o.partitions, "partitions", 3, "partitions of the topics this command creates")
	f.StringVar(&o.topics.Person, "person-topic", nexmark.PersonTopic, "`topic` of the persons")
	f.StringVar(&o.topics.Auction, "auction-topic", nexmark.AuctionTopic, "`topic` of the auctions")
	f.StringVar(&o.topics.Bid, "bid-topic", nexmark.BidTopic, "`topic` of the bids")
	f.DurationVar(&o.report, "report", 10*time.Second, "print progress this often; 0: only at the end")
	_ = cmd.MarkFlagRequired("events")
	addAppFlags(cmd)
	for _, k := range appKeys {
		if k.flag != "" && !genUsesKey(k.key) {
			_ = f.MarkHidden(k.flag)
		}
	}
	return cmd
}

// ensureNexmarkTopics creates the topics that are missing and checks that
// all three have one partition count.
func ensureNexmarkTopics(ctx context.Context, w io.Writer, adm *kadm.Client, o genNexmarkOptions) error {
	ctx, cancel := context.WithTimeout(ctx, topicTimeout)
	defer cancel()
	names := []string{o.topics.Person, o.topics.Auction, o.topics.Bid}
	td, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("gen nexmark: list topics: %w", err)
	}
	for _, n := range names {
		if td.Has(n) {
			continue
		}
		resp, err := adm.CreateTopic(ctx, o.partitions, -1, nil, n)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("gen nexmark: create topic %s: %w", n, err)
		}
		fmt.Fprintf(w, "gen: created topic %s (%d partitions)\n", n, o.partitions)
	}
	if td, err = adm.ListTopics(ctx, names...); err != nil {
		return fmt.Errorf("gen nexmark: list topics: %w", err)
	}
	counts := map[string]int{}
	for _, n := range names {
		counts[n] = len(td[n].Partitions)
	}
	if counts[names[0]] != counts[names[1]] || counts[names[1]] != counts[names[2]] {
		return fmt.Errorf("gen nexmark: the topics' partition counts differ (%v): bids are keyed by auction to be co-partitioned with the auctions, which needs equal counts", counts)
	}
	return nil
}

// runGenNexmark produces o.events events and waits until every one is
// acknowledged. An ended ctx stops it early with an error: a partial
// Nexmark input is not the seed's.
func runGenNexmark(ctx context.Context, w io.Writer, cl *kgo.Client, o genNexmarkOptions) error {
	g, err := nexmark.NewGenerator(nexmark.Config{Seed: o.seed, Rate: o.rate, BaseTime: o.baseTime, Events: o.events})
	if err != nil {
		return fmt.Errorf("gen nexmark: %w", err)
	}
	fmt.Fprintf(w, "gen: producing %d Nexmark events to %s, %s, %s (seed %d, %d events/s of event time)\n",
		o.events, o.topics.Person, o.topics.Auction, o.topics.Bid, o.seed, o.rate)
	var delivered atomic.Int64
	var failed atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
			return
		}
		delivered.Add(1)
	}
	var kinds [3]int64
	start, lastReport := time.Now(), time.Now()
	summary := func() string {
		el := time.Since(start)
		return fmt.Sprintf("%d events (persons %d, auctions %d, bids %d) in %s, %.0f events/s",
			kinds[0]+kinds[1]+kinds[2], kinds[0], kinds[1], kinds[2], el.Round(time.Millisecond), float64(delivered.Load())/el.Seconds())
	}
	for {
		e, ok := g.Next()
		if !ok {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("gen nexmark: stopped after %d of %d events: %w", g.Count()-1, o.events, ctx.Err())
		}
		if p := failed.Load(); p != nil {
			return fmt.Errorf("gen nexmark: produce: %w", *p)
		}
		kinds[e.Kind()]++
		cl.Produce(ctx, e.Record(o.topics, time.Now()), promise)
		if o.report > 0 && time.Since(lastReport) >= o.report {
			lastReport = time.Now()
			fmt.Fprintln(w, "gen:", summary())
		}
	}
	fctx, cancel := context.WithTimeout(ctx, genFlushGrace)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		return fmt.Errorf("gen nexmark: %d of %d events not delivered: %w", o.events-delivered.Load(), o.events, err)
	}
	if p := failed.Load(); p != nil {
		return fmt.Errorf("gen nexmark: produce: %w", *p)
	}
	fmt.Fprintln(w, "gen: done:", summary())
	return nil
}
