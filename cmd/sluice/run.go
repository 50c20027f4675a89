package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/plugin/sluiceprom"
	"github.com/sluice-streams/sluice/processor"
)

func init() { subcommands = append(subcommands, newRunCmd, newTopologyCmd) }

// addExampleFlags adds one flag per parameter of any example (--input,
// --output, ...); each example reads the ones it has.
func addExampleFlags(cmd *cobra.Command) {
	seen := map[string]bool{}
	for _, name := range examples.Names() {
		e, _ := examples.Get(name)
		for _, p := range e.Params {
			if seen[p.Name] {
				continue
			}
			seen[p.Name] = true
			cmd.Flags().String(p.Name, "", fmt.Sprintf("%s (%s default %q)", p.Usage, e.Name, p.Default))
		}
	}
}

func exampleParams(cmd *cobra.Command, e examples.Example) map[string]string {
	given := map[string]string{}
	for _, p := range e.Params {
		if f := cmd.Flags().Lookup(p.Name); f != nil && f.Changed {
			given[p.Name] = f.Value.String()
		}
	}
	return e.Defaults(given)
}

func newRunCmd() *cobra.Command {
	var (
		createMissing bool
		partitions    int32
		bounded       boundedFlags   // --bounded, --until (bounded.go)
		fromSP        savepointFlags // --from-savepoint, --allow-* (fromsavepoint.go)
	)
	cmd := &cobra.Command{
		Use:   "run <example>",
		Short: "Run one instance of a built-in example (" + fmt.Sprint(examples.Names()) + ")",
		Long: `Run one instance of a built-in example. Any number of instances with the
same application id share the work; SIGINT or SIGTERM commits, closes the
tasks and leaves the group.

The example's input and output topics must exist: a missing one is named
with the command that creates it. --create-topics creates the missing ones
first (--partitions each); the internal topics (repartition, changelog,
dead letters) are always the instance's to create.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := examples.Get(args[0])
			if err != nil {
				return err
			}
			cfg, err := loadAppConfig(cmd, "sluice-"+e.Name)
			if err != nil {
				return err
			}
			log := cfg.logger(os.Stderr)
			params := exampleParams(cmd, e)
			opts := append(cfg.opts(), processor.Logger(log))
			bopts, err := bounded.opts()
			if err != nil {
				return err
			}
			opts = append(opts, bopts...)
			opts = append(opts, fromSP.opts()...)
			if e.Options != nil {
				opts = append(opts, e.Options(params)...)
			}
			// Bound before the app exists, so that the HTTP address can
			// be its advertised endpoint (application.server) when
			// none is configured.
			var ln net.Listener
			var reg *prometheus.Registry
			if cfg.HTTPAddress != "" {
				if ln, err = listenHTTP(cfg.HTTPAddress); err != nil {
					return err
				}
				reg = prometheus.NewRegistry()
				opts = append(opts, sluiceprom.ClientMetrics(reg))
				defer ln.Close() // if serving never starts
				if cfg.AppServer == "" {
					opts = append(opts, processor.AdvertisedEndpoint(advertisable(ln)))
				}
			}
			topo, closeDB, err := buildWithDB(cmd.Context(), e, params, cfg.DB)
			if err != nil {
				return err
			}
			defer closeDB()
			app, err := processor.New(topo, opts...)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if cmd.Flags().Changed("partitions") && !createMissing {
				return fmt.Errorf("run: --partitions %d is the partition count of the topics --create-topics creates; without it, it means nothing", partitions)
			}
			if err := ensureUserTopics(ctx, cmd.OutOrStdout(), cfg, app.Topology(), createMissing, partitions); err != nil {
				return err
			}
			if ln != nil {
				defer serveOn(ln, app, reg, log, cfg.HTTP)()
				log.Info("http listening", "addr", ln.Addr().String(), "application.server", app.Endpoint())
			}
			log.Info("starting", "example", e.Name, "application.id", cfg.AppID, "guarantee", cfg.Guarantee.String())
			if err := app.Run(ctx); err != nil {
				return err
			}
			bounded.report(cmd.OutOrStdout(), app)
			if dir := app.StoppedWithSavepoint(); dir != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "stopped with savepoint %s\n", dir)
			}
			return nil
		},
	}
	bounded.add(cmd)
	fromSP.add(cmd)
	cmd.Flags().BoolVar(&createMissing, "create-topics", false, "create the example's missing input and output topics before starting")
	cmd.Flags().Int32Var(&partitions, "partitions", 4, "with --create-topics: partitions of each topic created")
	addAppFlags(cmd)
	addExampleFlags(cmd)
	return cmd
}

func newTopologyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topology <example>",
		Short: "Print the topology of a built-in example",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := examples.Get(args[0])
			if err != nil {
				return err
			}
			built, err := e.Build(exampleParams(cmd, e)).Build()
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), built.Describe())
			return nil
		},
	}
	addExampleFlags(cmd)
	return cmd
}
