package layout

// Key-value store layout, the store behind Materialized/KeyValueStore
// (aggregations, tables read from a topic, the Processor API's key-value
// stores):
//
//	serde(key) → serde(value)
//
// A key is its serde's encoding as it is, with no prefix and no length: a
// key-value store holds nothing else (it is never a sub-topology's time
// store), so no key needs telling apart from another kind, and its
// changelog records and its interactive queries carry the same bytes. A
// range [from, to) of keys is therefore the range of their encodings,
// in byte order, and a nil bound is open. The value a folded update holds
// back (store.Staged.PutHeld) is the same value: folding changes when a
// change goes out, not what is stored.
//
// There are no helpers: the encoding is the serde's.
