package sinkfile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink"
)

// Participant is a sink.Participant on a directory: tmp/ for files being
// written, prepared/ and committed/ with a file per transaction id.
type Participant[K, V any] struct {
	dir string
	ks  serde.Serde[K]
	vs  serde.Serde[V]
}

var _ sink.Participant[string, string] = (*Participant[string, string])(nil)

// NewParticipant opens (creating if missing) the participant in dir, whose
// records are stored encoded with ks and vs.
func NewParticipant[K, V any](dir string, ks serde.Serde[K], vs serde.Serde[V]) (*Participant[K, V], error) {
	if ks == nil || vs == nil {
		return nil, errors.New("sinkfile: a participant needs a key and a value serde")
	}
	for _, sub := range []string{"tmp", "prepared", "committed"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("sinkfile: %w", err)
		}
	}
	return &Participant[K, V]{dir: dir, ks: ks, vs: vs}, nil
}

func (p *Participant[K, V]) path(state, xid string) string { return filepath.Join(p.dir, state, xid) }

// Prepare writes records to prepared/xid, durable before it returns. An id
// already prepared or committed is refused: ids are never reused.
func (p *Participant[K, V]) Prepare(ctx context.Context, xid string, records []sink.Record[K, V]) error {
	if err := validName(xid, sink.MaxXIDLength); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, state := range []string{"prepared", "committed"} {
		if _, err := os.Stat(p.path(state, xid)); err == nil {
			return fmt.Errorf("sinkfile: transaction %s is already %s", xid, state)
		}
	}
	b, err := encode(p.ks, p.vs, records)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(p.dir, "tmp"), p.path("prepared", xid), b); err != nil {
		return fmt.Errorf("sinkfile: prepare %s: %w", xid, err)
	}
	return nil
}

// CommitPrepared renames prepared/xid into committed/.
func (p *Participant[K, V]) CommitPrepared(ctx context.Context, xid string) error {
	if err := validName(xid, sink.MaxXIDLength); err != nil {
		return err
	}
	if err := os.Rename(p.path("prepared", xid), p.path("committed", xid)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sinkfile: commit %s: %w", xid, sink.ErrNotPrepared)
		}
		return fmt.Errorf("sinkfile: commit %s: %w", xid, err)
	}
	// The rename is durable once both directories are.
	return errors.Join(syncDir(filepath.Join(p.dir, "committed")), syncDir(filepath.Join(p.dir, "prepared")))
}

// RollbackPrepared removes prepared/xid.
func (p *Participant[K, V]) RollbackPrepared(ctx context.Context, xid string) error {
	if err := validName(xid, sink.MaxXIDLength); err != nil {
		return err
	}
	if err := os.Remove(p.path("prepared", xid)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sinkfile: roll back %s: %w", xid, sink.ErrNotPrepared)
		}
		return fmt.Errorf("sinkfile: roll back %s: %w", xid, err)
	}
	return syncDir(filepath.Join(p.dir, "prepared"))
}

// Prepared lists the prepared ids that start with prefix.
func (p *Participant[K, V]) Prepared(ctx context.Context, prefix string) ([]string, error) {
	return p.list("prepared", prefix)
}

func (p *Participant[K, V]) list(state, prefix string) ([]string, error) {
	es, err := os.ReadDir(filepath.Join(p.dir, state))
	if err != nil {
		return nil, fmt.Errorf("sinkfile: %w", err)
	}
	var out []string
	for _, e := range es {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Committed returns every committed record: what a reader of the store
// sees, transactions in id order.
func (p *Participant[K, V]) Committed() ([]sink.Record[K, V], error) {
	xids, err := p.list("committed", "")
	if err != nil {
		return nil, err
	}
	slices.Sort(xids)
	var out []sink.Record[K, V]
	for _, xid := range xids {
		b, err := os.ReadFile(p.path("committed", xid))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sinkfile: %w", err)
		}
		recs, err := decode(p.ks, p.vs, b)
		if err != nil {
			return nil, fmt.Errorf("sinkfile: committed %s: %w", xid, err)
		}
		out = append(out, recs...)
	}
	return out, nil
}

// PreparedCount is how many transactions are prepared (any prefix).
func (p *Participant[K, V]) PreparedCount() (int, error) {
	xids, err := p.list("prepared", "")
	return len(xids), err
}
