package topology

import (
	"errors"
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
)

// DropEntry, returned by a typed migration's function (MigrateKeyValues),
// drops the entry: the new store does not hold it. (A raw migration drops
// an entry by returning a nil key.)
var DropEntry = errors.New("topology: drop this entry")

// MigrateStore registers a migration of the store called name, for a start
// from a savepoint (processor.FromSavepoint): every entry of the store's
// copy in the savepoint passes through fn, raw (its key and value bytes as
// the store holds them, layout included for stores that are not key-value
// stores), and the new store holds what fn returns:
//
//   - a nil newKey drops the entry;
//   - an error refuses the start, naming the store, the key and the
//     error, before anything is written;
//   - otherwise the new store holds newKey with newValue (which must not
//     be nil: a nil value is a delete).
//
// A store whose serde identity (serde.ID) differs from the savepoint's is
// refused unless it has a migration; a registered migration runs whether
// the identities differ or not. The task's time state, which sluice keeps
// in the first windowed store of a sub-topology, is never passed to fn.
// fn must be deterministic: it is called twice per entry (a check, then
// the seeding) and by every replica that seeds. The migration must name a
// store of t (ErrUnknownStore at Build).
func MigrateStore(t *Topology, name string, fn func(key, old []byte) (newKey, newValue []byte, err error)) {
	t.addMigration(name, &exec.Migration{Fn: fn}, fn == nil)
}

// MigrateKeyValues registers a typed migration of the key-value store
// called name (see MigrateStore): each entry of the savepoint's copy is
// decoded with oldKey and oldValue, passed to fn, and what fn returns is
// encoded with newKey and newValue, which should be the serdes the
// topology now gives the store. fn returns DropEntry to drop the entry;
// any other error refuses the start. A start refuses a typed migration of
// a store that is not a key-value store.
func MigrateKeyValues[K1, V1, K2, V2 any](t *Topology, name string, oldKey serde.Serde[K1], oldValue serde.Serde[V1], newKey serde.Serde[K2], newValue serde.Serde[V2], fn func(K1, V1) (K2, V2, error)) {
	if oldKey == nil || oldValue == nil || newKey == nil || newValue == nil {
		t.errorf(ErrMissingSerde, "migration of store %q needs the old and the new key and value serdes", name)
		return
	}
	var raw func(k, v []byte) ([]byte, []byte, error)
	if fn != nil {
		raw = func(kb, vb []byte) ([]byte, []byte, error) {
			k, err := oldKey.Decode(kb)
			if err != nil {
				return nil, nil, fmt.Errorf("decode key with the old serde %s: %w", serde.ID(oldKey), err)
			}
			v, err := oldValue.Decode(vb)
			if err != nil {
				return nil, nil, fmt.Errorf("decode value with the old serde %s: %w", serde.ID(oldValue), err)
			}
			k2, v2, err := fn(k, v)
			if errors.Is(err, DropEntry) {
				return nil, nil, nil
			}
			if err != nil {
				return nil, nil, err
			}
			nk, err := newKey.Encode(k2)
			if err != nil {
				return nil, nil, fmt.Errorf("encode key with the new serde %s: %w", serde.ID(newKey), err)
			}
			if nk == nil {
				nk = []byte{} // an empty key is a key; nil would drop it
			}
			nv, err := newValue.Encode(v2)
			if err != nil {
				return nil, nil, fmt.Errorf("encode value with the new serde %s: %w", serde.ID(newValue), err)
			}
			if nv == nil {
				nv = []byte{}
			}
			return nk, nv, nil
		}
	}
	t.addMigration(name, &exec.Migration{Fn: raw, KeyValue: true}, fn == nil)
}

func (t *Topology) addMigration(name string, m *exec.Migration, nilFn bool) {
	switch {
	case name == "":
		t.errorf(ErrMissingName, "a migration must name its store")
		return
	case nilFn:
		t.errorf(ErrNilFunction, "migration of store %q has no function", name)
		return
	}
	if t.migrations == nil {
		t.migrations = map[string]*exec.Migration{}
	}
	if _, dup := t.migrations[name]; dup {
		t.errorf(ErrDuplicateName, "store %q is migrated twice", name)
		return
	}
	t.migrations[name] = m
}
