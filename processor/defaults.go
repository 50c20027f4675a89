package processor

import (
	"slices"
	"time"

	"github.com/sluice-streams/sluice/txn"
)

// Settings are the values of the options that have a configuration key,
// named after it.
type Settings struct {
	BootstrapServers         []string      // bootstrap.servers: Brokers
	ProcessingGuarantee      txn.Guarantee // processing.guarantee: Guarantee
	CommitInterval           time.Duration // commit.interval
	StateDir                 string        // state.dir
	SessionTimeout           time.Duration // session.timeout
	NumStandbyReplicas       int           // num.standby.replicas: StandbyReplicas
	AcceptableRecoveryLag    int64         // acceptable.recovery.lag
	MaxWarmupReplicas        int           // max.warmup.replicas
	ProbingRebalanceInterval time.Duration // probing.rebalance.interval
	NumStreamThreads         int           // num.stream.threads: StreamThreads (0: GOMAXPROCS)
	FoldUpdates              bool          // fold.updates
	MaxRecordBytes           int           // max.record.bytes
	IdleTimeout              time.Duration // idle.timeout (0: off)
	StateMemoryBudget        int64         // state.memory.budget: MemoryBudget
	StateMemoryGoLimit       bool          // state.memory.go.limit: LimitGoMemory
	MaxPartitionFetchBytes   int           // max.partition.fetch.bytes
}

// Defaults returns the value each option has when it is not given: the
// one place they are decided, so that a tool showing them (the sluice
// command's help and `sluice config`) shows what New uses.
func Defaults() Settings {
	c := defaultConfig()
	return Settings{
		BootstrapServers:         slices.Clone(c.brokers),
		ProcessingGuarantee:      c.guarantee,
		CommitInterval:           c.commitInterval,
		StateDir:                 c.stateDir,
		SessionTimeout:           c.sessionTimeout,
		NumStandbyReplicas:       c.standby.replicas,
		AcceptableRecoveryLag:    c.standby.acceptableLag,
		MaxWarmupReplicas:        c.standby.maxWarmups,
		ProbingRebalanceInterval: c.standby.probeInterval,
		NumStreamThreads:         c.threads,
		FoldUpdates:              c.foldUpdates,
		MaxRecordBytes:           c.maxRecordBytes,
		IdleTimeout:              c.idleTimeout,
		StateMemoryBudget:        c.memoryBudget,
		StateMemoryGoLimit:       c.goLimit,
		MaxPartitionFetchBytes:   c.partFetchBytes,
	}
}
