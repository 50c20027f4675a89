package store

// Forwarded is Get for a table whose updates are held (PutHeld): it
// returns key's value as the table last forwarded it, the value before its
// held update if it has one, and its value otherwise. A node that joins
// another table's changes with this table's value needs that one: the
// other table's changes are forwarded before this table's held update, and
// what was joined with this table's newest value would never have been
// emitted. The value is returned without a copy: the caller must not
// modify it.
func (s *Staged) Forwarded(key []byte) ([]byte, bool, error) {
	if i, ok := s.lookup(key); ok {
		if h := s.entries[i].held; h != 0 {
			prev := s.held[h-1].prev
			return prev, prev != nil, nil
		}
	}
	return s.Get(key)
}
