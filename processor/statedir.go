package processor

import (
	"errors"
	"fmt"

	"github.com/sluice-streams/sluice/internal/statedir"
)

// The state directory (its layout and lock: internal/statedir, shared with
// `sluice reset`), with the processor's errors.

// lockDir takes an exclusive lock on dir so that two instances never share
// a state directory.
func lockDir(dir string) (func(), error) {
	unlock, err := statedir.Lock(dir)
	if errors.Is(err, statedir.ErrInUse) {
		return nil, fatalError{fmt.Errorf("processor: state dir %s is in use by another instance: %w", dir, err)}
	}
	if err != nil {
		return nil, fmt.Errorf("processor: lock state dir: %w", err)
	}
	return unlock, nil
}

// persistentID returns the instance id kept in dir, creating it once.
func persistentID(dir string) (string, error) {
	id, err := statedir.InstanceID(dir)
	if err != nil {
		return "", fmt.Errorf("processor: write instance id: %w", err)
	}
	return id, nil
}
