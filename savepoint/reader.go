package savepoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-streams/sluice/store"
)

// Savepoint is an opened savepoint directory: its manifest, checked for
// format and completeness; Verify checks the stores' contents.
type Savepoint struct {
	dir string
	m   Manifest
}

// Open reads the savepoint in dir: its manifest must be of this Format and
// every store part it lists must exist. It writes nothing.
func Open(dir string) (*Savepoint, error) {
	mf := filepath.Join(dir, ManifestFile)
	b, err := os.ReadFile(mf)
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return nil, fmt.Errorf("savepoint: %w", serr)
		}
		return nil, fmt.Errorf("%w: %s: no %s (not a savepoint, or one whose writing did not finish)", ErrIncomplete, dir, ManifestFile)
	}
	if err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	var probe struct {
		Format *int `json:"format"`
	}
	if err := json.Unmarshal(b, &probe); err != nil || probe.Format == nil {
		return nil, fmt.Errorf("%w: %s: not a savepoint manifest (%v)", ErrFormat, mf, orMissing(err, "no format field"))
	}
	if *probe.Format != Format {
		return nil, fmt.Errorf("%w: %s: format %d, this sluice reads format %d (written by another version of sluice)", ErrFormat, mf, *probe.Format, Format)
	}
	sp := &Savepoint{dir: dir}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp.m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, mf, err)
	}
	if sp.m.Application == "" {
		return nil, fmt.Errorf("%w: %s: no application", ErrFormat, mf)
	}
	for _, s := range sp.m.Stores {
		seen := map[int32]bool{}
		for _, p := range s.Parts {
			if seen[p.Partition] {
				return nil, fmt.Errorf("%w: %s: store %q lists partition %d twice", ErrFormat, mf, s.Name, p.Partition)
			}
			seen[p.Partition] = true
			d := sp.partDir(p)
			if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
				return nil, fmt.Errorf("%w: %s: store %q partition %d: %s is missing", ErrIncomplete, dir, s.Name, p.Partition, d)
			}
		}
		for p := int32(0); p < s.Partitions; p++ {
			if !seen[p] {
				return nil, fmt.Errorf("%w: %s: store %q has %d partitions but the manifest lists no copy of partition %d", ErrIncomplete, mf, s.Name, s.Partitions, p)
			}
		}
	}
	return sp, nil
}

func orMissing(err error, what string) any {
	if err != nil {
		return err
	}
	return what
}

// Dir is the savepoint's directory.
func (s *Savepoint) Dir() string { return s.dir }

// Manifest is the savepoint's manifest.
func (s *Savepoint) Manifest() *Manifest { return &s.m }

func (s *Savepoint) partDir(p Part) string { return filepath.Join(s.dir, filepath.FromSlash(p.Dir)) }

// Verify reads every store copy and checks its count and checksum against
// the manifest: ErrCorrupt names the copy's directory and what differs.
func (s *Savepoint) Verify() error {
	for _, st := range s.m.Stores {
		for _, p := range st.Parts {
			if err := s.each(st.Name, p, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// Each calls fn for every entry of partition's copy of the store, in key
// order, and then checks the copy's count and checksum (ErrCorrupt: fn may
// have seen entries of a damaged copy, so act on them only after Each
// returned nil).
func (s *Savepoint) Each(storeName string, partition int32, fn func(key, value []byte) error) error {
	st := s.m.Store(storeName)
	if st == nil {
		return fmt.Errorf("savepoint: %s: no store %q", s.dir, storeName)
	}
	for _, p := range st.Parts {
		if p.Partition == partition {
			return s.each(storeName, p, fn)
		}
	}
	return fmt.Errorf("savepoint: %s: store %q has no partition %d", s.dir, storeName, partition)
}

func (s *Savepoint) each(storeName string, p Part, fn func(key, value []byte) error) error {
	d := s.partDir(p)
	eng, err := store.OpenPebbleReadOnly(d)
	if err != nil {
		return fmt.Errorf("%w: store %q partition %d: %s: %v", ErrCorrupt, storeName, p.Partition, d, err)
	}
	defer eng.Close()
	sum := newSum()
	var n int64
	var ferr error
	err = eng.Range(nil, nil, func(k, v []byte) error {
		sum.add(k, v)
		n++
		if fn != nil {
			if err := fn(k, v); err != nil {
				ferr = err
				return err
			}
		}
		return nil
	})
	if ferr != nil {
		return ferr
	}
	if err != nil {
		return fmt.Errorf("%w: store %q partition %d: %s: %v", ErrCorrupt, storeName, p.Partition, d, err)
	}
	if n != p.Records || sum.String() != p.Checksum {
		return fmt.Errorf("%w: store %q partition %d: %s holds %d records with checksum %s; the manifest says %d with %s", ErrCorrupt, storeName, p.Partition, d, n, sum, p.Records, p.Checksum)
	}
	return nil
}
