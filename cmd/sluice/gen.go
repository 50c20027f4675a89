package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
)

func init() { subcommands = append(subcommands, newGenCmd) }

// genUsesKey reports whether gen uses the instance setting key: only
// bootstrap.servers and the security keys apply to a producer. The others
// stay accepted, because the generator of docker-compose.yml shares its
// environment (SLUICE_*) with the instances, but out of --help.
func genUsesKey(key string) bool {
	return key == keyBrokers || strings.HasPrefix(key, "security.") || strings.HasPrefix(key, "sasl.") || strings.HasPrefix(key, "ssl.")
}

// genOptions are the settings of one `sluice gen billing` run.
type genOptions struct {
	topic    string
	rate     float64 // records per second; 0: as fast as the producer takes them
	count    int64   // records to produce; 0: until the context ends
	accounts int
	seed     uint64
	badRatio float64 // share of malformed and zero-amount records
	dupRatio float64 // share of re-sent copies of an earlier bill
	report   time.Duration
}

func (o genOptions) validate() error {
	var errs []error
	if o.topic == "" {
		errs = append(errs, errors.New("gen: --topic must not be empty"))
	}
	if o.rate < 0 {
		errs = append(errs, fmt.Errorf("gen: --rate %v must not be negative", o.rate))
	}
	if o.count < 0 {
		errs = append(errs, fmt.Errorf("gen: --count %d must not be negative", o.count))
	}
	if o.accounts < 1 {
		errs = append(errs, fmt.Errorf("gen: --accounts %d must be at least 1", o.accounts))
	}
	if o.badRatio < 0 || o.dupRatio < 0 || o.badRatio+o.dupRatio > 1 {
		errs = append(errs, fmt.Errorf("gen: --bad-ratio %v and --dup-ratio %v must be between 0 and 1 and add up to at most 1", o.badRatio, o.dupRatio))
	}
	return errors.Join(errs...)
}

