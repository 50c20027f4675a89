package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// CheckpointTo writes a consistent copy of the store into dir, which must
// not exist (its parent is created): Pebble's checkpoint, whose sstables
// are hard links to the store's own when dir is on the same filesystem
// (copies otherwise), with the WAL flushed first so that every batch
// applied so far is in it. It returns the changelog checkpoint the copy
// holds: the copy's contents and that offset were written together
// (invariant 2), so the copy is exactly the committed state up to it.
//
// A savepoint takes each store this way at the cut (processor); the copy
// opens like any store (OpenPebble, OpenPebbleReadOnly) and its meta keys
// stay out of Range, as in the store itself.
func (p *Pebble) CheckpointTo(dir string) (int64, error) {
	p.mu.RLock()
	if p.db == nil {
		p.mu.RUnlock()
		return 0, ErrClosed
	}
	if _, err := os.Lstat(dir); err == nil {
		p.mu.RUnlock()
		return 0, fmt.Errorf("store: checkpoint %s: %w", dir, os.ErrExist)
	}
	err := p.db.Checkpoint(dir, pebble.WithFlushedWAL())
	p.mu.RUnlock()
	if err != nil {
		return 0, fmt.Errorf("store: checkpoint %s into %s: %w", p.dir, dir, corrupted(p.dir, err))
	}
	// Read back rather than trusting p.checkpoint: an Apply on another
	// goroutine may have landed between the copy and a load of it.
	cp, err := OpenPebbleReadOnly(dir)
	if err != nil {
		return 0, fmt.Errorf("store: checkpoint %s: %w", dir, err)
	}
	defer cp.Close()
	return cp.Checkpoint()
}

// CopyDir copies the closed Pebble store in src (a store directory, or a
// copy CheckpointTo wrote) into dst, which must not exist: sstables and
// blob files, which Pebble never changes once written, are hard-linked when
// the two are on one filesystem (copied otherwise); every other file (the
// MANIFEST, OPTIONS, the WAL, markers) is copied, because a Pebble that
// opens dst read-write appends to them or recycles them, and a link would
// let it change src. The LOCK file is left out. Every file and dst are
// synced, so a copy that CopyDir returned without error survives a crash
// once the caller renames it into place and syncs the parent.
func CopyDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("store: copy %s: %w", src, err)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return fmt.Errorf("store: copy %s: %w", src, err)
	}
	for _, e := range entries {
		name := e.Name()
		if name == "LOCK" || !e.Type().IsRegular() {
			continue
		}
		from, to := filepath.Join(src, name), filepath.Join(dst, name)
		if strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob") {
			if err := os.Link(from, to); err == nil {
				continue
			} else if errors.Is(err, os.ErrExist) || errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("store: copy %s: %w", src, err)
			}
			// Another filesystem (EXDEV) or no links there: copy.
		}
		if err := copyFile(from, to); err != nil {
			return fmt.Errorf("store: copy %s: %w", src, err)
		}
	}
	return syncPath(dst)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// syncPath fsyncs a file or directory.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("store: sync %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store: sync %s: %w", path, err)
	}
	return nil
}

// Sync makes every batch applied so far durable (the WAL synced), without
// flushing the memtable: for a store built to be renamed into place, whose
// rename must not be durable before its contents.
func (p *Pebble) Sync() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.db == nil {
		return ErrClosed
	}
	if err := p.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("store: sync: %w", corrupted(p.dir, err))
	}
	return nil
}
