package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cast"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/txn"
)

// configFlag is the root's persistent flag naming the YAML config file.
const configFlag = "config"

// envPrefix prefixes every configuration key in the environment.
const envPrefix = "SLUICE_"

// Configuration keys, spelled as in Kafka Streams so that a Kafka Streams
// user's settings carry over.
const (
	keyAppID           = "application.id"
	keyBrokers         = "bootstrap.servers"
	keyGuarantee       = "processing.guarantee"
	keyCommitInterval  = "commit.interval"
	keyStateDir        = "state.dir"
	keyStandbyReplicas = "num.standby.replicas"
	keyStreamThreads   = "num.stream.threads"
	keyFoldUpdates     = "fold.updates"
	keyInstanceID      = "group.instance.id"
	keyMaxRecordBytes  = "max.record.bytes"
	keyIdleTimeout     = "idle.timeout"
	keyAppServer       = "application.server"
	keyMemoryBudget    = "state.memory.budget"
	keyMemoryGoLimit   = "state.memory.go.limit"
	keyPartFetchBytes  = "max.partition.fetch.bytes"
	// Standby replicas and warm-up (processor/standby.go), and the group
	// session timeout that a static member restarts within.
	keyAcceptableLag  = "acceptable.recovery.lag"
	keyMaxWarmups     = "max.warmup.replicas"
	keyProbeInterval  = "probing.rebalance.interval"
	keySessionTimeout = "session.timeout"
	// sluice's own, with no Kafka Streams equivalent.
	keyHTTPAddress = "http.address"
	keyLogLevel    = "log.level"
	keyLogFormat   = "log.format"
)

// appKeys maps each key to its flag; the order is the order of --help.
var appKeys = []struct{ key, flag string }{
	{keyAppID, "app-id"},
	{keyBrokers, "brokers"},
	{keyGuarantee, "guarantee"},
	{keyCommitInterval, "commit-interval"},
	{keyStateDir, "state-dir"},
	{keyStreamThreads, "stream-threads"},
	{keyFoldUpdates, "fold-updates"},
	{keyStandbyReplicas, "standby-replicas"},
	{keyAcceptableLag, "acceptable-recovery-lag"},
	{keyMaxWarmups, "max-warmup-replicas"},
	{keyProbeInterval, "probing-rebalance-interval"},
	{keySessionTimeout, "session-timeout"},
	{keyInstanceID, "instance-id"},
	{keyMaxRecordBytes, "max-record-bytes"},
	{keyIdleTimeout, "idle-timeout"},
	{keyMemoryBudget, "memory-budget"},
	{keyMemoryGoLimit, "limit-go-memory"},
	{keyPartFetchBytes, "max-partition-fetch-bytes"},
	{keyAppServer, "advertised-endpoint"},
	{keyHTTPAddress, "http"},
	{keyHTTPTLSCert, "http-tls-cert"},
	{keyHTTPTLSKey, "http-tls-key"},
	{keyHTTPTLSCA, "http-tls-ca"},
	{keyHTTPClientCA, "http-client-ca"},
	{keyHTTPToken, ""}, // no flag: see addHTTPSecurityFlags
	{keyHTTPTokenFile, "http-token-file"},
	{keyLogLevel, "log-level"},
	{keyLogFormat, "log-format"},
	{keySecurityProtocol, "security-protocol"},
	{keySASLMechanism, "sasl-mechanism"},
	{keySASLUsername, "sasl-username"},
	{keySASLPassword, ""}, // no flag: see addSecurityFlags
	{keySASLPasswordFile, "sasl-password-file"},
	{keySSLCA, "ssl-ca"},
	{keySSLCert, "ssl-cert"},
	{keySSLKey, "ssl-key"},
	{keyDBURL, "db"},
	{keyDBPassword, ""}, // no flag: SLUICE_DB_PASSWORD or the config file
	{keyDBMode, "db-mode"},
	{keyDBCreateTables, "db-create-tables"},
}