func newGenCmd() *cobra.Command {
	billing, _ := examples.Get("billing")
	var o genOptions
	cmd := &cobra.Command{
		Use:   "gen billing [--brokers host:port,...] [--topic bills] [--rate 100] [--count 0]",
		Short: "Produce input for a built-in example: billing's JSON bills at a steady rate, or Nexmark's events (gen nexmark)",
		Long: `gen produces the billing example's input: JSON bills (bill_id, account,
amount_cents, ts) over --accounts accounts, a few of them hot, keyed by the
account, by the bill id or not at all, so that the example's repartition by
account has work. ts is the wall clock at production.

--dup-ratio re-sends an earlier bill unchanged, as a retrying upstream would
(billing drops it); --bad-ratio adds malformed records and bills for zero
cents, which billing sends to its dead-letter topic. Both are 0 by default.

Bill ids are bill-<seed in hex>-<n>. --seed 0 (the default) picks a seed at random
and prints it, so that a restarted generator does not re-send ids that
billing would drop as duplicates; a given seed reproduces every field but ts.

gen runs until --count records are produced (0: until SIGINT or SIGTERM),
then waits for every record to be acknowledged.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "billing" {
				return fmt.Errorf("gen: no generator for %q (have [billing nexmark])", args[0])
			}
			if err := o.validate(); err != nil {
				return err
			}
			cfg, err := loadAppConfig(cmd, "sluice-gen")
			if err != nil {
				return fmt.Errorf("gen: %w", err)
			}
			if o.seed == 0 {
				o.seed = rand.Uint64()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cl, err := kgo.NewClient(append(cfg.clientOpts(),
				kgo.DefaultProduceTopic(o.topic),
				kgo.ProducerLinger(5*time.Millisecond),
			)...)
			if err != nil {
				return fmt.Errorf("gen: %w", err)
			}
			defer cl.Close()
			if err := checkTopicsExist(ctx, "gen", cl, o.topic); err != nil {
				return err
			}
			return runGen(ctx, cmd.OutOrStdout(), cl, newBillGen(o), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.topic, "topic", billing.Defaults(nil)["input"], "`topic` to produce to, which must exist (billing's input)")
	f.Float64Var(&o.rate, "rate", 100, "records per second; 0: as fast as the producer takes them")
	f.Int64Var(&o.count, "count", 0, "stop after this many records; 0: run until SIGINT or SIGTERM")
	f.IntVar(&o.accounts, "accounts", 1000, "number of distinct accounts")
	f.Uint64Var(&o.seed, "seed", 0, "seed of the generated bills; 0: a random one")
	f.Float64Var(&o.badRatio, "bad-ratio", 0, "share of malformed records and zero-cent bills, which billing dead-letters")
	f.Float64Var(&o.dupRatio, "dup-ratio", 0, "share of re-sent copies of earlier bills, which billing deduplicates")
	f.DurationVar(&o.report, "report", 10*time.Second, "print progress this often; 0: only at the end")
	addAppFlags(cmd)
	for _, k := range appKeys {
		if k.flag != "" && !genUsesKey(k.key) {
			_ = f.MarkHidden(k.flag)
		}
	}
	cmd.AddCommand(newGenNexmarkCmd())
	return cmd
}

// genKind is what the generator meant a record to be.
type genKind int

const (
	genBill genKind = iota
	genDuplicate
	genMalformed
	genZeroAmount
	genKinds
)

var genKindNames = [genKinds]string{"bills", "duplicates", "malformed", "zero-amount"}

// genRecord is one generated record.
type genRecord struct {
	Key, Value []byte
	Kind       genKind
}

// billGen makes the billing example's input. Apart from the event time,
// which the caller passes in, its output is a function of the seed alone.
type billGen struct {
	examples.BillDraws
	rng      *rand.Rand
	prefix   string
	badRatio float64
	dupRatio float64
	n        int        // bills made, the source of their ids
	nbad     int        // bad records made, the source of their ids
	last     *genRecord // the latest good bill, re-sent as a duplicate
}

func newBillGen(o genOptions) *billGen {
	rng := rand.New(rand.NewPCG(o.seed, 0x62696c6c))
	return &billGen{
		BillDraws: examples.BillDraws{Rand: rng, Accounts: max(o.accounts, 1)},
		rng:       rng,
		prefix:    fmt.Sprintf("%x", o.seed),
		badRatio:  o.badRatio,
		dupRatio:  o.dupRatio,
	}
}

func (g *billGen) bill(kind genKind, id string, amount, ts int64) genRecord {
	b := examples.Bill{BillID: id, Account: g.Account(), AmountCents: amount, TS: ts}
	v, err := json.Marshal(b)
	if err != nil {
		panic(err) // strings and integers always marshal
	}
	return genRecord{Key: g.Key(b.Account, b.BillID), Value: v, Kind: kind}
}

// next returns the next record, with event time ts (Unix milliseconds).
func (g *billGen) next(ts int64) genRecord {
	r := g.rng.Float64()
	switch {
	case r < g.badRatio:
		g.nbad++
		id := fmt.Sprintf("bad-%s-%d", g.prefix, g.nbad)
		if g.rng.IntN(2) == 0 {
			return g.bill(genZeroAmount, id, 0, ts)
		}
		return g.malformed(id, ts)
	case r < g.badRatio+g.dupRatio && g.last != nil:
		dup := *g.last
		dup.Kind = genDuplicate
		return dup
	}
	g.n++
	rec := g.bill(genBill, fmt.Sprintf("bill-%s-%d", g.prefix, g.n), g.Amount(), ts)
	g.last = &rec
	return rec
}

// malformed is a record that billing's strict decoder refuses.
func (g *billGen) malformed(id string, ts int64) genRecord {
	var v string
	switch g.rng.IntN(4) {
	case 0:
		v = "not json " + id
	case 1:
		v = fmt.Sprintf(`{"bill_id":%q,"account":"acct-0`, id) // truncated
	case 2:
		v = fmt.Sprintf(`{"bill_id":%q,"amount_cents":100,"ts":%d}`, id, ts) // no account
	default:
		v = fmt.Sprintf(`{"bill_id":%q,"account":"acct-00000","amount_cents":"100","ts":%d}`, id, ts) // a string amount
	}
	return genRecord{Key: []byte(id), Value: []byte(v), Kind: genMalformed}
}

// genFlushGrace bounds how long records already handed to the client may
// take to be delivered after a stop, so that a broker gone for good does not
// hang SIGTERM.
const genFlushGrace = 30 * time.Second

// runGen produces g's records with cl at o.rate until o.count records are
// produced or ctx ends, then waits until every record is acknowledged. An
// ended ctx is a normal stop; a failed or undelivered record is an error.
func runGen(ctx context.Context, w io.Writer, cl *kgo.Client, g *billGen, o genOptions) error {
	fmt.Fprintf(w, "gen: producing billing input to %s (seed %d, rate %s, count %s)\n", o.topic, o.seed,
		orUnbounded(o.rate > 0, fmt.Sprintf("%g/s", o.rate)), orUnbounded(o.count > 0, fmt.Sprint(o.count)))
	// Records are produced under pctx, not ctx: kgo fails the buffered
	// records of a canceled context, and a stop should deliver them.
	pctx, pcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer pcancel()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(genFlushGrace, pcancel) })
	defer stopGrace()

	var delivered atomic.Int64
	errc := make(chan error, 1)
	promise := func(_ *kgo.Record, err error) {
		if err == nil {
			delivered.Add(1)
			return
		}
		select {
		case errc <- err:
		default:
		}
	}
	var sent int64
	var kinds [genKinds]int64
	start := time.Now()
	lastReport := start
	summary := func() string {
		s := fmt.Sprintf("%d records to %s in %s (", sent, o.topic, time.Since(start).Round(time.Millisecond))
		for k, n := range kinds {
			if k > 0 {
				s += ", "
			}
			s += fmt.Sprintf("%s %d", genKindNames[k], n)
		}
		return s + ")"
	}
	const tick = 20 * time.Millisecond
	ticker := time.NewTicker(tick)
	defer ticker.Stop()

	var err error
