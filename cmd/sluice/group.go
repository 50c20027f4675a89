package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/groupview"
)

func init() { subcommands = append(subcommands, newGroupCmd) }

func newGroupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group describe",
		Short: "Describe an application's instances, their tasks and lag, from Kafka alone (kafka-streams-groups)",
	}
	cmd.AddCommand(newGroupDescribeCmd())
	return cmd
}

func newGroupDescribeCmd() *cobra.Command {
	var (
		format  string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "describe --app-id ID [--format text|json]",
		Short: "Show the instances of an application, the tasks each runs, their standbys and lag",
		Long: `describe reads the consumer group of the application (application.id) on
the cluster --brokers names, with the security settings of run, and prints
its state and generation, each instance (its advertised endpoint, host,
member and client id, active and standby tasks) and, per task, its input
partitions with the group's committed offset, the end offset a
read_committed consumer sees (the last stable offset) and the lag between
them. It needs no HTTP port of any instance (GET /instances on one answers
the same JSON as --format json).

A transactional input that is caught up (a repartition topic) may show a
small lag: the commit markers after its last record, one for each
instance whose transaction wrote to the partition last. An empty group (no instance running) is
an error, after its committed offsets and their lag are printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("group describe: --format %q: want text or json", format)
			}
			cfg, err := loadAppConfig(cmd, "")
			if err != nil {
				return fmt.Errorf("group describe: %w", err)
			}
			cl, err := kgo.NewClient(cfg.clientOpts()...)
			if err != nil {
				return fmt.Errorf("group describe: %w", err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			v, err := groupview.Describe(ctx, cl, cfg.AppID)
			brokers := strings.Join(cfg.Brokers, ",")
			var netErr *net.OpError
			switch {
			case errors.Is(err, groupview.ErrNoGroup):
				return fmt.Errorf("group describe: no application %q on %s: it has no consumer group (no instance has run with this application.id there)", cfg.AppID, brokers)
			case err != nil && (ctx.Err() != nil || errors.As(err, &netErr)):
				return fmt.Errorf("group describe: no answer from the brokers %s (are they up and reachable? --timeout %s): %w", brokers, timeout, err)
			case err != nil:
				return fmt.Errorf("group describe: %w", err)
			}
			out := cmd.OutOrStdout()
			if format == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(v); err != nil {
					return fmt.Errorf("group describe: %w", err)
				}
			} else {
				printGroupView(out, v)
			}
			if v.State == "Empty" {
				return fmt.Errorf("group describe: application %q has no instance running (its group is empty); its committed offsets and lag are shown above", cfg.AppID)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text (tables) or json (the JSON of GET /instances)")
	cmd.Flags().DurationVar(&timeout, "timeout", 15*time.Second, "how long to wait for the brokers")
	addTopicFlags(cmd)
	// addTopicFlags hides the instance flags a topic command has no use
	// for; this one needs the application id.
	cmd.Flags().Lookup("app-id").Hidden = false
	cmd.Flags().Lookup("app-id").Usage = "application.id: the application (its consumer group) to describe"
	return cmd
}

// printGroupView prints v as kafka-streams-groups describe does: a line for
// the application, a table of instances, a table of task partitions.
func printGroupView(w io.Writer, v groupview.View) {
	gen := "-"
	if v.Generation >= 0 {
		gen = strconv.Itoa(int(v.Generation))
	}
	fmt.Fprintf(w, "application %s: group %s, generation %s, %d instances, lag %d\n", v.Application, v.State, gen, len(v.Instances), v.Lag)
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	off := func(o int64) string {
		if o < 0 {
			return "-"
		}
		return strconv.FormatInt(o, 10)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(v.Instances) > 0 {
		fmt.Fprintln(tw, "\nENDPOINT\tHOST\tMEMBER-ID\tCLIENT-ID\tACTIVE-TASKS\tSTANDBY-TASKS\tLAG")
		for _, in := range v.Instances {
			ids := make([]string, len(in.Tasks))
			for i, t := range in.Tasks {
				ids[i] = t.ID
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", dash(in.Endpoint), dash(in.Host), in.MemberID, dash(in.ClientID),
				dash(strings.Join(ids, ",")), dash(strings.Join(in.Standbys, ",")), in.Lag)
		}
	}
	if len(v.Instances) > 0 || len(v.Unassigned) > 0 {
		fmt.Fprintln(tw, "\nENDPOINT\tTASK\tTOPIC\tPARTITION\tCOMMITTED\tEND\tLAG")
		for _, in := range v.Instances {
			for _, t := range in.Tasks {
				for _, p := range t.Partitions {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\n", dash(in.Endpoint), t.ID, p.Topic, p.Partition, off(p.Committed), off(p.End), p.Lag)
				}
			}
		}
		for _, p := range v.Unassigned {
			fmt.Fprintf(tw, "-\t-\t%s\t%d\t%s\t%s\t%d\n", p.Topic, p.Partition, off(p.Committed), off(p.End), p.Lag)
		}
	}
	tw.Flush()
}
