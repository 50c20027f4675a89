package processor

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The state directory: its lock, so that two instances never share one,
// and the instance id kept in it.

// lockDir takes an exclusive lock on dir so that two instances never share
// a state directory.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("processor: lock state dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fatalError{fmt.Errorf("processor: state dir %s is in use by another instance: %w", dir, err)}
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// persistentID returns the instance id kept in dir, creating it once.
func persistentID(dir string) (string, error) {
	path := filepath.Join(dir, "instance.id")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("processor: write instance id: %w", err)
	}
	return id, nil
}
