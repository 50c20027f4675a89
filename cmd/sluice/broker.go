package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluice-streams/sluice/internal/broker"
)

func init() { subcommands = append(subcommands, newBrokerCmd) }

// newBrokerCmd returns `sluice broker`, the embedded development broker as a
// process of its own, for running several sluice instances against it.
func newBrokerCmd() *cobra.Command {
	var (
		cfg      broker.Config
		logLevel slog.Level
	)
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run the embedded Kafka-protocol broker (kfake) for development",
		Long: `Run franz-go's kfake, an in-process Kafka-protocol broker, until interrupted.

It prints one "sluice broker listening on HOST:PORT" line per address on
stdout, auto-creates topics, and keeps everything in memory unless --data-dir
is given. It has no authentication: it listens on loopback unless --listen
names another host.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Restore the default handling as soon as the first
			// signal arrives, so a second one kills a broker that
			// is slow to flush its data directory.
			context.AfterFunc(ctx, stop)
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: logLevel}))
			return runBroker(ctx, cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:9092", "`host:port` to listen on (port 0: random)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "persist to and reload from this `directory` (default: memory only)")
	f.IntVar(&cfg.Partitions, "partitions", 1, "partition count of auto-created topics")
	f.TextVar(&logLevel, "log-level", slog.LevelWarn, "broker log `level` on stderr: debug, info, warn or error")
	return cmd
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
