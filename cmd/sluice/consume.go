package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { subcommands = append(subcommands, newConsumeCmd) }

// consumeOptions are the settings of one `sluice consume`.
type consumeOptions struct {
	topics          []string
	format          string // text or json
	fromBeginning   bool
	max             int64
	idle            time.Duration
	group           string
	readUncommitted bool
	follow          bool
}

// bounded reports whether consume stops at the end offsets it saw at start.
func (o consumeOptions) bounded() bool { return !o.follow && o.max == 0 }

func newConsumeCmd() *cobra.Command {
	var o consumeOptions
	cmd := &cobra.Command{
		Use:   "consume TOPIC [TOPIC...] [--from-beginning] [--format text|json] [--max N] [--idle-timeout D] [--follow]",
		Short: "Print the records of topics, as KEY<TAB>VALUE lines or JSON",
		Long: `consume prints the records of the topics, one a line, in each partition's
order. It reads with read_committed, as sluice itself does: records of an
open transaction appear once it commits, those of an aborted one never
(--read-uncommitted shows both).

It starts at the end, printing only new records, or at the start with
--from-beginning (with --group: at the group's committed offsets, if any).
Without --follow or --max it stops at the end: once it has read every
partition up to the end offset (read_committed: the last stable offset)
the partition had when consume started; so without --from-beginning it
prints nothing. With --max N it stops after N records, waiting for them;
with --follow it waits for new records until SIGINT. --idle-timeout D
stops it after D without a record, in every mode.

--format text (the default) prints KEY<TAB>VALUE, the bytes as they are
(an absent key, as an empty one, prints as nothing). --format json prints
one object per record:

  {"topic":"t","partition":0,"offset":7,"timestamp":1767225600000,
   "key":"k","value":"v","headers":[{"key":"h","value":"x"}]}

timestamp is in milliseconds since the epoch. key, value and a header's
value are JSON strings when the bytes are UTF-8 and null when absent;
bytes that are not UTF-8 are given instead as key_base64, value_base64
(standard base64), and the field without the suffix is left out: a
reader tells them apart by the field's name.

--group ID consumes as a member of the consumer group ID and commits the
offsets of the records printed; by default no group and no commit.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.topics = args
			if o.format != "text" && o.format != "json" {
				return fmt.Errorf("consume: --format %q: want text or json", o.format)
			}
			if o.max < 0 || o.idle < 0 {
				return errors.New("consume: --max and --idle-timeout must not be negative")
			}
			cfg, err := loadAppConfig(cmd, "sluice-consume")
			if err != nil {
				return fmt.Errorf("consume: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runConsume(ctx, cmd.OutOrStdout(), cfg.clientOpts(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "text", "output `format`: text (KEY<TAB>VALUE) or json (one object per record)")
	f.BoolVar(&o.fromBeginning, "from-beginning", false, "start at the earliest offsets (default: only new records)")
	f.Int64Var(&o.max, "max", 0, "stop after this many records, waiting for them (0: no limit)")
	f.DurationVar(&o.idle, "idle-timeout", 0, "stop after this long without a record (0: never)")
	f.StringVar(&o.group, "group", "", "consume as this consumer group `ID` and commit its offsets (default: no group)")
	f.BoolVar(&o.readUncommitted, "read-uncommitted", false, "also print records of open and aborted transactions")
	f.BoolVar(&o.follow, "follow", false, "wait for new records until SIGINT, instead of stopping at the end")
	addClientFlags(cmd)
	return cmd
}

// consumeBounds are the offsets a bounded consume starts from and stops at.
type consumeBounds struct {
	next map[string]map[int32]int64 // the next offset to read
	end  map[string]map[int32]int64
}

// done reports whether every partition was read up to its end.
func (b consumeBounds) done() bool {
	for t, ps := range b.end {
		for p, end := range ps {
			if b.next[t][p] < end {
				return false
			}
		}
	}
	return true
}

func (b consumeBounds) advance(r *kgo.Record) {
	if ps := b.next[r.Topic]; ps != nil && ps[r.Partition] < r.Offset+1 {
		ps[r.Partition] = r.Offset + 1
	}
}

// bounds reads where a bounded consume starts and stops.
func bounds(ctx context.Context, adm *kadm.Client, o consumeOptions) (consumeBounds, error) {
	list := adm.ListCommittedOffsets // the last stable offsets
	if o.readUncommitted {
		list = adm.ListEndOffsets
	}
	ends, err := list(ctx, o.topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return consumeBounds{}, err
	}
	starts := ends
	if o.fromBeginning {
		if starts, err = adm.ListStartOffsets(ctx, o.topics...); err == nil {
			err = starts.Error()
		}
		if err != nil {
			return consumeBounds{}, err
		}
	}
	b := consumeBounds{next: map[string]map[int32]int64{}, end: map[string]map[int32]int64{}}
	ends.Each(func(lo kadm.ListedOffset) {
		if b.end[lo.Topic] == nil {
			b.end[lo.Topic], b.next[lo.Topic] = map[int32]int64{}, map[int32]int64{}
		}
		b.end[lo.Topic][lo.Partition] = lo.Offset
		if s, ok := starts.Lookup(lo.Topic, lo.Partition); ok {
			b.next[lo.Topic][lo.Partition] = s.Offset
		}
	})
	if o.group != "" {
		committed, err := adm.FetchOffsetsForTopics(ctx, o.group, o.topics...)
		if err != nil {
			return consumeBounds{}, err
		}
		committed.Each(func(r kadm.OffsetResponse) {
			if r.At >= 0 && b.next[r.Topic] != nil {
				b.next[r.Topic][r.Partition] = r.At
			}
		})
	}
	return b, nil
}

// runConsume prints the records of o.topics on w until o says to stop or ctx
// ends (a normal stop).
func runConsume(ctx context.Context, w io.Writer, clientOpts []kgo.Opt, o consumeOptions) error {
	reset := kgo.NewOffset().AtEnd()
	if o.fromBeginning {
		reset = kgo.NewOffset().AtStart()
	}
	isolation := kgo.ReadCommitted()
	if o.readUncommitted {
		isolation = kgo.ReadUncommitted()
	}
	opts := append(clientOpts,
		kgo.ConsumeTopics(o.topics...),
		kgo.ConsumeResetOffset(reset),
		kgo.FetchIsolationLevel(isolation),
		// A transaction's marker is often a partition's last offset:
		// a bounded consume sees it to know it reached the end.
		kgo.KeepControlRecords(),
	)
	if o.group != "" {
		// The offsets of printed records only, committed every few
		// seconds, on a rebalance and when consume leaves the group.
		opts = append(opts, kgo.ConsumerGroup(o.group), kgo.AutoCommitMarks())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	defer cl.Close()
	if err := checkTopicsExist(ctx, "consume", cl, o.topics...); err != nil {
		return err
	}
	var b consumeBounds
	if o.bounded() {
		bctx, cancel := context.WithTimeout(ctx, topicTimeout)
		b, err = bounds(bctx, kadm.NewClient(cl), o)
		cancel()
		if err != nil {
			return fmt.Errorf("consume: offsets of %v: %w", o.topics, err)
		}
	}

	out := bufio.NewWriter(w)
	defer out.Flush()
	var line []byte
	printed := int64(0)
	lastRecord := time.Now()
	for {
		if o.max > 0 && printed >= o.max || o.bounded() && b.done() {
			break
		}
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if o.idle > 0 {
			pctx, cancel = context.WithDeadline(ctx, lastRecord.Add(o.idle))
		}
		n := -1
		if o.max > 0 {
			n = int(o.max - printed)
		}
		fetches := cl.PollRecords(pctx, n)
		cancel()
		if ctx.Err() != nil {
			break // SIGINT or SIGTERM
		}
		if o.idle > 0 && fetches.NumRecords() == 0 && time.Since(lastRecord) >= o.idle {
			break
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				ferr = errors.Join(ferr, fmt.Errorf("consume: %s/%d: %w", t, p, err))
			}
		})
		if ferr != nil {
			return ferr
		}
		var marks []*kgo.Record
		fetches.EachRecord(func(r *kgo.Record) {
			b.advance(r)
			if r.Attrs.IsControl() {
				return
			}
			lastRecord = time.Now()
			printed++
			marks = append(marks, r)
			if o.format == "json" {
				line = appendRecordJSON(line[:0], r)
			} else {
				line = append(append(append(line[:0], r.Key...), '\t'), r.Value...)
			}
			out.Write(append(line, '\n'))
		})
		if err := out.Flush(); err != nil {
			return fmt.Errorf("consume: %w", err)
		}
		if o.group != "" {
			cl.MarkCommitRecords(marks...)
		}
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	if o.group != "" {
		// Close would commit too, but silently: a failed commit is the
		// user's to know.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), topicTimeout)
		defer cancel()
		if err := cl.CommitMarkedOffsets(cctx); err != nil {
			return fmt.Errorf("consume: commit group %s: %w", o.group, err)
		}
	}
	return nil
}

// appendRecordJSON appends r as consume's JSON object (see consume's help).
func appendRecordJSON(b []byte, r *kgo.Record) []byte {
	b = append(b, `{"topic":`...)
	b = appendJSONString(b, r.Topic)
	b = fmt.Appendf(b, `,"partition":%d,"offset":%d,"timestamp":%d,`, r.Partition, r.Offset, r.Timestamp.UnixMilli())
	b = appendBytesField(b, "key", r.Key)
	b = append(b, ',')
	b = appendBytesField(b, "value", r.Value)
	b = append(b, `,"headers":[`...)
	for i, h := range r.Headers {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		var key []byte
		if h.Key != "" {
			key = []byte(h.Key)
		} else {
			key = []byte{} // an empty header key is "", not null
		}
		b = appendBytesField(b, "key", key)
		b = append(b, ',')
		b = appendBytesField(b, "value", h.Value)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendBytesField appends "name":"text" when v is UTF-8, "name":null when it
// is nil, and "name_base64":"..." otherwise.
func appendBytesField(b []byte, name string, v []byte) []byte {
	switch {
	case v == nil:
		return append(append(append(b, '"'), name...), `":null`...)
	case utf8.Valid(v):
		b = append(append(append(b, '"'), name...), `":`...)
		return appendJSONString(b, string(v))
	default:
		b = append(append(append(b, '"'), name...), `_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, v)
		return append(b, '"')
	}
}

func appendJSONString(b []byte, s string) []byte {
	j, _ := json.Marshal(s) // a string always marshals
	return append(b, j...)
}
