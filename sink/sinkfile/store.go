package sinkfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink"
)

// Store is a sink.Idempotent on a directory. Per sink and topic,
// <sink>~<topic>/offsets holds the next offset of each partition (the
// commit point of every Write) and <sink>~<topic>/<partition>/<first
// offset> the segments of records. Segments at or past the stored offset
// are leftovers of a Write that crashed before its commit point: the next
// Write of the partition removes them, and reads ignore them.
type Store[K, V any] struct {
	dir string
	ks  serde.Serde[K]
	vs  serde.Serde[V]
	mu  sync.Mutex // with the file lock: one Write at a time, across processes too
}

var _ sink.Idempotent[string, string] = (*Store[string, string])(nil)

// NewStore opens (creating if missing) the store in dir, whose records are
// stored encoded with ks and vs.
func NewStore[K, V any](dir string, ks serde.Serde[K], vs serde.Serde[V]) (*Store[K, V], error) {
	if ks == nil || vs == nil {
		return nil, errors.New("sinkfile: a store needs a key and a value serde")
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, fmt.Errorf("sinkfile: %w", err)
	}
	return &Store[K, V]{dir: dir, ks: ks, vs: vs}, nil
}

// lock takes the store's lock, in this process and across processes.
func (s *Store[K, V]) lock() (func(), error) {
	s.mu.Lock()
	f, err := os.OpenFile(filepath.Join(s.dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("sinkfile: lock: %w", err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		s.mu.Unlock()
	}, nil
}

func (s *Store[K, V]) base(sinkName, topic string) (string, error) {
	if err := validName(sinkName, 249); err != nil {
		return "", err
	}
	if err := validName(topic, 249); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, sinkName+"~"+topic), nil
}

func readOffsets(base string) (map[int32]int64, error) {
	b, err := os.ReadFile(filepath.Join(base, "offsets"))
	if errors.Is(err, fs.ErrNotExist) {
		return map[int32]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sinkfile: %w", err)
	}
	out := map[int32]int64{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("sinkfile: offsets: %w", err)
	}
	return out, nil
}

// Offsets returns the stored next offsets of sinkName reading topic.
func (s *Store[K, V]) Offsets(ctx context.Context, sinkName, topic string) (map[int32]int64, error) {
	base, err := s.base(sinkName, topic)
	if err != nil {
		return nil, err
	}
	return readOffsets(base) // replaced by a rename: never seen half written
}

// Write stores the records at or past the stored offset of their
// partition, and then next, atomically: a crash leaves the store as before
// the Write or as after it.
func (s *Store[K, V]) Write(ctx context.Context, sinkName, topic string, records []sink.Record[K, V], next map[int32]int64) error {
	base, err := s.base(sinkName, topic)
	if err != nil {
		return err
	}
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	stored, err := readOffsets(base)
	if err != nil {
		return err
	}
	byPart := map[int32][]sink.Record[K, V]{}
	idx := map[int32][]int{} // each kept record's index in records
	for i, r := range records {
		if o, ok := stored[r.Partition]; ok && r.Offset < o {
			continue // stored already: a replay, or another writer's
		}
		byPart[r.Partition] = append(byPart[r.Partition], r)
		idx[r.Partition] = append(idx[r.Partition], i)
	}
	// Encoded first, so that a rejected record leaves no segment behind.
	encoded := map[int32][]byte{}
	for p, recs := range byPart {
		b, err := encode(s.ks, s.vs, recs)
		if rej, ok := err.(*sink.RejectedError); ok {
			rej.Index = idx[p][rej.Index]
		}
		if err != nil {
			return err
		}
		encoded[p] = b
	}
	for p, recs := range byPart {
		dir := filepath.Join(base, strconv.Itoa(int(p)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("sinkfile: %w", err)
		}
		if err := removeFrom(dir, stored[p]); err != nil {
			return err
		}
		b := encoded[p]
		if err := writeFile(filepath.Join(s.dir, "tmp"), filepath.Join(dir, segmentName(recs[0].Offset)), b); err != nil {
			return fmt.Errorf("sinkfile: write: %w", err)
		}
	}
	merged := map[int32]int64{}
	for p, o := range stored {
		merged[p] = o
	}
	for p, o := range next {
		merged[p] = max(merged[p], o)
	}
	b, err := json.Marshal(merged)
	if err != nil {
		return fmt.Errorf("sinkfile: %w", err)
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return fmt.Errorf("sinkfile: %w", err)
	}
	// The commit point.
	if err := writeFile(filepath.Join(s.dir, "tmp"), filepath.Join(base, "offsets"), b); err != nil {
		return fmt.Errorf("sinkfile: write offsets: %w", err)
	}
	return nil
}

func segmentName(first int64) string { return fmt.Sprintf("%020d", first) }

// segments lists the first offsets of dir's segments, in order.
func segments(dir string) ([]int64, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sinkfile: %w", err)
	}
	var out []int64
	for _, e := range es {
		if o, err := strconv.ParseInt(e.Name(), 10, 64); err == nil {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out, nil
}

// removeFrom removes the segments of dir that start at or past from: the
// leftovers of a Write that did not reach its commit point.
func removeFrom(dir string, from int64) error {
	firsts, err := segments(dir)
	if err != nil {
		return err
	}
	for _, o := range firsts {
		if o >= from {
			if err := os.Remove(filepath.Join(dir, segmentName(o))); err != nil {
				return fmt.Errorf("sinkfile: %w", err)
			}
		}
	}
	return nil
}

// Records returns what a reader sees of sinkName reading topic: every
// stored record below the stored offsets, by partition and offset.
func (s *Store[K, V]) Records(sinkName, topic string) ([]sink.Record[K, V], error) {
	base, err := s.base(sinkName, topic)
	if err != nil {
		return nil, err
	}
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	stored, err := readOffsets(base)
	if err != nil {
		return nil, err
	}
	parts := make([]int32, 0, len(stored))
	for p := range stored {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	var out []sink.Record[K, V]
	for _, p := range parts {
		dir := filepath.Join(base, strconv.Itoa(int(p)))
		firsts, err := segments(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, o := range firsts {
			if o >= stored[p] {
				break
			}
			b, err := os.ReadFile(filepath.Join(dir, segmentName(o)))
			if err != nil {
				return nil, fmt.Errorf("sinkfile: %w", err)
			}
			recs, err := decode(s.ks, s.vs, b)
			if err != nil {
				return nil, fmt.Errorf("sinkfile: segment %s/%d: %w", dir, o, err)
			}
			for _, r := range recs {
				if r.Offset < stored[p] {
					out = append(out, r)
				}
			}
		}
	}
	return out, nil
}
