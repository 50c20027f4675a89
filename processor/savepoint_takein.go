package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/statedir"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/savepoint"
	"github.com/sluice-streams/sluice/store"
)

// Taking a savepoint's store copies in directly at a start from a
// savepoint (DESIGN.md "Starting from a savepoint", step 5): the seed
// writes every entry of a store copy, unchanged (same partition count, no
// migration), to the same partition of the new application's changelog,
// and records in the same transaction, under seedStoresKey on the control
// topic, the offset of the last record it wrote to each such partition.
// Once that transaction committed, the changelog's committed records up to
// that offset L are exactly the copy's entries, so the copy with its
// changelog checkpoint set to L is what a restore up to L would build:
// an instance opening the task, with no local copy of the store and
// nothing written to the partition since the seed, links the
// copy's sstables into its state directory (store.CopyDir), sets the
// checkpoint to L, renames it into place, and the usual restore reads the
// changelog from L+1 (the seed's commit marker and whatever came after).
//
// Crashes: the copy is built under <state.dir>/<app>/.takein and renamed
// into place whole, so a crash leaves either no store (the next open takes
// it in again, or restores) or the store at L (the next open restores past
// L). Never ahead of its changelog checkpoint: its entries are the
// committed records up to L. A crash during the seed leaves no
// seedStoresKey record (it is in the seed's transaction), hence no take-in.

// seedStoresKey is the key of the record, on the savepoint control topic
// and in the seed's transaction, that lists the store copies written
// verbatim to the changelogs (a seedStores as JSON).
const seedStoresKey = "sluice.savepoint.seeded-stores"

// seedStores lists the store copies a seed wrote verbatim.
type seedStores struct {
	Savepoint string      `json:"savepoint"`
	Stores    []seedStore `json:"stores"`
}

// seedStore is one store copy written verbatim to its changelog partition.
type seedStore struct {
	Store     string `json:"store"`
	Partition int32  `json:"partition"`
	// Dir and Checksum are the copy's in the savepoint's manifest: an
	// instance takes in only a copy its own savepoint directory holds
	// with the same checksum.
	Dir      string `json:"dir"`
	Checksum string `json:"checksum"`
	Records  int64  `json:"records"`
	// Last is the offset of the last record the seed wrote to the
	// partition: the checkpoint of the copy taken in.
	Last int64 `json:"last"`
}

// takeIns are the store copies an instance may take in, by task; each at
// most once per run.
type takeIns struct {
	dir string // the savepoint's directory
	mu  sync.Mutex
	by  map[task.ID]map[string]seedStore
}

// verbatim reports whether the seed writes store s of the savepoint
// unchanged to the same partitions: no migration, the same partition
// count.
func (a *App) verbatim(s *savepoint.Store) bool {
	spec, ok := a.plan.Stores[s.Name]
	return ok && spec.Source == "" && !spec.InMemory && a.plan.Migrations[s.Name] == nil &&
		s.Partitions == a.partitions[a.plan.StoreSub[s.Name]]
}

// setTakeIns keeps the copies of ss that sp holds unchanged, for the tasks
// to take in when they open.
func (a *App) setTakeIns(sp *savepoint.Savepoint, ss *seedStores) {
	if ss == nil || sp == nil || ss.Savepoint != sp.Manifest().ID {
		return
	}
	t := &takeIns{dir: sp.Dir(), by: map[task.ID]map[string]seedStore{}}
	for _, s := range ss.Stores {
		st := sp.Manifest().Store(s.Store)
		if st == nil || !a.verbatim(st) {
			continue
		}
		for _, p := range st.Parts {
			if p.Partition != s.Partition || p.Dir != s.Dir || p.Checksum != s.Checksum || p.Records != s.Records {
				continue
			}
			id := task.ID{Sub: a.plan.StoreSub[s.Store], Partition: s.Partition}
			if t.by[id] == nil {
				t.by[id] = map[string]seedStore{}
			}
			t.by[id][s.Store] = s
		}
	}
	a.spTakeIn = t
}