// envName returns the environment variable of key: SLUICE_ and the key in
// upper case with dots as underscores.
func envName(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// addAppFlags adds the flags of the instance configuration to cmd. Their
// values are read back by loadAppConfig, not through variables, because a
// flag only wins when it was given.
func addAppFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	d := processor.Defaults()
	f.String("app-id", "", "application.id: the consumer group and the prefix of internal topics and transactional ids (default: the example's name)")
	f.String("brokers", strings.Join(d.BootstrapServers, ","), "bootstrap.servers: comma-separated `host:port` list")
	f.String("guarantee", d.ProcessingGuarantee.String(), "processing.guarantee: exactly_once, at_least_once or at_most_once")
	f.Duration("commit-interval", d.CommitInterval, "commit.interval: how often the instance commits its transaction")
	f.String("state-dir", d.StateDir, "state.dir: root `directory` of the local state stores")
	f.Int("stream-threads", d.NumStreamThreads, "num.stream.threads: tasks processing at the same time, each on one goroutine, within the instance's one transaction (0: one per CPU, GOMAXPROCS)")
	f.Bool("fold-updates", d.FoldUpdates, "fold.updates: forward an aggregation's updates at the commit, one per key (Kafka Streams' record cache), instead of each at once")
	f.Int("standby-replicas", d.NumStandbyReplicas, "num.standby.replicas: other instances keeping a copy of each stateful task's stores, following its changelogs, so a failover restores only the tail")
	f.Int("acceptable-recovery-lag", int(d.AcceptableRecoveryLag), "acceptable.recovery.lag: changelog offsets a copy may lag the best one and still take its task over; further behind, it warms up first")
	f.Int("max-warmup-replicas", d.MaxWarmupReplicas, "max.warmup.replicas: warm-up copies the group keeps at once while tasks wait to move")
	f.Duration("probing-rebalance-interval", d.ProbingRebalanceInterval, "probing.rebalance.interval: how often the group leader rebalances while warm-ups catch up")
	f.Duration("session-timeout", d.SessionTimeout, "session.timeout: how long the group waits for a silent member; a static member (group.instance.id) restarting within it causes no rebalance")
	f.String("instance-id", "", "group.instance.id: make this instance a static group member with a stable transactional id")
	f.Int("max-record-bytes", d.MaxRecordBytes, "max.record.bytes: larger output records are production errors, handled by the error policy")
	f.Duration("idle-timeout", d.IdleTimeout, "idle.timeout: an input partition silent this long stops holding the watermark back (0: off; on, a replay may close windows differently)")
	f.String("memory-budget", formatBytes(d.StateMemoryBudget), "state.memory.budget: memory of the instance's state (`bytes`, e.g. 512MiB): half a block cache shared by its Pebble stores, a quarter memtables, a quarter the stages of uncommitted writes, committing early when they fill it")
	f.Bool("limit-go-memory", d.StateMemoryGoLimit, "state.memory.go.limit: set the Go runtime's soft memory limit so that RSS stays under the memory budget plus 256MiB as the state grows (that bound less the memory outside Go, at least the budget's part in the Go heap plus 192MiB), with GOGC off while it is set; GOMEMLIMIT, when set, wins, and GOGC, when set, stays")
	f.String("max-partition-fetch-bytes", formatBytes(int64(d.MaxPartitionFetchBytes)), "max.partition.fetch.bytes: `bytes` of records a fetch asks a broker for from each partition (e.g. 1MiB); franz-go decompresses a whole fetch at once, so this bounds the memory of input fetched and not yet processed, outside the memory budget")
	f.String("advertised-endpoint", "", "application.server: `host:port` where other instances reach this one's interactive queries (default with --http: the bound HTTP address)")
	f.String("http", "", "http.address: serve /metrics, /healthz, /readyz, /tasks, /topology and the interactive queries /stores/... on this `address` (a port alone binds 127.0.0.1); off when empty")
	addHTTPSecurityFlags(f)
	f.String("log-level", "info", "log.level: debug, info, warn or error")
	f.String("log-format", "text", "log.format: text or json (slog, on stderr)")
	addSecurityFlags(f)
	addDBFlags(f)
}

