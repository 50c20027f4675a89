package statedir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The files of an application's directory.
const (
	lockFile       = ".lock"
	instanceIDFile = "instance.id"
	joinMemoFile   = "join-metadata"
	globalDir      = "global"
)

// App is the directory of application appID under the state root:
// <root>/<appID>.
func App(root, appID string) string { return filepath.Join(root, appID) }

// ErrNotADirName is returned by CheckAppID for an application id that App
// would not turn into one directory of its own under the root.
var ErrNotADirName = errors.New("statedir: application id is not a directory name")

// CheckAppID returns ErrNotADirName when appID is not a single path
// element, so that App(root, appID) would be another directory than the
// application's own (the root itself, its parent, or a nested one): a tool
// that deletes App(root, appID) must check it first.
func CheckAppID(appID string) error {
	if appID == "" || appID == "." || appID == ".." || strings.ContainsAny(appID, `/\`) || appID != filepath.Clean(appID) {
		return fmt.Errorf("%w: %q", ErrNotADirName, appID)
	}
	return nil
}

// Store is the directory of the store named store of the task taskID
// (task.ID's text, "<sub>_<partition>") in the application directory dir.
func Store(dir, taskID, store string) string { return filepath.Join(dir, taskID, store) }

// Global is the directory of the global table store named store in the
// application directory dir.
func Global(dir, store string) string { return filepath.Join(dir, globalDir, store) }

// JoinMemo is the file in the application directory dir where a static
// member keeps the join metadata it last sent.
func JoinMemo(dir string) string { return filepath.Join(dir, joinMemoFile) }

// ErrInUse matches (errors.Is) the error of Lock and LockExisting when
// another process, or another Lock in this one, holds the lock.
var ErrInUse = errors.New("statedir: in use")

// inUse is the refusal to lock: its text is the flock error's, which the
// callers wrap with their own words, and it matches ErrInUse.
type inUse struct{ err error }

func (e inUse) Error() string        { return e.err.Error() }
func (e inUse) Unwrap() error        { return e.err }
func (e inUse) Is(target error) bool { return target == ErrInUse }

// Lock takes the exclusive lock of the application directory dir, creating
// its lock file if needed, without waiting: an error matching ErrInUse if it
// is held. unlock releases it.
func Lock(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	return flock(f)
}

// LockExisting is Lock for a tool about to delete dir: it creates nothing,
// and a directory without a lock file (never run, or already deleted)
// needs no lock, so it returns a no-op unlock.
func LockExisting(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	return flock(f)
}

func flock(f *os.File) (func(), error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, inUse{err}
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// InstanceID returns the instance id kept in the application directory
// dir, creating a random one the first time.
func InstanceID(dir string) (string, error) {
	path := filepath.Join(dir, instanceIDFile)
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", err
	}
	return id, nil
}
