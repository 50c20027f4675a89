package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { subcommands = append(subcommands, newTopicCmd) }

// topicTimeout bounds each topic command's requests.
const topicTimeout = 30 * time.Second

func newTopicCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic create|list|describe|delete",
		Short: "Create, list, describe and delete topics (the kafka-topics tool, for the embedded broker or any cluster)",
		Long: `topic manages topics on the cluster --brokers names, with the security
settings of run (security.protocol, sasl.*, ssl.*):

  sluice topic create NAME [NAME...] [--partitions 4] [--compact] [--config key=value ...]
  sluice topic list
  sluice topic describe NAME [NAME...]
  sluice topic delete NAME [NAME...]`,
	}
	cmd.AddCommand(newTopicCreateCmd(), newTopicListCmd(), newTopicDescribeCmd(), newTopicDeleteCmd())
	return cmd
}

// topicAdmin is the admin client of a topic command, from the instance
// configuration's brokers and security settings.
func topicAdmin(cmd *cobra.Command) (*kadm.Client, func(), error) {
	cfg, err := loadAppConfig(cmd, "sluice-topic")
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(cfg.clientOpts()...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// addTopicFlags gives a topic subcommand the instance flags, hiding all but
// the brokers and the security settings: the rest mean nothing to it, and
// stay accepted only because a shared environment or file may set them.
func addTopicFlags(cmd *cobra.Command) {
	own := map[string]bool{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) { own[f.Name] = true })
	addAppFlags(cmd)
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		keep := own[f.Name] || f.Name == "brokers" ||
			strings.HasPrefix(f.Name, "security-") || strings.HasPrefix(f.Name, "sasl-") || strings.HasPrefix(f.Name, "ssl-")
		if !keep {
			f.Hidden = true
		}
	})
}

// topicConfigs parses --compact and --config key=value into topic configs.
func topicConfigs(compact bool, kvs []string) (map[string]*string, error) {
	configs := map[string]*string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return nil, fmt.Errorf("--config %q: want key=value", kv)
		}
		configs[k] = kadm.StringPtr(v)
	}
	if compact {
		if p, ok := configs["cleanup.policy"]; ok && *p != "compact" {
			return nil, fmt.Errorf("--compact and --config cleanup.policy=%s disagree", *p)
		}
		configs["cleanup.policy"] = kadm.StringPtr("compact")
	}
	return configs, nil
}

func newTopicCreateCmd() *cobra.Command {
	var (
		partitions  int32
		compact     bool
		kvs         []string
		ifNotExists bool
	)
	cmd := &cobra.Command{
		Use:   "create NAME [NAME...] [--partitions 4] [--compact] [--config key=value ...]",
		Short: "Create topics",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if partitions < 1 {
				return fmt.Errorf("topic create: --partitions %d must be at least 1", partitions)
			}
			configs, err := topicConfigs(compact, kvs)
			if err != nil {
				return fmt.Errorf("topic create: %w", err)
			}
			adm, closeAdm, err := topicAdmin(cmd)
			if err != nil {
				return fmt.Errorf("topic create: %w", err)
			}
			defer closeAdm()
			ctx, cancel := context.WithTimeout(cmd.Context(), topicTimeout)
			defer cancel()
			return createTopics(ctx, cmd.OutOrStdout(), adm, partitions, configs, ifNotExists, args)
		},
	}
	f := cmd.Flags()
	f.Int32Var(&partitions, "partitions", 4, "partitions of each topic")
	f.BoolVar(&compact, "compact", false, "cleanup.policy=compact (a table's or changelog's topic)")
	f.StringArrayVar(&kvs, "config", nil, "a topic config `key=value` (repeatable), e.g. retention.ms=86400000")
	f.BoolVar(&ifNotExists, "if-not-exists", false, "a topic that exists already is not an error")
	addTopicFlags(cmd)
	return cmd
}

// createTopics creates names, printing a line for each; every topic that
// could not be created is named in the error, after the others were tried.
func createTopics(ctx context.Context, w io.Writer, adm *kadm.Client, partitions int32, configs map[string]*string, ifNotExists bool, names []string) error {
	resps, err := adm.CreateTopics(ctx, partitions, -1, configs, names...)
	if err != nil {
		return fmt.Errorf("topic create: %w", err)
	}
	var errs []error
	for _, name := range names {
		r, ok := resps[name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("topic create: %s: no answer from the cluster", name))
		case errors.Is(r.Err, kerr.TopicAlreadyExists) && ifNotExists:
			fmt.Fprintf(w, "topic %s exists already\n", name)
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("topic create: %s: %w%s", name, r.Err, detail(r.ErrMessage)))
		default:
			fmt.Fprintf(w, "created topic %s (%d partition%s)\n", name, partitions, plural(int64(partitions)))
		}
	}
	return errors.Join(errs...)
}