// appConfig is the effective configuration of one instance.
type appConfig struct {
	AppID           string
	Brokers         []string
	Guarantee       txn.Guarantee
	CommitInterval  time.Duration
	StateDir        string
	StandbyReplicas int
	StreamThreads   int
	FoldUpdates     bool
	AcceptableLag   int
	MaxWarmups      int
	ProbeInterval   time.Duration
	SessionTimeout  time.Duration
	InstanceID      string
	MaxRecordBytes  int
	IdleTimeout     time.Duration
	MemoryBudget    int64  // state.memory.budget, bytes
	MemoryGoLimit   bool   // state.memory.go.limit
	PartFetchBytes  int64  // max.partition.fetch.bytes
	AppServer       string // application.server, "" if unset
	HTTPAddress     string // http.address, "" if off
	LogLevel        slog.Level
	LogFormat       string // text or json
	Security        security
	HTTP            httpSecurity // TLS and credentials of http.address
	DB              dbConfig     // billing's database output (dbconfig.go)

	// sources names where each key's value came from.
	sources map[string]string
}

// loadAppConfig resolves the instance configuration of cmd: a flag that was
// given beats the environment, which beats the --config file, which beats the
// defaults (defaultAppID for application.id). It rejects unknown keys in the
// config file and invalid values, naming the key and where its value came
// from.
func loadAppConfig(cmd *cobra.Command, defaultAppID string) (appConfig, error) {
	// A fresh viper per call: the global one would carry flags and files
	// from one command (or test) into the next.
	v := viper.New()

	// The root's flag itself: topic create has a --config of its own (a
	// topic config, as kafka-topics has), which shadows it there.
	var file string
	if f := cmd.Root().PersistentFlags().Lookup(configFlag); f != nil {
		file = f.Value.String()
	}
	if file != "" {
		v.SetConfigFile(file)
		// The file is YAML whatever its extension; viper would
		// otherwise pick the parser from the extension.
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return appConfig{}, fmt.Errorf("config file: %w", err)
		}
		// Checked before any default or binding is added, so AllKeys
		// lists only the file's keys. Viper accepts both flat
		// (application.id: x) and nested (application: {id: x}) YAML
		// and flattens both to the dotted key.
		if err := checkKeys(file, v.AllKeys()); err != nil {
			return appConfig{}, err
		}
	}

	// The instance's defaults are processor's (processor.Defaults), so
	// that what `sluice config` shows is what an App uses; opts passes
	// on only the keys that were set.
	d := processor.Defaults()
	v.SetDefault(keyAppID, defaultAppID)
	v.SetDefault(keyBrokers, strings.Join(d.BootstrapServers, ","))
	v.SetDefault(keyGuarantee, d.ProcessingGuarantee.String())
	v.SetDefault(keyCommitInterval, d.CommitInterval)
	v.SetDefault(keyStateDir, d.StateDir)
	v.SetDefault(keyStandbyReplicas, d.NumStandbyReplicas)
	v.SetDefault(keyStreamThreads, d.NumStreamThreads)
	v.SetDefault(keyFoldUpdates, d.FoldUpdates)
	v.SetDefault(keyAcceptableLag, int(d.AcceptableRecoveryLag))
	v.SetDefault(keyMaxWarmups, d.MaxWarmupReplicas)
	v.SetDefault(keyProbeInterval, d.ProbingRebalanceInterval)
	v.SetDefault(keySessionTimeout, d.SessionTimeout)
	v.SetDefault(keyInstanceID, "")
	v.SetDefault(keyMaxRecordBytes, d.MaxRecordBytes)
	v.SetDefault(keyIdleTimeout, d.IdleTimeout)
	v.SetDefault(keyMemoryBudget, formatBytes(d.StateMemoryBudget))
	v.SetDefault(keyMemoryGoLimit, d.StateMemoryGoLimit)
	v.SetDefault(keyPartFetchBytes, formatBytes(int64(d.MaxPartitionFetchBytes)))
	v.SetDefault(keyAppServer, "")
	v.SetDefault(keyHTTPAddress, "")
	v.SetDefault(keyLogLevel, "info")
	v.SetDefault(keyLogFormat, "text")
	// The other security keys have no default: viper keeps defaults as
	// nested maps, where sasl.password and sasl.password.file collide.
	v.SetDefault(keySecurityProtocol, protoPlaintext)
	for _, k := range appKeys {
		if err := v.BindEnv(k.key, envName(k.key)); err != nil {
			return appConfig{}, fmt.Errorf("%s: %w", k.key, err)
		}
		if f := cmd.Flags().Lookup(k.flag); f != nil {
			if err := v.BindPFlag(k.key, f); err != nil {
				return appConfig{}, fmt.Errorf("%s: %w", k.key, err)
			}
		}
	}

	r := resolver{v: v, cmd: cmd, file: file}
	c := appConfig{
		AppID:           r.str(keyAppID),
		Brokers:         r.list(keyBrokers),
		CommitInterval:  r.duration(keyCommitInterval, false),
		IdleTimeout:     r.duration(keyIdleTimeout, true),
		StateDir:        r.str(keyStateDir),
		StandbyReplicas: r.nonNegInt(keyStandbyReplicas),
		StreamThreads:   r.nonNegInt(keyStreamThreads),
		AcceptableLag:   r.nonNegInt(keyAcceptableLag),
		MaxWarmups:      r.nonNegInt(keyMaxWarmups),
		ProbeInterval:   r.duration(keyProbeInterval, false),
		SessionTimeout:  r.duration(keySessionTimeout, false),
		InstanceID:      r.str(keyInstanceID),
		MaxRecordBytes:  r.nonNegInt(keyMaxRecordBytes),
		MemoryBudget:    r.bytes(keyMemoryBudget),
		PartFetchBytes:  r.bytes(keyPartFetchBytes),
		AppServer:       r.str(keyAppServer),
		HTTPAddress:     r.str(keyHTTPAddress),
		LogFormat:       strings.ToLower(r.str(keyLogFormat)),
	}
	c.FoldUpdates = r.bool(keyFoldUpdates)
	c.MemoryGoLimit = r.bool(keyMemoryGoLimit)
	if s := r.str(keyLogLevel); !r.failed(keyLogLevel) {
		if err := c.LogLevel.UnmarshalText([]byte(s)); err != nil {
			r.fail(keyLogLevel, strconv.Quote(s), errors.New("want debug, info, warn or error"))
		}
	}
	if c.LogFormat != "text" && c.LogFormat != "json" && !r.failed(keyLogFormat) {
		r.fail(keyLogFormat, strconv.Quote(c.LogFormat), errors.New("want text or json"))
	}
	if c.AppServer != "" {
		if h, p, err := net.SplitHostPort(c.AppServer); err != nil || h == "" || p == "" {
			r.fail(keyAppServer, strconv.Quote(c.AppServer), errors.New("want host:port"))
		}
	}
	if s := r.str(keyGuarantee); !r.failed(keyGuarantee) {
		g, err := txn.ParseGuarantee(s)
		if err != nil {
			r.fail(keyGuarantee, strconv.Quote(s), err)
		}
		c.Guarantee = g
	}
	r.require(keyAppID, c.AppID != "")
	r.require(keyBrokers, len(c.Brokers) > 0)
	r.require(keyStateDir, c.StateDir != "")
	r.require(keyMaxRecordBytes, c.MaxRecordBytes > 0)
	r.require(keyMaxWarmups, c.MaxWarmups > 0)
	if c.MemoryBudget < processor.MinMemoryBudget && !r.failed(keyMemoryBudget) {
		r.fail(keyMemoryBudget, c.MemoryBudget, fmt.Errorf("must be at least %s", formatBytes(processor.MinMemoryBudget)))
	}
	if (c.PartFetchBytes < 1 || c.PartFetchBytes > processor.MaxPartitionFetchBytesLimit) && !r.failed(keyPartFetchBytes) {
		r.fail(keyPartFetchBytes, c.PartFetchBytes, fmt.Errorf("must be between 1 and %s", formatBytes(processor.MaxPartitionFetchBytesLimit)))
	}
	if c.ProbeInterval > 0 && c.ProbeInterval < time.Second {
		r.fail(keyProbeInterval, c.ProbeInterval, errors.New("must be at least 1s"))
	}
	c.Security = r.loadSecurity()
	c.HTTP = r.loadHTTPSecurity()
	c.DB = r.loadDB()
	c.sources = map[string]string{}
	for _, k := range appKeys {
		c.sources[k.key] = r.source(k.key)
	}
	if err := errors.Join(r.errs...); err != nil {
		return appConfig{}, err
	}
	return c, nil
}