// seedStoresRecord is the seed's record of the copies it wrote verbatim:
// last holds the offset of the last record written to each changelog
// partition.
func (a *App) seedStoresRecord(sp *savepoint.Savepoint, last map[string]map[int32]int64) *seedStores {
	ss := &seedStores{Savepoint: sp.Manifest().ID}
	for _, s := range sp.Manifest().Stores {
		if !a.verbatim(&s) {
			continue
		}
		topic := names.Changelog(a.cfg.appID, s.Name)
		for _, p := range s.Parts {
			l, ok := last[topic][p.Partition]
			if !ok || p.Records == 0 {
				continue // nothing written: a restore has nothing to read either
			}
			ss.Stores = append(ss.Stores, seedStore{Store: s.Name, Partition: p.Partition, Dir: p.Dir, Checksum: p.Checksum, Records: p.Records, Last: l})
		}
	}
	return ss
}

func parseSeedStores(b []byte) (*seedStores, error) {
	var ss seedStores
	if err := json.Unmarshal(b, &ss); err != nil {
		return nil, err
	}
	return &ss, nil
}

// takeIn takes in the savepoint's copies of task id's stores that have no
// local copy, before the task opens them. It returns the records taken
// in. A copy it cannot take in is logged and left to the restore.
func (a *App) takeIn(ctx context.Context, adm *kadm.Client, id task.ID) int64 {
	t := a.spTakeIn
	if t == nil {
		return 0
	}
	t.mu.Lock()
	stores := t.by[id]
	delete(t.by, id)
	t.mu.Unlock()
	var n int64
	for name, s := range stores {
		dir := statedir.Store(a.dir, id.String(), name)
		if _, err := os.Lstat(dir); err == nil {
			continue // a local copy (a standby's, an earlier run's): restore as usual
		}
		// Only right after the seed: its commit marker at Last+1 ends the
		// partition. Once more was written, compaction may have removed
		// a tombstone past Last together with the entry it deleted, and
		// the copy would bring that entry back; a restore cannot.
		topic := names.Changelog(a.cfg.appID, name)
		if end, err := listOffset(ctx, adm.ListEndOffsets, topic, id.Partition); err != nil || end != s.Last+2 {
			a.log.Info("savepoint: the changelog moved on since the seed; restoring the store from it rather than taking the copy in",
				"task", id.String(), "store", name, "seed_last", s.Last, "end", end, "err", err)
			continue
		}
		start := time.Now()
		if err := a.takeInStore(t.dir, id, s, dir); err != nil {
			a.log.Warn("savepoint: cannot take the store copy in; restoring it from the changelog", "task", id.String(), "store", name, "err", err)
			continue
		}
		n += s.Records
		a.log.Info("savepoint: store copy taken in", "task", id.String(), "store", name, "records", s.Records, "checkpoint", s.Last, "took", time.Since(start).Round(time.Millisecond))
	}
	return n
}

// takeInCopy is store.CopyDir, a variable so that the crash test can
// stop the process in the middle of a take-in.
var takeInCopy = store.CopyDir

// takeInStore builds the copy of s under .takein and renames it to dir.
func (a *App) takeInStore(spDir string, id task.ID, s seedStore, dir string) (err error) {
	tmp := filepath.Join(a.dir, ".takein", id.String()+"-"+s.Store)
	// What a crash left here is not a store: start again.
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.MkdirAll(filepath.Dir(tmp), 0o755); err != nil {
		return err
	}
	if err := takeInCopy(filepath.Join(spDir, filepath.FromSlash(s.Dir)), tmp); err != nil {
		return err
	}
	eng, err := store.OpenPebble(tmp)
	if err != nil {
		return err
	}
	// The copy's own checkpoint is the old application's changelog
	// offset; the seed's is what this changelog holds.
	err = eng.Apply(nil, s.Last)
	if err == nil {
		err = eng.Sync() // durable before the rename that makes it the store
	}
	if cerr := eng.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	f, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Dir(dir), err)
	}
	defer f.Close()
	return f.Sync()
}
