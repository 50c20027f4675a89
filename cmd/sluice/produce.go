package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/processor"
)

func init() { subcommands = append(subcommands, newProduceCmd) }

// addClientFlags gives a command that is a plain Kafka client (produce,
// consume) the brokers and security flags of run, and no other instance
// flag: consume's --idle-timeout means something else than run's.
func addClientFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("brokers", strings.Join(processor.Defaults().BootstrapServers, ","), "bootstrap.servers: comma-separated `host:port` list")
	addSecurityFlags(f)
}

// produceOptions are the settings of one `sluice produce`.
type produceOptions struct {
	topic     string
	keySep    string // "": records have no key
	headers   bool   // each line starts with k=v,... and a TAB
	partition int32  // -1: the key's partition (murmur2), or sticky without a key
	maxLine   int
}

// produceDefaultMaxLine keeps a line, with the record's and the batch's
// overhead, under Kafka's default message.max.bytes (1048588).
const produceDefaultMaxLine = 1_000_000

func newProduceCmd() *cobra.Command {
	o := produceOptions{partition: -1}
	cmd := &cobra.Command{
		Use:   "produce TOPIC [--key-separator SEP] [--headers] [--partition N]",
		Short: "Produce lines of stdin to a topic, one record each",
		Long: `produce reads lines from stdin and produces each as one record to TOPIC,
until stdin ends; then it waits until every record is acknowledged and
prints how many it produced (on stderr). A line is:

  [HEADERS<TAB>][KEY<SEP>]VALUE

- With --key-separator SEP, the key is the text before the first SEP and
  the value the rest; a line without SEP is an error. Without it, records
  have no key (null) and the whole line is the value.
- With --headers, each line starts with its headers and a TAB:
  k=v pairs separated by commas (a=1,b=2), the key of each up to its
  first "=" (a value may hold "=", no part may hold a comma or a TAB); an
  empty prefix (the line starts with the TAB) is a record without headers.
  It is kafka-console-producer's parse.headers format with "=" for ":".
- --partition N sends every record to partition N; by default a keyed
  record goes to its key's partition (murmur2, as Kafka's Java client and
  sluice's own records), an unkeyed one to any.

The newline (and a carriage return before it) is not part of the record;
an empty line is a record with an empty value. Every line must be UTF-8
and at most --max-line-bytes long: any other stops produce with an error
naming the line's number, after the lines before it were delivered.
Typing lines by hand, end them with Ctrl-D (end of input): Ctrl-C stops
produce at once, without waiting for the last records.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.topic = args[0]
			if o.maxLine < 1 {
				return fmt.Errorf("produce: --max-line-bytes %d must be at least 1", o.maxLine)
			}
			if o.partition < -1 {
				return fmt.Errorf("produce: --partition %d must not be negative", o.partition)
			}
			cfg, err := loadAppConfig(cmd, "sluice-produce")
			if err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			opts := append(cfg.clientOpts(),
				kgo.DefaultProduceTopic(o.topic),
				kgo.ProducerLinger(5*time.Millisecond),
				// Room for a line of maxLine bytes with its record
				// and batch overhead.
				kgo.ProducerBatchMaxBytes(int32(min(o.maxLine+4096, 1<<30))),
			)
			if o.partition >= 0 {
				opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			defer cl.Close()
			if err := checkTopicsExist(cmd.Context(), "produce", cl, o.topic); err != nil {
				return err
			}
			n, err := runProduce(cmd.Context(), cmd.InOrStdin(), cl, o)
			fmt.Fprintf(cmd.ErrOrStderr(), "produced %d record%s to %s\n", n, plural(n), o.topic)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.keySep, "key-separator", "", "split each line at the first `SEP` into key and value (default: no key)")
	f.BoolVar(&o.headers, "headers", false, "each line starts with headers k=v,k=v and a TAB")
	f.Int32Var(&o.partition, "partition", -1, "produce every record to this partition (default: by key)")
	f.IntVar(&o.maxLine, "max-line-bytes", produceDefaultMaxLine, "longest line accepted, in bytes")
	addClientFlags(cmd)
	return cmd
}

// parseLine makes the record of one line (without its newline).
func parseLine(o produceOptions, line []byte) (*kgo.Record, error) {
	if !utf8.Valid(line) {
		return nil, errors.New("not valid UTF-8")
	}
	s := string(line)
	r := &kgo.Record{Partition: o.partition}
	if o.headers {
		prefix, rest, ok := strings.Cut(s, "\t")
		if !ok {
			return nil, errors.New("no TAB after the headers (--headers)")
		}
		if prefix != "" {
			for kv := range strings.SplitSeq(prefix, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return nil, fmt.Errorf("header %q: want key=value", kv)
				}
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
			}
		}
		s = rest
	}
	if o.keySep != "" {
		k, v, ok := strings.Cut(s, o.keySep)
		if !ok {
			return nil, fmt.Errorf("no key separator %q", o.keySep)
		}
		r.Key, s = []byte(k), v
	}
	r.Value = []byte(s)
	return r, nil
}

// runProduce produces a record per line of in until in ends or a line is
// refused, then waits until every record produced is acknowledged. It
// returns how many were, and the first error: the line's, or the
// producer's.
func runProduce(ctx context.Context, in io.Reader, cl *kgo.Client, o produceOptions) (int64, error) {
	var (
		acked   atomic.Int64
		failed  atomic.Pointer[error]
		lineErr error
	)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
			return
		}
		acked.Add(1)
	}
	sc := bufio.NewScanner(in)
	// Room for the longest line, its carriage return and newline: a
	// longer one stops Scan with ErrTooLong.
	sc.Buffer(make([]byte, 0, min(o.maxLine+2, 64<<10)), o.maxLine+2)
	n := 0
	for sc.Scan() {
		n++
		if failed.Load() != nil || ctx.Err() != nil {
			break
		}
		line := sc.Bytes()
		if len(line) > o.maxLine {
			lineErr = fmt.Errorf("produce: line %d: longer than %d bytes (--max-line-bytes)", n, o.maxLine)
			break
		}
		r, err := parseLine(o, line)
		if err != nil {
			lineErr = fmt.Errorf("produce: line %d: %w", n, err)
			break
		}
		cl.Produce(ctx, r, promise)
	}
	if err := sc.Err(); err != nil && lineErr == nil {
		if errors.Is(err, bufio.ErrTooLong) {
			lineErr = fmt.Errorf("produce: line %d: longer than %d bytes (--max-line-bytes)", n+1, o.maxLine)
		} else {
			lineErr = fmt.Errorf("produce: read stdin: %w", err)
		}
	}
	ferr := cl.Flush(ctx)
	if p := failed.Load(); p != nil {
		return acked.Load(), errors.Join(lineErr, fmt.Errorf("produce: to %s: %w", o.topic, *p))
	}
	if ferr != nil {
		return acked.Load(), errors.Join(lineErr, fmt.Errorf("produce: to %s: %w", o.topic, ferr))
	}
	return acked.Load(), lineErr
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