// checkKeys rejects keys that sluice does not know, so that a misspelt key
// fails loudly instead of silently leaving the default in force.
func checkKeys(file string, keys []string) error {
	var errs []error
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.ContainsFunc(appKeys, func(a struct{ key, flag string }) bool { return a.key == k }) {
			errs = append(errs, fmt.Errorf("config file %s: unknown key %q", file, k))
		}
	}
	if len(errs) > 0 {
		known := make([]string, len(appKeys))
		for i, a := range appKeys {
			known[i] = a.key
		}
		errs = append(errs, fmt.Errorf("known keys: %s", strings.Join(known, ", ")))
	}
	return errors.Join(errs...)
}

// opts converts c to processor options: the application id (whose default
// is the command's, not processor's), the connection's security, and the
// keys that were set (setKeys); every other key keeps processor's default.
func (c appConfig) opts() []processor.Opt {
	opts := []processor.Opt{processor.ApplicationID(c.AppID), processor.ClientOptions(c.Security.opts...)}
	for _, key := range c.setKeys() {
		if o := c.opt(key); o != nil {
			opts = append(opts, o)
		}
	}
	return opts
}

// setKeys lists, in --help order, the keys given by flag, environment or
// config file.
func (c appConfig) setKeys() []string {
	var keys []string
	for _, k := range appKeys {
		if s, ok := c.sources[k.key]; ok && s != "default" {
			keys = append(keys, k.key)
		}
	}
	return keys
}

