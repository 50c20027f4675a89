package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/savepoint"
)

func init() { subcommands = append(subcommands, newSavepointCmd) }

// savepointHiddenFlags are the instance settings addAppFlags adds that mean
// nothing to taking a savepoint: accepted (a shared config file or the
// environment sets them), kept out of --help.
var savepointHiddenFlags = []string{"guarantee", "commit-interval", "state-dir", "stream-threads", "fold-updates", "standby-replicas", "acceptable-recovery-lag", "max-warmup-replicas", "probing-rebalance-interval", "session-timeout", "instance-id", "max-record-bytes", "idle-timeout", "advertised-endpoint", "http"}

func newSavepointCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "savepoint",
		Short: "Take savepoints of a running application",
	}
	cmd.AddCommand(newSavepointCreateCmd())
	return cmd
}

func newSavepointCreateCmd() *cobra.Command {
	var (
		to        string
		goOn      bool
		timeout   time.Duration
		appIDFlag = "app-id"
	)
	cmd := &cobra.Command{
		Use:   "create --app-id ID --to DIR [--continue] [--timeout 60s] [--brokers ...]",
		Short: "Take a savepoint of a running application: its stores and input offsets at a consistent cut (Flink's stop-with-savepoint)",
		Long: `Take a savepoint of the running application --app-id into --to DIR, which
must not exist:

  1. ask every instance, through the topic <app-id>-savepoint-control (no
     HTTP port needed), to pause its input topics and commit;
  2. wait until every member of the group has paused and the application's
     repartition topics are drained;
  3. write the input offsets (with their metadata), every store's
     partitions (copied from its changelog up to the cut) and a manifest;
  4. then the instances stop (their run exits 0), or go on with --continue.

If an instance does not answer, or anything fails, within --timeout, the
instances go on, nothing is written, and the command fails naming what did not
answer. Read a savepoint with "sluice state ls DIR".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if !f.Changed(appIDFlag) {
				return errors.New("savepoint create: --app-id is required: name the application on the command line")
			}
			if to == "" {
				return errors.New("savepoint create: --to is required: the directory to write the savepoint to (it must not exist)")
			}
			if timeout <= 0 {
				return fmt.Errorf("savepoint create: --timeout must be positive, got %v", timeout)
			}
			cfg, err := loadAppConfig(cmd, "")
			if err != nil {
				return fmt.Errorf("savepoint create: %w", err)
			}
			opts := []processor.Opt{processor.Brokers(cfg.Brokers...), processor.ClientOptions(cfg.Security.opts...),
				processor.Logger(cfg.logger(cmd.ErrOrStderr())), processor.SavepointTimeout(timeout)}
			if goOn {
				opts = append(opts, processor.SavepointContinue())
			}
			// The timeout bounds the savepoint; a minute more for the
			// release and the clients' shutdown.
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout+time.Minute)
			defer cancel()
			m, err := processor.TakeSavepoint(ctx, cfg.AppID, to, opts...)
			if err != nil {
				return fmt.Errorf("savepoint create: %w", err)
			}
			printSavepoint(cmd.OutOrStdout(), to, m, goOn)
			return nil
		},
	}
	f := cmd.Flags()
	addAppFlags(cmd)
	f.Lookup(appIDFlag).Usage = "application.id of the running application (required)"
	for _, name := range savepointHiddenFlags {
		_ = f.MarkHidden(name)
	}
	f.VisitAll(func(fl *pflag.Flag) {
		if strings.HasPrefix(fl.Name, "db") || strings.HasPrefix(fl.Name, "http-") {
			fl.Hidden = true // billing's database, the HTTP server's security
		}
	})
	f.StringVar(&to, "to", "", "write the savepoint to `DIR` (required; it must not exist)")
	f.BoolVar(&goOn, "continue", false, "let the instances go on after the savepoint (default: they stop)")
	f.DurationVar(&timeout, "timeout", processor.DefaultSavepointTimeout, "give up (and let the instances go on) if the savepoint is not written within this `duration`")
	return cmd
}

// printSavepoint says where everything went.
func printSavepoint(w io.Writer, dir string, m *savepoint.Manifest, goOn bool) {
	fmt.Fprintf(w, "savepoint %s of application %s written to %s\n", m.ID, m.Application, dir)
	fmt.Fprintf(w, "  topology %s\n", m.Fingerprint)
	for _, in := range m.Inputs {
		offs := make([]string, len(in.Offsets))
		for i, o := range in.Offsets {
			offs[i] = fmt.Sprintf("%d:%d", o.Partition, o.Offset)
		}
		fmt.Fprintf(w, "  input %s (%d partitions) at offsets %s\n", in.Topic, in.Partitions, strings.Join(offs, " "))
	}
	for _, s := range m.Stores {
		ends := make([]string, len(s.Parts))
		for i, p := range s.Parts {
			ends[i] = fmt.Sprintf("%d:%d", p.Partition, p.ChangelogEnd)
		}
		fmt.Fprintf(w, "  store %s (%s, %d partitions): %d records, from %s up to %s\n", s.Name, s.Layout, s.Partitions, s.Records, s.Changelog, strings.Join(ends, " "))
	}
	if goOn {
		fmt.Fprintln(w, "the instances go on")
	} else {
		fmt.Fprintln(w, "the instances stop")
	}
}
