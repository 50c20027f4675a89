package processor

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/txn"
)

// Opt configures an App. Options mirror Kafka Streams' configuration keys;
// each one's doc names the key and the default.
type Opt interface{ apply(*config) }

type opt func(*config)

func (o opt) apply(c *config) { o(c) }

type config struct {
	appID            string
	brokers          []string
	guarantee        txn.Guarantee
	commitInterval   time.Duration
	stateDir         string
	instanceID       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	txnTimeout       time.Duration
	logger           *slog.Logger
	errors           map[exec.ErrorClass]exec.ErrorHandler
	deadLetter       string
	maxRecordBytes   int
	idleTimeout      time.Duration
	clientOpts       []kgo.Opt
	hooks            []kgo.Hook
	endpoint         string        // application.server, see AdvertisedEndpoint
	standby          standbyConfig // num.standby.replicas and warm-up, see standby.go
	threads          int           // num.stream.threads; 0: GOMAXPROCS
	foldUpdates      bool          // fold.updates
	bounded          bool          // Bounded, BoundedUntil (bounded.go)
	until            time.Time
	spContinue       bool           // SavepointContinue (savepoint.go)
	spTimeout        time.Duration  // SavepointTimeout
	savepoint        savepointStart // FromSavepoint and its options (fromsavepoint.go)
	memoryBudget     int64          // state.memory.budget (memory.go)
	goLimit          bool           // state.memory.go.limit (golimit.go)
	partFetchBytes   int            // max.partition.fetch.bytes
}

func defaultConfig() config {
	return config{
		brokers:          []string{"127.0.0.1:9092"},
		guarantee:        txn.ExactlyOnce,
		commitInterval:   100 * time.Millisecond,
		stateDir:         filepath.Join(os.TempDir(), "sluice"),
		sessionTimeout:   10 * time.Second,
		rebalanceTimeout: 15 * time.Second,
		txnTimeout:       10 * time.Second,
		maxRecordBytes:   task.DefaultMaxRecordBytes,
		logger:           slog.New(slog.DiscardHandler),
		standby:          defaultStandbyConfig(),
		memoryBudget:     DefaultMemoryBudget,
		partFetchBytes:   DefaultMaxPartitionFetchBytes,
	}
}

func (c *config) validate() error {
	var errs []error
	if c.appID == "" {
		errs = append(errs, errors.New("processor: application.id is required"))
	}
	if len(c.brokers) == 0 {
		errs = append(errs, errors.New("processor: bootstrap.servers is required"))
	}
	if c.commitInterval <= 0 {
		errs = append(errs, fmt.Errorf("processor: commit.interval must be positive, got %v", c.commitInterval))
	}
	if c.idleTimeout < 0 || c.idleTimeout > 0 && c.idleTimeout < time.Millisecond {
		errs = append(errs, fmt.Errorf("processor: idle.timeout must be 0 (off) or at least 1ms, got %v", c.idleTimeout))
	}
	if c.stateDir == "" {
		errs = append(errs, errors.New("processor: state.dir is required"))
	}
	if c.threads < 0 {
		errs = append(errs, fmt.Errorf("processor: num.stream.threads must not be negative, got %d", c.threads))
	}
	if c.memoryBudget < MinMemoryBudget {
		errs = append(errs, fmt.Errorf("processor: state.memory.budget must be at least %d bytes (8MiB), got %d", int64(MinMemoryBudget), c.memoryBudget))
	}
	if c.partFetchBytes < 1 || c.partFetchBytes > MaxPartitionFetchBytesLimit {
		errs = append(errs, fmt.Errorf("processor: max.partition.fetch.bytes must be between 1 and %d bytes (50MiB), got %d", MaxPartitionFetchBytesLimit, c.partFetchBytes))
	}
	errs = append(errs, validateEndpoint(c.endpoint), c.standby.validate())
	return errors.Join(errs...)
}

// ApplicationID sets application.id: the consumer group, the prefix of the
// internal topics and of the transactional id. Required.
func ApplicationID(id string) Opt { return opt(func(c *config) { c.appID = id }) }

