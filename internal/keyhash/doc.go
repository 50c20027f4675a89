// Package keyhash is the partition of a record key: the one function that
// decides which task a keyed record, and so every store entry derived from
// it, belongs to. The producer's partitioner (processor/partitioner.go),
// interactive queries' routing (processor.KeyPartition) and rescaling
// (internal/rescale) all call it, so they cannot drift apart; it imports
// nothing of sluice, so any of them can import it.
//
//	p := keyhash.Partition(kb, 16) // kb: the key's serde encoding
package keyhash
