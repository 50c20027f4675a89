package ops

import (
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
)

// MapState is a map state in a task: a map from user keys UK to values UV
// per key K, one store entry per map entry (layout.MapPrefix), so a Put or
// Get costs one point write or read whatever the map's size; under a TTL
// each map entry expires on its own.
type MapState[K, UK, UV any] struct {
	c   *Keyed
	ks  serde.Serde[K]
	uks serde.Serde[UK]
	uvs serde.Serde[UV]
}

// NewMapState types c with the state's serdes.
func NewMapState[K, UK, UV any](c *Keyed, ks serde.Serde[K], uks serde.Serde[UK], uvs serde.Serde[UV]) *MapState[K, UK, UV] {
	return &MapState[K, UK, UV]{c: c, ks: ks, uks: uks, uvs: uvs}
}

func (m *MapState[K, UK, UV]) prefix(k K) ([]byte, error) {
	kb, err := m.ks.Encode(k)
	if err != nil {
		return nil, m.c.errorf("key: %w", err)
	}
	return layout.MapPrefix(kb), nil
}

func (m *MapState[K, UK, UV]) key(k K, uk UK) ([]byte, error) {
	p, err := m.prefix(k)
	if err != nil {
		return nil, err
	}
	ukb, err := m.uks.Encode(uk)
	if err != nil {
		return nil, m.c.errorf("map key: %w", err)
	}
	return append(p, ukb...), nil
}

// Get returns the value under uk in k's map.
func (m *MapState[K, UK, UV]) Get(k K, uk UK) (uv UV, ok bool, err error) {
	key, err := m.key(k, uk)
	if err != nil {
		return uv, false, err
	}
	b, ok, err := m.c.get(key)
	if err != nil || !ok {
		return uv, false, err
	}
	if uv, err = m.uvs.Decode(b); err != nil {
		return uv, false, m.c.errorf("value: %w", err)
	}
	return uv, true, nil
}

// Put sets uk to uv in k's map.
func (m *MapState[K, UK, UV]) Put(k K, uk UK, uv UV) error {
	key, err := m.key(k, uk)
	if err != nil {
		return err
	}
	vb, err := m.uvs.Encode(uv)
	if err != nil {
		return m.c.errorf("value: %w", err)
	}
	return m.c.put(key, vb)
}

// Remove removes uk from k's map.
func (m *MapState[K, UK, UV]) Remove(k K, uk UK) error {
	key, err := m.key(k, uk)
	if err != nil {
		return err
	}
	return m.c.delete(key)
}

// Range calls fn for each live entry of k's map, in byte order of the
// encoded map keys, and deletes the expired entries it passes once done.
// An error from fn stops the iteration and is returned as is. fn may read
// this state but not write to it: a write returns an error.
func (m *MapState[K, UK, UV]) Range(k K, fn func(UK, UV) error) error {
	p, err := m.prefix(k)
	if err != nil {
		return err
	}
	now, err := m.c.now()
	if err != nil {
		return err
	}
	var expired [][]byte
	err = m.each(p, func(key []byte, e layout.Entry) error {
		if m.c.expired(e, now) {
			expired = append(expired, append([]byte(nil), key...))
			return nil
		}
		uk, err := m.uks.Decode(key[len(p):])
		if err != nil {
			return m.c.errorf("map key: %w", err)
		}
		uv, err := m.uvs.Decode(e.Payload)
		if err != nil {
			return m.c.errorf("value: %w", err)
		}
		return fn(uk, uv)
	})
	for _, key := range expired {
		if derr := m.c.drop(key); err == nil {
			err = derr
		}
	}
	return err
}

// each calls fn with every entry whose key begins with p, with writes
// barred meanwhile.
func (m *MapState[K, UK, UV]) each(p []byte, fn func(key []byte, e layout.Entry) error) error {
	if err := m.c.ready(); err != nil {
		return err
	}
	m.c.ranging++
	defer func() { m.c.ranging-- }()
	return m.c.s.Range(p, layout.PrefixEnd(p), func(key, b []byte) error {
		e, err := m.c.parse(b)
		if err != nil {
			return m.c.errorf("%w", err)
		}
		return fn(key, e)
	})
}

// Clear removes k's whole map.
func (m *MapState[K, UK, UV]) Clear(k K) error {
	p, err := m.prefix(k)
	if err != nil {
		return err
	}
	var keys [][]byte
	if err := m.c.ready(); err != nil {
		return err
	}
	// Only the keys are collected: an entry that does not parse is
	// cleared all the same.
	m.c.ranging++
	err = m.c.s.Range(p, layout.PrefixEnd(p), func(key, _ []byte) error {
		keys = append(keys, append([]byte(nil), key...))
		return nil
	})
	m.c.ranging--
	if err != nil {
		return m.c.errorf("%w", err)
	}
	for _, key := range keys {
		if err := m.c.delete(key); err != nil {
			return err
		}
	}
	return nil
}