// Brokers sets bootstrap.servers. Default 127.0.0.1:9092.
func Brokers(addrs ...string) Opt {
	return opt(func(c *config) { c.brokers = append([]string(nil), addrs...) })
}

// Guarantee sets processing.guarantee. Default txn.ExactlyOnce.
func Guarantee(g txn.Guarantee) Opt { return opt(func(c *config) { c.guarantee = g }) }

// CommitInterval sets commit.interval: how often the instance ends its
// transaction (or commits offsets). Default 100ms.
func CommitInterval(d time.Duration) Opt { return opt(func(c *config) { c.commitInterval = d }) }

// StateDir sets state.dir, the root of the local stores. Default sluice in
// os.TempDir(): $TMPDIR/sluice, /tmp/sluice on Unix when TMPDIR is unset.
func StateDir(dir string) Opt { return opt(func(c *config) { c.stateDir = dir }) }

// InstanceID sets group.instance.id: the instance becomes a static member of
// the group (KIP-345), so a restart within the session timeout causes no
// rebalance, and the id suffixes the transactional id, so a restarted instance
// fences its dead incarnation and aborts the transaction it left open.
// Default: dynamic membership, with a transactional id generated once and kept
// in state.dir.
func InstanceID(id string) Opt { return opt(func(c *config) { c.instanceID = id }) }

// SessionTimeout sets session.timeout.ms of the consumer group. Default 10s.
func SessionTimeout(d time.Duration) Opt { return opt(func(c *config) { c.sessionTimeout = d }) }

// RebalanceTimeout sets rebalance.timeout.ms: how long the group waits for
// members to rejoin during a rebalance. sluice rejoins in the background, even
// while it restores, so a short timeout only bounds how long a member that
// died mid-rebalance can stall the group. Default 15s.
func RebalanceTimeout(d time.Duration) Opt { return opt(func(c *config) { c.rebalanceTimeout = d }) }

// TransactionTimeout sets transaction.timeout.ms. Default 10s.
func TransactionTimeout(d time.Duration) Opt { return opt(func(c *config) { c.txnTimeout = d }) }

// OnError sets the application's handler for one class of errors
// (topology.Deserialization, Processing or Production). Defaults: dead-letter
// for deserialization errors, fail for the others. Sources, operators and
// sinks can override it (topology.OnError).
func OnError(class topology.ErrorClass, h topology.ErrorHandler) Opt {
	return opt(func(c *config) {
		if c.errors == nil {
			c.errors = map[exec.ErrorClass]exec.ErrorHandler{}
		}
		c.errors[exec.ErrorClass(class)] = exec.HandlerOf(h)
	})
}

// DeadLetterTopic sets the application's dead-letter topic. Default
// <application.id>-dlq, created by the application.
func DeadLetterTopic(topic string) Opt { return opt(func(c *config) { c.deadLetter = topic }) }

// MaxRecordBytes bounds the records the application produces (key, value and
// headers): a larger one is a production error, handled by the policy,
// rather than a produce failure that would abort every transaction it is in.
// Set it to the smallest max.message.bytes of the output topics. Default
// 1048588, Kafka's default.
func MaxRecordBytes(n int) Opt { return opt(func(c *config) { c.maxRecordBytes = n }) }

// StreamThreads sets num.stream.threads: how many of the instance's tasks
// process their records at the same time, each task on one goroutine at a
// time and in its own order. Unlike Kafka Streams' threads they are not group
// members of their own: the instance stays one member with one transaction,
// and the goroutines process the tasks' records while the instance polls
// for more, a task's records waiting only for that task's earlier ones.
// The functions given to the DSL may therefore run concurrently for
// different partitions, as under Kafka Streams with several threads; a
// Processor (and its state) belongs to one task. Default 0: GOMAXPROCS, the
// cores the Go runtime uses.
func StreamThreads(n int) Opt { return opt(func(c *config) { c.threads = n }) }

