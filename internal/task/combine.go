package task

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
)

// Combining a count's repartition records (exec.Node.Combine), the local
// half of Flink's local-global aggregation: when the task folds updates,
// the count downstream forwards at most one update per key and commit, so
// the records it counts need not cross the repartition topic one by one.
// The sink keeps, per key of the open transaction, how many records it
// got, and writes at the flush one record per key with that number in
// HeaderCount: the value of the key's first record and the timestamp and
// headers of its last. A count adds the number (exec.Weight); so it
// reaches the counts it would have reached, from far fewer records. Only
// where the task folds (and so not in a plan that uses event time, whose
// records carry watermarks that a delay would move), as folding itself.
//
// What a combiner holds belongs to the open transaction, as a stage does:
// a unit's additions are undone with it (Mark, Rollback), an abort drops
// them all, the flush writes them, and their bytes count against the
// memory budget.

// combined is what a combiner holds for one key.
type combined struct {
	key     string
	value   []byte
	headers []exec.Header
	ts      int64
	n       int64
}

// combineUndo is what a unit changed: a key it added (fresh), or the
// timestamp and headers a key had before.
type combineUndo struct {
	i       int
	fresh   bool
	ts      int64
	headers []exec.Header
}

// entryBytes is what a combiner's entry costs beside its key and value:
// the map's slot and the entry, for the memory budget.
const entryBytes = 128

// combining is what the task asks of a combining sink's combiner: the
// methods of *combiner (an interface so that the negative controls of its
// tests can break one).
type combining interface {
	add(key, value []byte, hs []exec.Header, ts int64, limit int) error
	Mark()
	Rollback()
	take(send func(e *combined) error) (saved int64, err error)
	drop()
	held() int
}

// combiner holds a combining sink's records of the open transaction.
type combiner struct {
	byKey   map[string]int // index in entries
	entries []combined
	undo    []combineUndo
	bytes   int
}

func newCombiner() *combiner { return &combiner{byKey: map[string]int{}} }

// held estimates the bytes held, for the memory budget.
func (c *combiner) held() int { return c.bytes }

// add counts a record of the sink: key and value are the encoding's,
// carved from the task's arena, and copied when kept. It refuses a record
// that would make its key's record, as the flush writes it, larger than
// limit bytes: the record's key and headers, the value of the key's first
// record and the count (ErrRecordTooLarge, the record's error here rather
// than the flush's, which would fail the transaction at every replay).
func (c *combiner) add(key, value []byte, hs []exec.Header, ts int64, limit int) error {
	i, ok := c.byKey[string(key)]
	size := len(key) + len(value) + len(exec.HeaderCount) + 8
	if ok {
		size += len(c.entries[i].value) - len(value)
	}
	for _, h := range hs {
		size += len(h.Key) + len(h.Value)
	}
	if size > limit {
		return fmt.Errorf("%w: %d bytes with its count, the limit is %d", ErrRecordTooLarge, size, limit)
	}
	if ok {
		e := &c.entries[i]
		c.undo = append(c.undo, combineUndo{i: i, ts: e.ts, headers: e.headers})
		e.n++
		e.ts, e.headers = ts, hs
		return nil
	}
	k := string(key)
	c.byKey[k] = len(c.entries)
	c.undo = append(c.undo, combineUndo{i: len(c.entries), fresh: true})
	// Cloned as it is: an empty value stays non-nil, not a tombstone.
	c.entries = append(c.entries, combined{key: k, value: append(value[:0:0], value...), headers: hs, ts: ts, n: 1})
	c.bytes += entryBytes + len(key) + len(value)
	return nil
}

// Mark begins a unit.
func (c *combiner) Mark() { c.undo = c.undo[:0] }

// Rollback undoes what the unit added.
func (c *combiner) Rollback() {
	for i := len(c.undo) - 1; i >= 0; i-- {
		u := c.undo[i]
		e := &c.entries[u.i]
		if u.fresh {
			delete(c.byKey, e.key)
			c.bytes -= entryBytes + len(e.key) + len(e.value)
			c.entries = c.entries[:u.i]
			continue
		}
		e.n--
		e.ts, e.headers = u.ts, u.headers
	}
	c.undo = c.undo[:0]
}

// take hands each key's record to send, in the order the keys came, and
// holds nothing after; it returns how many records fewer it sent than it
// was given.
func (c *combiner) take(send func(e *combined) error) (saved int64, err error) {
	for i := range c.entries {
		if err := send(&c.entries[i]); err != nil {
			return 0, err
		}
		saved += c.entries[i].n - 1
	}
	c.drop()
	return saved, nil
}

// drop forgets everything held.
func (c *combiner) drop() {
	clear(c.byKey)
	clear(c.entries)
	c.entries, c.undo, c.bytes = c.entries[:0], c.undo[:0], 0
}

// combine has the sink ni hold its record to combine, or reports false
// if it does not combine it: the sink combines nothing, or the record is
// a tombstone (which a count skips, so it goes out as it came).
func (ni *nodeInst) combine(k, v []byte, hs []exec.Header, ts int64) (bool, error) {
	if ni.comb == nil || v == nil {
		return false, nil
	}
	if err := ni.comb.add(k, v, hs, ts, ni.t.cfg.MaxRecordBytes); err != nil {
		return true, fmt.Errorf("%s: %w", ni.topic, err)
	}
	return true, nil
}

// flushCombined writes every combining sink's records, one per key, each
// with the number of records it stands for; the records the transaction
// saved count in Combined once it commits.
func (t *Task) flushCombined() error {
	for _, ni := range t.combiners {
		saved, err := ni.comb.take(func(e *combined) error {
			hs := append(e.headers[:len(e.headers):len(e.headers)], exec.Header{Key: exec.HeaderCount, Value: binary.BigEndian.AppendUint64(nil, uint64(e.n))})
			return ni.Send(ni.topic, false, []byte(e.key), e.value, hs, e.ts)
		})
		if err != nil {
			return fmt.Errorf("processor: task %s: %s: %w", t.id, ni.node.Name, err)
		}
		t.saved += saved
	}
	return nil
}
