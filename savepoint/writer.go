package savepoint

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"os"
	"path"
	"path/filepath"
	"strconv"

	"github.com/sluice-streams/sluice/store"
)

// Errors of the package; each is wrapped with the file or directory and
// the problem.
var (
	// ErrExists: the savepoint directory exists already. A savepoint
	// never overwrites one.
	ErrExists = errors.New("savepoint: directory exists")
	// ErrIncomplete: the directory lacks its manifest or a store the
	// manifest lists.
	ErrIncomplete = errors.New("savepoint: incomplete")
	// ErrCorrupt: a store's contents do not match the manifest's count
	// or checksum, or its files cannot be read.
	ErrCorrupt = errors.New("savepoint: corrupt")
	// ErrFormat: the manifest is not one this sluice reads (another
	// format version, or not JSON of the manifest's shape).
	ErrFormat = errors.New("savepoint: unsupported format")
)

// Writer builds a savepoint in a temporary sibling of its directory;
// Commit renames it into place. Not safe for concurrent use.
type Writer struct {
	dir, tmp string
	open     []*PartWriter
	done     bool
}

// Create starts a savepoint that Commit will place at dir. dir must not
// exist (ErrExists); its parent is created if needed.
func Create(dir string) (*Writer, error) {
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("%w: %s (choose another; a savepoint never overwrites)", ErrExists, dir)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := filepath.Join(parent, "."+filepath.Base(filepath.Clean(dir))+".partial-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	return &Writer{dir: filepath.Clean(dir), tmp: tmp}, nil
}

// Dir is where Commit places the savepoint.
func (w *Writer) Dir() string { return w.dir }

// TaskID is a task's directory name, "<sub-topology>_<partition>", as in a
// state directory.
func TaskID(sub int, partition int32) string {
	return strconv.Itoa(sub) + "_" + strconv.FormatInt(int64(partition), 10)
}

// PartWriter is one store copy being written: fill Engine, then Close.
type PartWriter struct {
	eng       *store.Pebble
	rel       string
	partition int32
	closed    bool
}

// Part opens an empty Pebble store for partition of store in task (TaskID)
// of application app.
func (w *Writer) Part(app, task, storeName string, partition int32) (*PartWriter, error) {
	rel := PartDir(app, task, storeName)
	dir := filepath.Join(w.tmp, filepath.FromSlash(rel))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	eng, err := store.OpenPebble(dir)
	if err != nil {
		return nil, fmt.Errorf("savepoint: open %s: %w", dir, err)
	}
	pw := &PartWriter{eng: eng, rel: rel, partition: partition}
	w.open = append(w.open, pw)
	return pw, nil
}

// Engine is the store to fill (Apply with the changelog offsets it
// reaches, as restore does).
func (pw *PartWriter) Engine() *store.Pebble { return pw.eng }

// Close flushes the store to disk, counts and checksums it, and closes it;
// the Part it returns goes into the manifest's Store.Parts (ChangelogEnd is
// the caller's to set).
func (pw *PartWriter) Close() (Part, error) {
	p := Part{Partition: pw.partition, Dir: pw.rel}
	if pw.closed {
		return p, fmt.Errorf("savepoint: %s closed twice", pw.rel)
	}
	pw.closed = true
	defer pw.eng.Close()
	if err := pw.eng.Flush(); err != nil {
		return p, fmt.Errorf("savepoint: %s: %w", pw.rel, err)
	}
	sum := newSum()
	if err := pw.eng.Range(nil, nil, func(k, v []byte) error {
		sum.add(k, v)
		p.Records++
		return nil
	}); err != nil {
		return p, fmt.Errorf("savepoint: %s: %w", pw.rel, err)
	}
	p.Checksum = sum.String()
	return p, pw.eng.Close()
}

// Staging is the directory the savepoint is written in until Commit
// renames it to Dir: where Adopt finds the copies others wrote.
func (w *Writer) Staging() string { return w.tmp }

// PartDir is the directory, relative to the savepoint (slash-separated),
// of the copy of store in task (TaskID) of application app: what Part
// fills and what Adopt takes.
func PartDir(app, task, storeName string) string { return path.Join(app, task, storeName) }

// Adopt takes the Pebble store that another process wrote at rel
// (PartDir) under Staging, e.g. a checkpoint of a task's store: it counts
// and checksums it, read-only, and returns its Part (ChangelogEnd is the
// caller's to set). Safe to call concurrently for different parts.
func (w *Writer) Adopt(rel string, partition int32) (Part, error) {
	p := Part{Partition: partition, Dir: rel}
	dir := filepath.Join(w.tmp, filepath.FromSlash(rel))
	eng, err := store.OpenPebbleReadOnly(dir)
	if err != nil {
		return p, fmt.Errorf("savepoint: adopt %s: %w", rel, err)
	}
	defer eng.Close()
	sum := newSum()
	if err := eng.Range(nil, nil, func(k, v []byte) error {
		sum.add(k, v)
		p.Records++
		return nil
	}); err != nil {
		return p, fmt.Errorf("savepoint: adopt %s: %w", rel, err)
	}
	p.Checksum = sum.String()
	return p, nil
}

// Discard removes what was written at rel (PartDir) under Staging: a copy
// that is not adopted, so that Part can write that store afresh.
func (w *Writer) Discard(rel string) error {
	if err := os.RemoveAll(filepath.Join(w.tmp, filepath.FromSlash(rel))); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	return nil
}

// Commit writes m as the manifest (Format set, Records of each store summed
// from its parts) and renames the savepoint into place. Every Part must be
// closed. After an error the Writer is aborted.
func (w *Writer) Commit(m *Manifest) (err error) {
	if w.done {
		return errors.New("savepoint: writer already committed or aborted")
	}
	defer func() {
		if err != nil {
			w.Abort()
		}
	}()
	for _, pw := range w.open {
		if !pw.closed {
			return fmt.Errorf("savepoint: part %s was not closed", pw.rel)
		}
	}
	m.Format = Format
	for i := range m.Stores {
		m.Stores[i].Records = 0
		for _, p := range m.Stores[i].Parts {
			m.Stores[i].Records += p.Records
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("savepoint: manifest: %w", err)
	}
	if err := writeSynced(filepath.Join(w.tmp, ManifestFile), append(b, '\n')); err != nil {
		return err
	}
	if err := syncDir(w.tmp); err != nil {
		return err
	}
	// Rename never replaces a directory that is not empty, and a
	// directory created meanwhile is refused as at Create.
	if _, err := os.Lstat(w.dir); err == nil {
		return fmt.Errorf("%w: %s (created while the savepoint was written)", ErrExists, w.dir)
	}
	if err := os.Rename(w.tmp, w.dir); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	w.done = true
	return syncDir(filepath.Dir(w.dir))
}

// Abort removes what was written; the savepoint directory never appears.
// It is a no-op after Commit.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	for _, pw := range w.open {
		if !pw.closed {
			pw.closed = true
			pw.eng.Close()
		}
	}
	os.RemoveAll(w.tmp)
}

func writeSynced(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("savepoint: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("savepoint: %w", err)
	}
	return f.Close()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("savepoint: sync %s: %w", dir, err)
	}
	return nil
}

// checksum is Part.Checksum's hash.
type checksum struct {
	h   hash.Hash
	buf []byte
}

func newSum() *checksum { return &checksum{h: sha256.New()} }

func (c *checksum) add(k, v []byte) {
	c.buf = binary.AppendUvarint(c.buf[:0], uint64(len(k)))
	c.h.Write(c.buf)
	c.h.Write(k)
	c.buf = binary.AppendUvarint(c.buf[:0], uint64(len(v)))
	c.h.Write(c.buf)
	c.h.Write(v)
}

func (c *checksum) String() string { return "sha256:" + hex.EncodeToString(c.h.Sum(nil)) }
