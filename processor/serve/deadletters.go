package serve

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/processor"
)

// GET /deadletters: the latest records of the application's dead-letter
// topics (processor.App.DeadLetterTopics), read with a client of the app's
// own (App.NewClient) at read_committed: a dead letter of an aborted
// transaction was never a dead letter (invariant 6 writes them inside the
// transaction). Reads are bounded in count and time, since the page asks
// every few seconds.
const (
	defaultDeadLetters = 50
	maxDeadLetters     = 500
	deadLetterTimeout  = 5 * time.Second
)

// deadLetter is one record of GET /deadletters. Bytes that are not UTF-8
// are given in base64 with *_base64 set.
type deadLetter struct {
	Topic       string             `json:"topic"`
	Partition   int32              `json:"partition"`
	Offset      int64              `json:"offset"`
	Timestamp   int64              `json:"timestamp"` // ms since the epoch
	Key         *string            `json:"key"`       // null: no key
	KeyBase64   bool               `json:"key_base64,omitempty"`
	Value       *string            `json:"value"`
	ValueBase64 bool               `json:"value_base64,omitempty"`
	Headers     []deadLetterHeader `json:"headers"`
	// From the sluice.* headers: the error and where the record came from.
	Class   string            `json:"class,omitempty"`
	Message string            `json:"message,omitempty"`
	Origin  *deadLetterOrigin `json:"origin,omitempty"`
}

type deadLetterHeader struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Base64 bool   `json:"base64,omitempty"`
}

type deadLetterOrigin struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

// deadLettersAnswer is the JSON of GET /deadletters.
type deadLettersAnswer struct {
	Topics  []string     `json:"topics"`
	Records []deadLetter `json:"records"` // newest first
	// Complete is false when the read stopped at its time bound before
	// reaching the end of every partition.
	Complete bool   `json:"complete"`
	Error    string `json:"error,omitempty"` // a topic that could not be listed, say
}

type deadLetters struct {
	app     *processor.App
	timeout time.Duration
}

func (d *deadLetters) serve(w http.ResponseWriter, r *http.Request) {
	limit := defaultDeadLetters
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > maxDeadLetters {
			badRequest(w, fmt.Errorf("limit: want 1..%d, got %q", maxDeadLetters, s))
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), d.timeout)
	defer cancel()
	ans, err := d.read(ctx, limit)
	if err != nil {
		unavailable(w, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// read returns the latest limit records over the dead-letter topics: from
// each partition its last records (every one of them may be among the
// latest), merged newest first.
func (d *deadLetters) read(ctx context.Context, limit int) (deadLettersAnswer, error) {
	ans := deadLettersAnswer{Topics: d.app.DeadLetterTopics(), Records: []deadLetter{}, Complete: true}
	cl, err := d.app.NewClient()
	if err != nil {
		return ans, fmt.Errorf("serve: dead letters: client: %w", err)
	}
	adm := kadm.NewClient(cl)
	starts, err1 := adm.ListStartOffsets(ctx, ans.Topics...)
	ends, err2 := adm.ListCommittedOffsets(ctx, ans.Topics...) // the last stable offsets
	cl.Close()
	if err1 != nil || err2 != nil {
		return ans, fmt.Errorf("serve: dead letters: list offsets: %w", firstErr(err1, err2))
	}
	from := map[string]map[int32]kgo.Offset{}
	last := map[string]map[int32]int64{} // the last offset to read
	var errs []string
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", o.Topic, o.Err))
			return
		}
		start := int64(0)
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && s.Err == nil {
			start = s.Offset
		}
		if o.Offset <= start {
			return
		}
		if from[o.Topic] == nil {
			from[o.Topic], last[o.Topic] = map[int32]kgo.Offset{}, map[int32]int64{}
		}
		// A transactional topic has a marker after each transaction: twice
		// limit offsets hold limit records when none aborted.
		from[o.Topic][o.Partition] = kgo.NewOffset().At(max(start, o.Offset-2*int64(limit)))
		last[o.Topic][o.Partition] = o.Offset - 1
	})
	sort.Strings(errs)
	ans.Error = strings.Join(errs, "; ")
	if len(from) == 0 {
		return ans, nil
	}
	// Control records are kept so that a partition whose last records are
	// a transaction marker is seen to be read to its end.
	cl, err = d.app.NewClient(kgo.ConsumePartitions(from), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return ans, fmt.Errorf("serve: dead letters: client: %w", err)
	}
	defer cl.Close()
	left := 0
	for _, ps := range last {
		left += len(ps)
	}
	for left > 0 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := last[r.Topic][r.Partition]
			if !ok || r.Offset > end {
				return
			}
			if r.Offset == end {
				delete(last[r.Topic], r.Partition)
				left--
			}
			if !r.Attrs.IsControl() {
				ans.Records = append(ans.Records, toDeadLetter(r))
			}
		})
	}
	ans.Complete = left == 0
	sort.Slice(ans.Records, func(i, j int) bool {
		a, b := ans.Records[i], ans.Records[j]
		if a.Timestamp != b.Timestamp {
			return a.Timestamp > b.Timestamp
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Offset > b.Offset
	})
	if len(ans.Records) > limit {
		ans.Records = ans.Records[:limit]
	}
	return ans, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// text is b as a JSON string, or its base64 when it is not UTF-8.
func text(b []byte) (string, bool) {
	if utf8.Valid(b) {
		return string(b), false
	}
	return base64.StdEncoding.EncodeToString(b), true
}

func toDeadLetter(r *kgo.Record) deadLetter {
	dl := deadLetter{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Headers: []deadLetterHeader{}}
	if r.Key != nil {
		k, b64 := text(r.Key)
		dl.Key, dl.KeyBase64 = &k, b64
	}
	if r.Value != nil {
		v, b64 := text(r.Value)
		dl.Value, dl.ValueBase64 = &v, b64
	}
	var origin deadLetterOrigin
	hasOrigin := false
	for _, h := range r.Headers {
		v, b64 := text(h.Value)
		dl.Headers = append(dl.Headers, deadLetterHeader{Key: h.Key, Value: v, Base64: b64})
		s := string(h.Value)
		switch h.Key {
		case exec.HeaderErrorClass:
			dl.Class = s
		case exec.HeaderErrorMessage:
			dl.Message = s
		case exec.HeaderSourceTopic:
			origin.Topic, hasOrigin = s, true
		case exec.HeaderSourcePartition:
			if p, err := strconv.ParseInt(s, 10, 32); err == nil {
				origin.Partition = int32(p)
			}
		case exec.HeaderSourceOffset:
			origin.Offset, _ = strconv.ParseInt(s, 10, 64)
		case exec.HeaderSourceTimestamp:
			origin.Timestamp, _ = strconv.ParseInt(s, 10, 64)
		}
	}
	if hasOrigin {
		dl.Origin = &origin
	}
	return dl
}
