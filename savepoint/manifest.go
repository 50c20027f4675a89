package savepoint

import "time"

// Format is the manifest format this sluice writes and reads. A savepoint
// of another format is refused (ErrFormat).
const Format = 1

// ManifestFile is the manifest's name in a savepoint directory.
const ManifestFile = "manifest.json"

// Manifest describes a savepoint: what was cut, where, and what each store
// holds. It is written as indented JSON; the field names are a contract
// other tools read.
type Manifest struct {
	// Format is Format at the time of writing.
	Format int `json:"format"`
	// Sluice is the version of sluice that wrote it (informational).
	Sluice string `json:"sluice_version"`
	// ID identifies the savepoint (the request's id).
	ID string `json:"id"`
	// Application is the application.id the savepoint was taken of.
	Application string `json:"application"`
	// Fingerprint is the topology's fingerprint (processor's
	// TopologyFingerprint): equal for topologies whose description is
	// equal.
	Fingerprint string `json:"topology_fingerprint"`
	// Created is when the cut was taken.
	Created time.Time `json:"created"`
	// Inputs are the user input topics with the application's committed
	// offsets at the cut (where a start from the savepoint resumes).
	Inputs []Input `json:"inputs"`
	// Stores are the application's stores at the cut.
	Stores []Store `json:"stores"`
}

// Input is one user input topic at the cut.
type Input struct {
	Topic string `json:"topic"`
	// TopicID is Kafka's topic id (base64 or hex text, as listed), so
	// that a topic deleted and created again under the same name is told
	// apart: its offsets are not resumed. Empty if the broker gave none.
	TopicID    string   `json:"topic_id,omitempty"`
	Partitions int32    `json:"partitions"`
	Offsets    []Offset `json:"offsets"`
}

// Offset is a committed input position with its metadata (which carries
// the partition's watermark).
type Offset struct {
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Metadata    string `json:"metadata,omitempty"`
}

// Store is one store at the cut: its identity and every partition's copy.
type Store struct {
	Name string `json:"name"`
	// Layout is the store's layout (internal/layout's StoreKind names).
	Layout string `json:"layout"`
	// KeySerde and ValueSerde are the serdes' identities (serde.ID): a
	// start from the savepoint refuses a store whose identity changed
	// unless the topology migrates it (topology.MigrateStore).
	KeySerde   string `json:"key_serde"`
	ValueSerde string `json:"value_serde"`
	// SubTopology is the sub-topology whose tasks own the store.
	SubTopology int `json:"sub_topology"`
	// Partitions is the store's partition count (its tasks).
	Partitions int32 `json:"partitions"`
	// Changelog is the store's changelog topic in the application the
	// savepoint was taken of.
	Changelog string `json:"changelog"`
	// Records is the sum of the parts' records.
	Records int64  `json:"records"`
	Parts   []Part `json:"parts"`
}

// Part is one partition's copy of a store.
type Part struct {
	Partition int32 `json:"partition"`
	// Dir is the copy's Pebble directory, relative to the savepoint
	// directory, slash-separated: <application>/<task>/<store>.
	Dir string `json:"dir"`
	// Records counts the copy's entries.
	Records int64 `json:"records"`
	// Checksum is "sha256:" and the hex SHA-256 of every entry in key
	// order, each as uvarint(len(key)) key uvarint(len(value)) value.
	Checksum string `json:"checksum"`
	// ChangelogEnd is the changelog partition's end offset at the cut
	// (the copy holds every committed record below it).
	ChangelogEnd int64 `json:"changelog_end"`
}

// Store returns the manifest's store named name, or nil.
func (m *Manifest) Store(name string) *Store {
	for i := range m.Stores {
		if m.Stores[i].Name == name {
			return &m.Stores[i]
		}
	}
	return nil
}

// Input returns the manifest's input topic named topic, or nil.
func (m *Manifest) Input(topic string) *Input {
	for i := range m.Inputs {
		if m.Inputs[i].Topic == topic {
			return &m.Inputs[i]
		}
	}
	return nil
}