// FoldUpdates sets fold.updates: the updates of tables kept in cached
// stores (the default; see topology.WithoutCache), those of aggregations
// (Count, Aggregate, Reduce and their table versions) and of tables read
// from topics (TableFrom), are held back and forwarded when the instance
// commits, one per key and commit (none for a key added and deleted
// since), carrying the key's old value before the first of them and its
// new value after the last. This is what Kafka
// Streams' record cache does by default: fewer records downstream and in the
// output topics, at the price of intermediate values and of latency up to
// commit.interval. Under exactly_once that price is small, since nothing is
// visible downstream before the commit anyway. Topologies with event time
// (windows, joins in windows, event-time timers) forward every update
// regardless: held updates would meet the watermark later than their
// records did. A Count that repartitions also combines its records by key
// before the repartition topic, one per key and commit (topology.Count).
// Default false: every update is forwarded at once.
func FoldUpdates(on bool) Opt { return opt(func(c *config) { c.foldUpdates = on }) }

// MemoryBudget sets state.memory.budget: the bytes of memory the
// instance's state may use, split between one Pebble block cache shared by
// all its stores (1/2), the stores' memtables (1/4) and the stages that hold
// each transaction's writes until its commit and cache committed values,
// with what a stream join keeps in memory of its windows' keys (1/4); when
// the stages fill their share, the instance commits early rather than let
// them grow (DESIGN.md, Memory budget). The Kafka clients'
// buffers, the Go runtime and in-memory stores are not in it. Kafka
// Streams' nearest equivalents are statestore.cache.max.bytes and a
// RocksDBConfigSetter. Default DefaultMemoryBudget (256 MiB); at least
// MinMemoryBudget.
func MemoryBudget(bytes int64) Opt { return opt(func(c *config) { c.memoryBudget = bytes }) }

// LimitGoMemory sets state.memory.go.limit: while the App runs, the Go
// runtime's soft memory limit (runtime/debug.SetMemoryLimit) keeps the
// process's RSS under its memory budget plus MemoryBase (256 MiB). The
// limit is that bound less what the process holds outside the Go runtime
// (Pebble's cache and memtables under cgo, the binary, the C libraries),
// re-read every 100 ms, less a margin of 32 MiB, and at least the part of
// the budget in the Go heap (the stages' quarter; the whole budget when
// the build has no cgo and Pebble allocates there too) plus 192 MiB for
// the Kafka clients, operators and the runtime; with several Apps in the
// process, their budgets add up. The collector then keeps the heap near
// that (a soft limit) rather than at twice the live heap, so RSS stays
// flat as the state grows past its budget (PERFORMANCE.md). While the limit is set GOGC is off, so that the
// collector runs as the heap nears the limit rather than each time a
// small live heap doubles (less CPU: PERFORMANCE.md, "Issue 20, session
// 47"); GOGC in the environment keeps it on. The cost is more collection
// when the live heap nears the limit; a process whose own data needs more
// must leave it off or set GOMEMLIMIT, which always wins. Default false:
// the Go memory is not limited.
func LimitGoMemory(on bool) Opt { return opt(func(c *config) { c.goLimit = on }) }

const (
	// DefaultMaxPartitionFetchBytes is max.partition.fetch.bytes's
	// default: 64 KiB, not the Kafka consumer's 1 MiB (see
	// MaxPartitionFetchBytes).
	DefaultMaxPartitionFetchBytes = 64 << 10
	// MaxPartitionFetchBytesLimit is the largest max.partition.fetch.bytes
	// accepted: a fetch's whole bound (fetch.max.bytes, left at its
	// default).
	MaxPartitionFetchBytesLimit = 50 << 20
)

// MaxPartitionFetchBytes sets max.partition.fetch.bytes: the bytes of
// records a fetch asks a broker for from each partition, for every
// consumer of the instance. The Java consumer, whose default is 1 MiB a
// partition and 50 MiB a fetch, keeps a fetch compressed and decompresses
// the records as poll hands them out; franz-go decompresses a whole fetch
// when it arrives and makes a record of every message in it, which stay
// until the instance has processed them. Of small records that compress well a fetch then holds
// many times its bytes, outside state.memory.budget. Default
// DefaultMaxPartitionFetchBytes (64 KiB): in sluice bench it took a
// stream join's peak RSS down by about a quarter, and the CPU of most jobs
// down (PERFORMANCE.md, session 30). A fetch is one request to a
// broker at a time, so over a link with a long round trip a larger value
// may be needed for throughput. A broker returns a batch larger than the
// bound only for the first partition of a fetch that has data, so input
// written in batches larger than the bound comes one partition a fetch,
// and a poll then feeds about one task (the tasks of successive polls still
// process at once; PERFORMANCE.md, sessions 31 and 32). At most MaxPartitionFetchBytesLimit.
//
// The bound is per partition, not on the whole fetch (fetch.max.bytes),
// because the embedded broker (kfake) leaves out the aborted transactions
// of a partition whose batches the whole fetch's bound cuts short, so
// that a read_committed consumer reads aborted records (DESIGN.md).
func MaxPartitionFetchBytes(bytes int) Opt {
	return opt(func(c *config) { c.partFetchBytes = bytes })
}