// detail is a broker's error message, if it sent one, for after an error.
func detail(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}

func newTopicListCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List topics, one a line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, closeAdm, err := topicAdmin(cmd)
			if err != nil {
				return fmt.Errorf("topic list: %w", err)
			}
			defer closeAdm()
			ctx, cancel := context.WithTimeout(cmd.Context(), topicTimeout)
			defer cancel()
			list := adm.ListTopics
			if all {
				list = adm.ListTopicsWithInternal
			}
			td, err := list(ctx)
			if err != nil {
				return fmt.Errorf("topic list: %w", err)
			}
			for _, name := range td.Names() {
				fmt.Fprintln(cmd.OutOrStdout(), name)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "also the cluster's internal topics (__consumer_offsets, __transaction_state)")
	addTopicFlags(cmd)
	return cmd
}

func newTopicDescribeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe NAME [NAME...]",
		Short: "Show topics' partitions, their start, end and last stable offsets, and configs",
		Long: `describe prints, for each topic, its partitions with their leader and
their start offset, end offset (the high watermark) and last stable offset
(what a read_committed consumer can read up to: below the end while a
transaction is open), then the topic's configs that are not the cluster's
defaults.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, closeAdm, err := topicAdmin(cmd)
			if err != nil {
				return fmt.Errorf("topic describe: %w", err)
			}
			defer closeAdm()
			ctx, cancel := context.WithTimeout(cmd.Context(), topicTimeout)
			defer cancel()
			return describeTopics(ctx, cmd.OutOrStdout(), adm, args)
		},
	}
	addTopicFlags(cmd)
	return cmd
}

// describeTopics prints each of names; a topic that does not exist is
// named in the error, after the others were printed.
func describeTopics(ctx context.Context, w io.Writer, adm *kadm.Client, names []string) error {
	td, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("topic describe: %w", err)
	}
	starts, serr := adm.ListStartOffsets(ctx, names...)
	ends, eerr := adm.ListEndOffsets(ctx, names...)
	stables, lerr := adm.ListCommittedOffsets(ctx, names...)
	configs, cerr := adm.DescribeTopicConfigs(ctx, names...)
	if err := errors.Join(serr, eerr, lerr); err != nil {
		return fmt.Errorf("topic describe: offsets: %w", err)
	}
	var errs []error
	for _, name := range names {
		d, ok := td[name]
		if !ok || d.Err != nil {
			cause := error(kerr.UnknownTopicOrPartition)
			if ok {
				cause = d.Err
			}
			errs = append(errs, fmt.Errorf("topic describe: %s: %w", name, cause))
			continue
		}
		fmt.Fprintf(w, "topic %s: %d partitions\n", name, len(d.Partitions))
		fmt.Fprintf(w, "  %-9s  %6s  %12s  %12s  %12s\n", "partition", "leader", "start", "end", "last-stable")
		for _, p := range d.Partitions.Sorted() {
			off := func(lo kadm.ListedOffsets) string {
				o, ok := lo.Lookup(name, p.Partition)
				if !ok || o.Err != nil {
					return "?"
				}
				return fmt.Sprint(o.Offset)
			}
			fmt.Fprintf(w, "  %-9d  %6d  %12s  %12s  %12s\n", p.Partition, p.Leader, off(starts), off(ends), off(stables))
		}
		if cerr != nil {
			fmt.Fprintf(w, "  configs: %v\n", cerr)
			continue
		}
		for _, rc := range configs {
			if rc.Name != name {
				continue
			}
			var set []string
			for _, c := range rc.Configs {
				if c.Value != nil && c.Source != kmsg.ConfigSourceDefaultConfig {
					set = append(set, c.Key+"="+*c.Value)
				}
			}
			slices.Sort(set)
			fmt.Fprintf(w, "  configs: %s\n", strings.Join(set, " "))
		}
	}
	return errors.Join(errs...)
}

func newTopicDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete NAME [NAME...]",
		Short: "Delete topics",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, closeAdm, err := topicAdmin(cmd)
			if err != nil {
				return fmt.Errorf("topic delete: %w", err)
			}
			defer closeAdm()
			ctx, cancel := context.WithTimeout(cmd.Context(), topicTimeout)
			defer cancel()
			resps, err := adm.DeleteTopics(ctx, args...)
			if err != nil {
				return fmt.Errorf("topic delete: %w", err)
			}
			var errs []error
			for _, name := range args {
				r, ok := resps[name]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("topic delete: %s: no answer from the cluster", name))
				case r.Err != nil:
					errs = append(errs, fmt.Errorf("topic delete: %s: %w%s", name, r.Err, detail(r.ErrMessage)))
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %s\n", name)
				}
			}
			return errors.Join(errs...)
		},
	}
	addTopicFlags(cmd)
	return cmd
}