// opt is the processor option of key with its value in c, nil for a key
// that is not one (application.id, the command's own, security).
func (c appConfig) opt(key string) processor.Opt {
	switch key {
	case keyBrokers:
		return processor.Brokers(c.Brokers...)
	case keyGuarantee:
		return processor.Guarantee(c.Guarantee)
	case keyCommitInterval:
		return processor.CommitInterval(c.CommitInterval)
	case keyStateDir:
		return processor.StateDir(c.StateDir)
	case keyStandbyReplicas:
		return processor.StandbyReplicas(c.StandbyReplicas)
	case keyStreamThreads:
		return processor.StreamThreads(c.StreamThreads)
	case keyFoldUpdates:
		return processor.FoldUpdates(c.FoldUpdates)
	case keyMemoryGoLimit:
		return processor.LimitGoMemory(c.MemoryGoLimit)
	case keyAcceptableLag:
		return processor.AcceptableRecoveryLag(int64(c.AcceptableLag))
	case keyMaxWarmups:
		return processor.MaxWarmupReplicas(c.MaxWarmups)
	case keyProbeInterval:
		return processor.ProbingRebalanceInterval(c.ProbeInterval)
	case keySessionTimeout:
		return processor.SessionTimeout(c.SessionTimeout)
	case keyInstanceID:
		return processor.InstanceID(c.InstanceID)
	case keyMaxRecordBytes:
		return processor.MaxRecordBytes(c.MaxRecordBytes)
	case keyIdleTimeout:
		return processor.IdleTimeout(c.IdleTimeout)
	case keyAppServer:
		return processor.AdvertisedEndpoint(c.AppServer)
	case keyMemoryBudget:
		return processor.MemoryBudget(c.MemoryBudget)
	case keyPartFetchBytes:
		return processor.MaxPartitionFetchBytes(int(c.PartFetchBytes))
	}
	return nil
}

// logger returns the instance's logger: slog on w, in the configured format
// and level.
func (c appConfig) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// clientOpts returns the franz-go options every client that sluice's
// commands create for this configuration starts from: the seed brokers and
// the connection's security.
func (c appConfig) clientOpts() []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.Security.opts...)
}

// resolver reads typed values from v, collecting every invalid one so that a
// user fixes their configuration in one pass.
type resolver struct {
	v    *viper.Viper
	cmd  *cobra.Command
	file string
	errs []error
	bad  []string // keys already reported
}

// source names where key's value came from, following viper's precedence,
// because "invalid value" alone leaves the user searching three places.
func (r *resolver) source(key string) string {
	for _, k := range appKeys {
		if k.key != key {
			continue
		}
		if f := r.cmd.Flags().Lookup(k.flag); f != nil && f.Changed {
			return "flag --" + k.flag
		}
	}
	// Viper ignores empty variables, and so must this.
	if os.Getenv(envName(key)) != "" {
		return "environment " + envName(key)
	}
	if r.file != "" && r.v.InConfig(key) {
		return "config file " + r.file
	}
	return "default"
}