// Logger sets the logger. Default: discard.
func Logger(l *slog.Logger) Opt { return opt(func(c *config) { c.logger = l }) }

// IdleTimeout sets idle.timeout: an input partition without records for
// longer stops holding the watermark back, and rejoins with its next record
// (Flink's withIdleness). Default 0: off. It is the one wall-clock input of
// event time: with it on, when windows close depends on when records
// arrived, not only on the records, so a replay may decide differently
// (invariant 5 holds only with it off).
func IdleTimeout(d time.Duration) Opt { return opt(func(c *config) { c.idleTimeout = d }) }

// ClientOptions adds franz-go options to every Kafka client the App creates
// (the session's consumer and producer, the admin client, the restore and
// global-table consumers): the connection's security (kgo.DialTLSConfig,
// kgo.SASL), a dialer, a client id, timeouts, a fetch's wait at the broker
// (kgo.FetchMaxWait; default DefaultFetchMaxWait). Repeated calls add up.
// They come after the seed brokers and sluice's fetch defaults and before
// the options each client sets for itself, so that they cannot switch off
// what sluice's guarantees rest on (the consumer group, the transactional
// id, read_committed); options that consume, produce or join a group are
// not meant for this. Default: none.
// The Java client's equivalents are security.protocol, ssl.* and sasl.*.
func ClientOptions(opts ...kgo.Opt) Opt {
	return opt(func(c *config) { c.clientOpts = append(c.clientOpts, opts...) })
}

// ClientHooks adds franz-go hooks (kgo.Hook) to the instance's main client,
// the consumer and producer of the processing session, e.g. the client
// metrics of franz-go's kprom plugin (see sluiceprom.ClientMetrics). Unlike
// ClientOptions they are not given to the short-lived admin, restore and
// global-table clients, so a hook that registers metrics per client sees one
// client at a time: the session's, rebuilt after a failure. Default: none.
func ClientHooks(hooks ...kgo.Hook) Opt {
	return opt(func(c *config) { c.hooks = append(c.hooks, hooks...) })
}

// DefaultFetchMaxWait is how long a fetch may wait at a broker for records
// (the Java consumer's fetch.max.wait.ms and its default, 500ms), in place
// of franz-go's 5s. A broker holds a fetch whose partitions have no
// records for the whole wait, and franz-go adds partitions to a client's
// consumption without interrupting the fetch in flight: with 5s, a table
// join whose table was at its end began to process its stream 5s after
// its tasks opened (DESIGN.md, beside max.partition.fetch.bytes). A
// ClientOptions' kgo.FetchMaxWait sets another.
const DefaultFetchMaxWait = 500 * time.Millisecond

// kgoOpts returns the options of one client: the seed brokers, the Kafka
// client's log at debug level (clientlog.go), max.partition.fetch.bytes,
// DefaultFetchMaxWait, the user's ClientOptions, then the client's own
// options, which win over the user's (franz-go applies options in order).
func (c *config) kgoOpts(own ...kgo.Opt) []kgo.Opt {
	opts := make([]kgo.Opt, 0, 4+len(c.clientOpts)+len(own))
	opts = append(opts, kgo.SeedBrokers(c.brokers...))
	opts = append(opts, clientLogOpts(c.logger)...)
	opts = append(opts, kgo.FetchMaxPartitionBytes(int32(c.partFetchBytes)), kgo.FetchMaxWait(DefaultFetchMaxWait))
	opts = append(opts, c.clientOpts...)
	return append(opts, own...)
}
