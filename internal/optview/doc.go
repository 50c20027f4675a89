// Package optview lets topologytest read the processor options that mean
// the same to it as to an App (topologytest.Processor), so that neither
// re-declares the other's. processor fills in Shared from its init; the
// options' own type stays processor's.
package optview