func (r *resolver) fail(key string, val any, err error) {
	r.bad = append(r.bad, key)
	// Masked: a password in the wrong shape must not reach the log.
	r.errs = append(r.errs, fmt.Errorf("invalid %s %s (from %s): %w", key, masked(key, fmt.Sprint(val)), r.source(key), err))
}

func (r *resolver) failed(key string) bool { return slices.Contains(r.bad, key) }

// require reports an empty key once, unless its value was already reported
// as invalid.
func (r *resolver) require(key string, ok bool) {
	if !ok && !r.failed(key) {
		r.bad = append(r.bad, key)
		r.errs = append(r.errs, fmt.Errorf("%s is required (flag, %s or config file)", key, envName(key)))
	}
}

// str accepts any YAML scalar: `application.id: 42` means the id "42".
func (r *resolver) str(key string) string {
	val := r.v.Get(key)
	switch val.(type) {
	case map[string]any, []any:
		r.fail(key, val, errors.New("want a single value"))
		return ""
	}
	s, err := cast.ToStringE(val)
	if err != nil {
		r.fail(key, val, err)
	}
	return strings.TrimSpace(s)
}

// list accepts a comma-separated string (flags, environment) or a YAML list.
func (r *resolver) list(key string) []string {
	var items []string
	switch val := r.v.Get(key).(type) {
	case string:
		items = strings.Split(val, ",")
	case []string:
		items = val
	case []any:
		for _, e := range val {
			s, err := cast.ToStringE(e)
			if err != nil {
				r.fail(key, val, fmt.Errorf("list item %v: %w", e, err))
				return nil
			}
			items = append(items, s)
		}
	default:
		r.fail(key, val, errors.New("want a comma-separated string or a list"))
		return nil
	}
	var out []string
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// duration accepts only Go duration strings: cast would read a bare number
// as nanoseconds, and `commit.interval: 100` meant as milliseconds must not
// commit ten million times a second. It must be positive, or with zeroOK
// not negative.
func (r *resolver) duration(key string, zeroOK bool) time.Duration {
	var d time.Duration
	switch val := r.v.Get(key).(type) {
	case time.Duration:
		d = val
	case string:
		var err error
		if d, err = time.ParseDuration(strings.TrimSpace(val)); err != nil {
			r.fail(key, strconv.Quote(val), errors.New("want a Go duration such as 100ms or 2s"))
			return 0
		}
	default:
		r.fail(key, val, errors.New("want a Go duration such as 100ms or 2s"))
		return 0
	}
	switch {
	case d < 0 && zeroOK:
		r.fail(key, d, errors.New("must not be negative"))
	case d <= 0 && !zeroOK:
		r.fail(key, d, errors.New("must be positive"))
	case d > 0 && d < time.Millisecond:
		r.fail(key, d, errors.New("must be at least 1ms"))
	}
	return d
}

// bool accepts true or false (a YAML boolean, or a string as strconv.ParseBool
// reads it).
func (r *resolver) bool(key string) bool {
	s := r.str(key)
	if r.failed(key) {
		return false
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		r.fail(key, strconv.Quote(s), errors.New("want true or false"))
	}
	return b
}

func (r *resolver) nonNegInt(key string) int {
	val := r.v.Get(key)
	var n int
	switch x := val.(type) {
	case int:
		n = x
	case string:
		var err error
		if n, err = strconv.Atoi(strings.TrimSpace(x)); err != nil {
			r.fail(key, strconv.Quote(x), errors.New("want an integer"))
			return 0
		}
	default:
		r.fail(key, val, errors.New("want an integer"))
		return 0
	}
	if n < 0 {
		r.fail(key, n, errors.New("must not be negative"))
	}
	return n
}

// bytes accepts a size in bytes: a YAML number, or a string with an
// optional unit (parseBytes).
func (r *resolver) bytes(key string) int64 {
	val := r.v.Get(key)
	switch x := val.(type) {
	case int:
		if x < 0 {
			r.fail(key, x, errors.New("must not be negative"))
			return 0
		}
		return int64(x)
	case int64:
		if x < 0 {
			r.fail(key, x, errors.New("must not be negative"))
			return 0
		}
		return x
	case string:
		n, err := parseBytes(x)
		if err != nil {
			r.fail(key, strconv.Quote(x), err)
		}
		return n
	}
	r.fail(key, val, errBadBytes)
	return 0
}
