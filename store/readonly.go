package store

import (
	"errors"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// OpenPebbleReadOnly opens the existing Pebble database in dir for reading
// only, for tools that inspect a stopped instance's state (package state):
// it creates nothing, replays the WAL into memory instead of flushing it,
// deletes no obsolete file and writes no OPTIONS file, so the directory's
// files are left as they were: Pebble reads through readOnlyFS, which
// refuses every change to the filesystem. Writes (Apply, Wipe) fail. A
// missing database is an error, never an empty store.
//
// It takes no Pebble LOCK (even flock-ing it rewrites nothing, but
// opening it for writing touches its time): the caller must exclude
// writers itself, as package state does with the application directory's
// lock.
func OpenPebbleReadOnly(dir string) (*Pebble, error) {
	c := pebble.NewCache(pebbleCacheSize)
	defer c.Unref()
	opts := &pebble.Options{
		FS:                          readOnlyFS{vfs.Default},
		Cache:                       c,
		ReadOnly:                    true,
		ErrorIfNotExists:            true,
		Logger:                      quietLogger{},
		EventListener:               &pebble.EventListener{DataCorruption: func(pebble.DataCorruptionInfo) {}},
		DisableAutomaticCompactions: true,
	}
	return openPebble(dir, opts)
}

// errReadOnly is readOnlyFS's refusal of any change.
var errReadOnly = errors.New("store: read-only filesystem")

// readOnlyFS is the filesystem a read-only Pebble sees: reads pass, every
// change is refused, and the directory lock is a no-op (see
// OpenPebbleReadOnly), so that nothing the reader does can write.
type readOnlyFS struct{ vfs.FS }

func (readOnlyFS) Create(string, vfs.DiskWriteCategory) (vfs.File, error) { return nil, errReadOnly }
func (readOnlyFS) Link(string, string) error                              { return errReadOnly }
func (readOnlyFS) OpenReadWrite(string, vfs.DiskWriteCategory, ...vfs.OpenOption) (vfs.File, error) {
	return nil, errReadOnly
}
func (readOnlyFS) Remove(string) error                { return errReadOnly }
func (readOnlyFS) RemoveAll(string) error             { return errReadOnly }
func (readOnlyFS) Rename(string, string) error        { return errReadOnly }
func (readOnlyFS) MkdirAll(string, os.FileMode) error { return errReadOnly }
func (readOnlyFS) ReuseForWrite(string, string, vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, errReadOnly
}
func (readOnlyFS) Lock(string) (io.Closer, error) { return io.NopCloser(nil), nil }