loop:
	for o.count == 0 || sent < o.count {
		// The records due by now: the rate's share of the time since
		// start, or a batch when unthrottled.
		due := sent + 1000
		if o.rate > 0 {
			due = int64(o.rate * time.Since(start).Seconds())
		}
		if o.count > 0 {
			due = min(due, o.count)
		}
		for ; sent < due && ctx.Err() == nil; sent++ {
			now := time.Now()
			r := g.next(now.UnixMilli())
			kinds[r.Kind]++
			cl.Produce(pctx, &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: now}, promise)
		}
		if o.report > 0 && time.Since(lastReport) >= o.report {
			lastReport = time.Now()
			fmt.Fprintln(w, "gen:", summary())
		}
		if o.rate > 0 {
			select {
			case err = <-errc:
				break loop
			case <-ctx.Done():
				break loop
			case <-ticker.C:
			}
			continue
		}
		select {
		case err = <-errc:
			break loop
		case <-ctx.Done():
			break loop
		default:
		}
	}
	if err != nil {
		return fmt.Errorf("gen: produce to %s: %w", o.topic, err)
	}
	ferr := cl.Flush(pctx)
	if n := sent - delivered.Load(); n > 0 || ferr != nil {
		select {
		case err = <-errc:
		default:
			err = ferr
		}
		return fmt.Errorf("gen: %d of %d records to %s not delivered: %w", n, sent, o.topic, err)
	}
	fmt.Fprintln(w, "gen: done:", summary())
	return nil
}

func orUnbounded(ok bool, s string) string {
	if ok {
		return s
	}
	return "unbounded"
}
