package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultListen is the address a broker listens on when Config.Listen is
// empty: loopback, on a port chosen by the kernel.
const DefaultListen = "127.0.0.1:0"

// Config configures a broker. The zero value is a usable in-memory broker on
// a random loopback port.
type Config struct {
	// Listen is the host:port to listen on. Default DefaultListen. An empty
	// host means loopback, not every interface: by default kfake has no
	// authentication, so exposing it must be asked for by naming the host
	// (e.g. "0.0.0.0:9092"). The host is also what the broker advertises
	// in metadata, so clients must be able to reach it.
	Listen string
	// DataDir, when set, makes the broker persist topics, offsets, groups
	// and transactions to this directory, and reload them on start.
	// Default: memory only.
	DataDir string
	// Partitions is the partition count of auto-created topics, of Topics
	// given 0 and of topics created with -1 partitions. Default 1.
	Partitions int
	// Topics are created at the first start, name → partitions (0:
	// Partitions). A broker that reloads its DataDir keeps the topics it
	// had and creates none. Default: none.
	Topics map[string]int32
	// Logger receives kfake's log lines, at the matching slog level.
	// Default: discard.
	Logger *slog.Logger
	// Users, when not empty, turns SASL on: a connection must
	// authenticate as one of them before any other request. Users are
	// superusers (kfake has no ACLs unless asked). Default: none, no
	// authentication.
	Users []User
	// TLS, when set, makes the broker accept only TLS connections, with
	// this server config (ClientAuth set to tls.RequireAndVerifyClientCert
	// asks for mutual TLS). Certs.ServerTLS builds one from WriteCerts'
	// throwaway authority. Default: plaintext.
	TLS *tls.Config

	// withoutSessionArmer leaves kfake's session timers as they are, for
	// the test that shows the gap the armer closes (sessions.go).
	withoutSessionArmer bool
}

// SASL mechanisms the broker serves.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// User is a SASL user of the broker. A name may have one password per
// mechanism.
type User struct {
	Mechanism string // Plain, ScramSHA256 or ScramSHA512
	Name      string
	Password  string
}

// Broker is a running single-node kfake cluster.
type Broker struct {
	c     *kfake.Cluster
	armer *sessionArmer // nil on a secured broker (sessions.go)
	once  sync.Once
}

// Start starts a broker and returns once it accepts connections.
func Start(cfg Config) (*Broker, error) {
	listen := cfg.Listen
	if listen == "" {
		listen = DefaultListen
	}
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("broker: invalid listen address %q: %w", listen, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("broker: invalid listen port %q", portStr)
	}
	parts := cfg.Partitions
	if parts == 0 {
		parts = 1
	}
	if parts < 0 {
		return nil, fmt.Errorf("broker: partitions must be positive, got %d", parts)
	}

	opts := []kfake.Opt{
		// Ports also fixes the node count to one: a development broker
		// gains nothing from kfake's default of three nodes, and one
		// node means one address to print and to dial.
		kfake.Ports(port),
		// kfake always asks to listen on 127.0.0.1; keep the port it
		// asks for (nodes added later via Cluster().AddNode pick their
		// own) but bind the host we were given.
		kfake.ListenFn(func(network, address string) (net.Listener, error) {
			_, p, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			return net.Listen(network, net.JoinHostPort(host, p))
		}),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(parts),
	}
	for name, n := range cfg.Topics {
		if n < 0 {
			return nil, fmt.Errorf("broker: topic %q: partitions must be positive, got %d", name, n)
		}
		opts = append(opts, kfake.SeedTopics(n, name))
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	if len(cfg.Users) > 0 {
		opts = append(opts, kfake.EnableSASL())
	}
	for _, u := range cfg.Users {
		switch u.Mechanism {
		case Plain, ScramSHA256, ScramSHA512:
		default:
			// The password stays out of the message: it may be
			// read from a log.
			return nil, fmt.Errorf("broker: user %q: unknown SASL mechanism %q (want %s, %s or %s)", u.Name, u.Mechanism, Plain, ScramSHA256, ScramSHA512)
		}
		if u.Name == "" || u.Password == "" {
			return nil, fmt.Errorf("broker: %s user %q: name and password are required", u.Mechanism, u.Name)
		}
		opts = append(opts, kfake.Superuser(u.Mechanism, u.Name, u.Password))
	}
	if cfg.TLS != nil {
		opts = append(opts, kfake.TLS(cfg.TLS))
	}
	if cfg.Logger != nil {
		opts = append(opts, kfake.WithLogger(slogLogger{cfg.Logger}))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("broker: start: %w", err)
	}
	b := &Broker{c: c}
	if len(cfg.Users) == 0 && cfg.TLS == nil && !cfg.withoutSessionArmer {
		if b.armer, err = startSessionArmer(c); err != nil {
			c.Close()
			return nil, fmt.Errorf("broker: start: %w", err)
		}
	}
	return b, nil
}

// Addrs returns the host:port of every node, for kgo.SeedBrokers.
func (b *Broker) Addrs() []string { return b.c.ListenAddrs() }

// Cluster returns the underlying kfake cluster, for fault injection.
func (b *Broker) Cluster() *kfake.Cluster { return b.c }

// Close stops the broker and, with a DataDir, flushes its state to disk. It
// is safe to call more than once.
func (b *Broker) Close() {
	b.once.Do(func() {
		if b.armer != nil {
			b.armer.close()
		}
	})
	b.c.Close()
}

// CreateTopic creates topic with the given partition count (-1: the broker's
// default) and topic configs, e.g. {"cleanup.policy": kadm.StringPtr("compact")}.
// A topic that already exists is not an error, so callers can ensure their
// topics on every start; its partitions and configs are left as they are.
// opts are added to the client's, e.g. kgo.SASL or kgo.DialTLSConfig for a
// secured broker.
func CreateTopic(ctx context.Context, addrs []string, topic string, partitions int32, configs map[string]*string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		return fmt.Errorf("broker: create topic %s: %w", topic, err)
	}
	defer cl.Close()
	// -1 replication factor: the broker's default, which works on a
	// one-node kfake and on a real cluster alike.
	_, err = kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, configs, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("broker: create topic %s: %w", topic, err)
	}
	return nil
}

// slogLogger adapts slog to kfake.Logger.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var lvl slog.Level
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	case kfake.LogLevelInfo:
		lvl = slog.LevelInfo
	case kfake.LogLevelDebug:
		lvl = slog.LevelDebug
	default:
		return
	}
	// kfake calls Logf whatever the level; skip the Sprintf when the
	// handler would drop the line anyway.
	if !s.l.Enabled(context.Background(), lvl) {
		return
	}
	s.l.Log(context.Background(), lvl, fmt.Sprintf(format, args...), "component", "kfake")
}
