package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluice-streams/sluice/internal/broker"
)

func init() { subcommands = append(subcommands, newBrokerCmd) }

// newBrokerCmd returns `sluice broker`, the embedded development broker as a
// process of its own, for running several sluice instances against it.
func newBrokerCmd() *cobra.Command {
	var (
		cfg        broker.Config
		logLevel   slog.Level
		users      []string
		tlsDir     string
		clientAuth bool
		topics     []string
	)
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run the embedded Kafka-protocol broker (kfake) for development",
		Long: `Run franz-go's kfake, an in-process Kafka-protocol broker, until interrupted.

It prints one "sluice broker listening on HOST:PORT" line per address on
stdout and keeps everything in memory unless --data-dir is given. It creates
the topics --topics names at its first start; later, create topics with
"sluice topic create". It creates a missing topic on its own only for a
client that asks for it (Kafka's auto.create.topics.enable): sluice's
instances and tools never ask, so that a mistyped name is an error, not a
new topic. It has no authentication unless --sasl-user or --tls-dir asks for
it, and listens on loopback unless --listen names another host.

--sasl-user and --tls-dir are for trying sluice's security.protocol, sasl.*
and ssl.* settings locally: the users' passwords are on the command line and
the certificate authority is a throwaway one written to the directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Restore the default handling as soon as the first
			// signal arrives, so a second one kills a broker that
			// is slow to flush its data directory.
			context.AfterFunc(ctx, stop)
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: logLevel}))
			if err := secureBroker(&cfg, users, tlsDir, clientAuth, cmd.ErrOrStderr()); err != nil {
				return err
			}
			var err error
			if cfg.Topics, err = parseTopicSpecs(topics); err != nil {
				return err
			}
			return runBroker(ctx, cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:9092", "`host:port` to listen on (port 0: random)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "persist to and reload from this `directory` (default: memory only)")
	f.IntVar(&cfg.Partitions, "partitions", 1, "partition count of topics created without one")
	f.StringSliceVar(&topics, "topics", nil, "create these topics at the first start: `name[:partitions],...` (default partitions: --partitions)")
	f.TextVar(&logLevel, "log-level", slog.LevelWarn, "broker log `level` on stderr: debug, info, warn or error")
	f.StringArrayVar(&users, "sasl-user", nil, "require SASL and accept this `MECHANISM:USER:PASSWORD` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; repeatable)")
	f.StringVar(&tlsDir, "tls-dir", "", "serve TLS only, with a throwaway CA and certificates written to this `directory` (ca.pem, client.pem, client-key.pem for clients)")
	f.BoolVar(&clientAuth, "tls-client-auth", false, "with --tls-dir: require client certificates signed by its CA (mutual TLS)")
	return cmd
}

// parseTopicSpecs reads --topics: name[:partitions], each name once.
func parseTopicSpecs(specs []string) (map[string]int32, error) {
	topics := map[string]int32{}
	for _, spec := range specs {
		name, n, hasN := strings.Cut(strings.TrimSpace(spec), ":")
		if name == "" {
			return nil, fmt.Errorf("broker: --topics %q: want name[:partitions]", spec)
		}
		if _, dup := topics[name]; dup {
			return nil, fmt.Errorf("broker: --topics names %q twice", name)
		}
		topics[name] = 0
		if hasN {
			p, err := strconv.ParseInt(n, 10, 32)
			if err != nil || p < 1 {
				return nil, fmt.Errorf("broker: --topics %q: partitions must be a positive integer", spec)
			}
			topics[name] = int32(p)
		}
	}
	return topics, nil
}

// secureBroker adds the SASL users and the TLS config of the flags to cfg,
// and tells on log where the client's certificate files are.
func secureBroker(cfg *broker.Config, users []string, tlsDir string, clientAuth bool, log io.Writer) error {
	for i, u := range users {
		mech, rest, ok1 := strings.Cut(u, ":")
		name, pass, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			// The value is not repeated: it holds a password.
			return fmt.Errorf("broker: --sasl-user #%d: want MECHANISM:USER:PASSWORD", i+1)
		}
		cfg.Users = append(cfg.Users, broker.User{Mechanism: strings.ToUpper(mech), Name: name, Password: pass})
	}
	if tlsDir == "" {
		if clientAuth {
			return errors.New("broker: --tls-client-auth needs --tls-dir")
		}
		return nil
	}
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		return fmt.Errorf("broker: --tls-dir: %w", err)
	}
	certs, err := broker.WriteCerts(tlsDir)
	if err != nil {
		return err
	}
	if cfg.TLS, err = certs.ServerTLS(clientAuth); err != nil {
		return err
	}
	_, err = fmt.Fprintf(log, "sluice broker TLS: ssl.ca.location=%s ssl.certificate.location=%s ssl.key.location=%s\n", certs.CA, certs.ClientCert, certs.ClientKey)
	return err
}

// runBroker runs a broker until ctx is done.
func runBroker(ctx context.Context, cfg broker.Config, out io.Writer) error {
	b, err := broker.Start(cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	for _, addr := range b.Addrs() {
		if _, err := fmt.Fprintf(out, "sluice broker listening on %s\n", addr); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}
