package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/statedir"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { subcommands = append(subcommands, newResetCmd) }

// resetHiddenFlags are the instance settings that addAppFlags adds but that
// mean nothing to a reset; they stay accepted (a shared config file or
// environment sets them) but out of --help.
var resetHiddenFlags = []string{"guarantee", "commit-interval", "standby-replicas", "acceptable-recovery-lag", "max-warmup-replicas", "probing-rebalance-interval", "session-timeout", "instance-id", "max-record-bytes", "idle-timeout", "advertised-endpoint", "http", "log-level", "log-format"}

// resetTopicWait bounds how long reset waits for deleted topics to disappear
// from the cluster's metadata (Kafka deletes asynchronously).
const resetTopicWait = 30 * time.Second

func newResetCmd() *cobra.Command {
	var (
		toEarliest  bool
		toDatetime  string
		byDuration  time.Duration
		inputTopics []string
		dryRun      bool
	)
	cmd := &cobra.Command{
		Use:   "reset --app-id ID [--to-earliest | --to-datetime T | --by-duration D] [--dry-run] [--state-dir DIR]",
		Short: "Reset an application so that it reprocesses its input from scratch (Kafka Streams' application reset tool)",
		Long: `Reset an application so that its next start reprocesses its input:

  1. refuse while the consumer group <app-id> has live members;
  2. commit new offsets for every input topic (the topics the group has
     committed offsets for, other than its internal topics, plus
     --input-topics): the earliest offsets (default), the first offsets at or
     after --to-datetime, or those at or after now minus --by-duration;
  3. delete the internal topics <app-id>-*-repartition and
     <app-id>-*-changelog, which the application recreates empty on start;
  4. with --state-dir, delete the local state <state-dir>/<app-id>; without
     it, print what to delete on each machine that ran an instance.

Output topics and the dead-letter topic <app-id>-dlq are not touched: a replay
appends to them. With --dry-run nothing is changed. Replaying the same input
produces the same results, per key, as the first run did (event time is
deterministic unless idle.timeout is on).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if !f.Changed("app-id") {
				return errors.New("reset: --app-id is required: name the application to reset on the command line (it is not taken from SLUICE_APPLICATION_ID or a config file, so that a reset never hits an application by accident)")
			}
			cfg, err := loadAppConfig(cmd, "")
			if err != nil {
				return fmt.Errorf("reset: %w", err)
			}
			target, err := parseResetTarget(f.Changed("to-earliest") && toEarliest, f.Changed("to-datetime"), toDatetime, f.Changed("by-duration"), byDuration, time.Now())
			if err != nil {
				return err
			}
			o := resetOptions{
				appID:       cfg.AppID,
				clientOpts:  cfg.clientOpts(),
				target:      target,
				inputTopics: inputTopics,
				dryRun:      dryRun,
				stateRoot:   cfg.StateDir,
				wipeState:   f.Changed("state-dir"),
				out:         cmd.OutOrStdout(),
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			return runReset(ctx, o)
		},
	}
	f := cmd.Flags()
	addAppFlags(cmd)
	f.Lookup("app-id").Usage = "application.id of the application to reset (required; also its consumer group and internal topic prefix)"
	sd := f.Lookup("state-dir")
	sd.Usage = "delete the application's local state `DIR`/<app-id> on this machine (without it, the path to delete under state.dir is printed)"
	// Only an explicit --state-dir deletes anything; a default shown in
	// --help would read as if it did.
	sd.DefValue = ""
	for _, name := range resetHiddenFlags {
		_ = f.MarkHidden(name) // a flag another file no longer adds is fine
	}
	f.BoolVar(&toEarliest, "to-earliest", false, "reset the input offsets to the earliest offsets (the default)")
	f.StringVar(&toDatetime, "to-datetime", "", "reset the input offsets to the first records at or after `T`, RFC 3339 (2026-11-29T10:00:00Z, or +01:00; without a zone: UTC)")
	f.DurationVar(&byDuration, "by-duration", 0, "reset the input offsets to the first records at or after now minus `D` (a Go duration: 90m, 24h)")
	f.StringSliceVar(&inputTopics, "input-topics", nil, "input `topics` to reset besides those the group has committed offsets for (comma-separated)")
	f.BoolVar(&dryRun, "dry-run", false, "print what the reset would do and change nothing")
	return cmd
}

// resetTarget is where the input offsets go: the log start, or the first
// offset at or after a timestamp.
type resetTarget struct {
	earliest bool
	millis   int64  // with !earliest
	desc     string // for the report
}

// parseResetTarget checks that at most one target was given and resolves it;
// --to-earliest is the default.
func parseResetTarget(earliest, hasDatetime bool, datetime string, hasDuration bool, d time.Duration, now time.Time) (resetTarget, error) {
	n := 0
	for _, b := range []bool{earliest, hasDatetime, hasDuration} {
		if b {
			n++
		}
	}
	if n > 1 {
		return resetTarget{}, errors.New("reset: give at most one of --to-earliest, --to-datetime and --by-duration")
	}
	switch {
	case hasDatetime:
		t, err := parseDatetime(datetime)
		if err != nil {
			return resetTarget{}, err
		}
		return resetTarget{millis: t.UnixMilli(), desc: "the first records at or after " + t.UTC().Format(time.RFC3339Nano)}, nil
	case hasDuration:
		if d <= 0 {
			return resetTarget{}, fmt.Errorf("reset: --by-duration must be positive, got %v", d)
		}
		t := now.Add(-d)
		return resetTarget{millis: t.UnixMilli(), desc: fmt.Sprintf("the first records at or after now - %v = %s", d, t.UTC().Format(time.RFC3339Nano))}, nil
	}
	return resetTarget{earliest: true, desc: "the earliest offsets"}, nil
}

// parseDatetime reads RFC 3339 with or without fractional seconds; a time
// without a zone is UTC (not the local zone, which differs between the
// machine that plans a reset and the one that runs it).
func parseDatetime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("reset: --to-datetime %q: want RFC 3339 such as 2026-11-29T10:00:00Z or 2026-11-29T11:00:00+01:00 (without a zone: UTC)", s)
}

type resetOptions struct {
	appID       string
	clientOpts  []kgo.Opt
	target      resetTarget
	inputTopics []string
	dryRun      bool
	// stateRoot is state.dir; with wipeState the reset deletes
	// stateRoot/appID, else it prints it.
	stateRoot string
	wipeState bool
	out       io.Writer
}

// runReset is `sluice reset`: see newResetCmd's Long help for the steps.
func runReset(ctx context.Context, o resetOptions) error {
	// A short metadata age: the client caches topic listings for that
	// long, and reset waits for deleted topics to disappear from them.
	cl, err := kgo.NewClient(append(slices.Clone(o.clientOpts), kgo.MetadataMinAge(100*time.Millisecond))...)
	if err != nil {
		return fmt.Errorf("reset: client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	w := o.out
	mode := ""
	if o.dryRun {
		mode = " (dry run: nothing is changed)"
	}
	fmt.Fprintf(w, "resetting application %q%s\n", o.appID, mode)

	// 1. Refuse while the group has members.
	if err := checkGroupEmpty(ctx, adm, o.appID); err != nil {
		return err
	}
	fmt.Fprintf(w, "consumer group %s: no live members\n", o.appID)

	// The local state must not be in use either (an instance holds its
	// lock from before it joins the group until after it left). Held
	// until the state is deleted.
	stateDir := ""
	if o.wipeState {
		if stateDir, err = appStateDir(o.stateRoot, o.appID); err != nil {
			return err
		}
		unlock, err := lockStateDir(stateDir)
		if err != nil {
			return err
		}
		defer unlock()
	}

	// 2. Input offsets.
	committed, err := adm.FetchOffsets(ctx, o.appID)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		committed, err = kadm.OffsetResponses{}, nil
	}
	if err != nil {
		return fmt.Errorf("reset: fetch the committed offsets of group %s: %w", o.appID, err)
	}
	var inputs, internalCommitted []string
	for t := range committed {
		if names.IsInternal(o.appID, t) {
			internalCommitted = append(internalCommitted, t)
		} else {
			inputs = append(inputs, t)
		}
	}
	for _, t := range o.inputTopics {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if names.IsInternal(o.appID, t) {
			return fmt.Errorf("reset: --input-topics names %s, an internal topic of %s: internal topics are deleted, not reset", t, o.appID)
		}
		if !slices.Contains(inputs, t) {
			inputs = append(inputs, t)
		}
	}
	sort.Strings(inputs)
	sort.Strings(internalCommitted)
	newOffsets, err := resetOffsets(ctx, adm, o.target, inputs)
	if err != nil {
		return err
	}
	if len(inputs) == 0 {
		fmt.Fprintln(w, "input offsets: none to reset (the group has no committed offsets and --input-topics is empty)")
	} else {
		fmt.Fprintf(w, "input offsets -> %s:\n", o.target.desc)
	}
	for _, n := range newOffsets.Sorted() {
		old := "none"
		if c, ok := committed.Lookup(n.Topic, n.Partition); ok && c.Err == nil && c.At >= 0 {
			old = fmt.Sprint(c.At)
		}
		fmt.Fprintf(w, "  %s/%d: %s -> %d\n", n.Topic, n.Partition, old, n.At)
	}

	// 3. Internal topics.
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("reset: list topics: %w", err)
	}
	var internal []string
	for _, t := range all.Names() {
		if names.IsInternal(o.appID, t) {
			internal = append(internal, t)
		}
	}
	sort.Strings(internal)
	if len(internal) == 0 {
		fmt.Fprintln(w, "internal topics: none to delete")
	} else {
		fmt.Fprintln(w, "internal topics to delete (the application recreates them empty on its next start):")
		for _, t := range internal {
			fmt.Fprintf(w, "  %s\n", t)
		}
	}
	fmt.Fprintf(w, "not touched: output topics and the dead-letter topic %s (a replay appends to them)\n", names.DeadLetter(o.appID))

	if o.dryRun {
		printStateStep(w, o, stateDir, true)
		fmt.Fprintln(w, "dry run: nothing was changed")
		return nil
	}

	// Offsets first: the commit fails if a member joined since the check
	// above, and then nothing else has changed.
	if len(newOffsets) > 0 {
		resp, err := adm.CommitOffsets(ctx, o.appID, newOffsets)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("reset: commit the new input offsets for group %s (did an instance start?): %w", o.appID, err)
		}
	}
	// The group's offsets on the internal topics would point past the end
	// of the recreated topics; a real broker drops them with the topic, but
	// say so explicitly.
	if len(internalCommitted) > 0 {
		set := kadm.TopicsSet{}
		for _, t := range internalCommitted {
			for p := range committed[t] {
				set.Add(t, p)
			}
		}
		resp, err := adm.DeleteOffsets(ctx, o.appID, set)
		if err == nil {
			err = resp.Error()
		}
		if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			return fmt.Errorf("reset: delete group %s's offsets of its internal topics: %w", o.appID, err)
		}
	}
	if len(internal) > 0 {
		if err := deleteTopics(ctx, adm, internal); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "offsets committed; internal topics deleted")

	// 4. Local state.
	if stateDir != "" {
		if err := os.RemoveAll(stateDir); err != nil {
			return fmt.Errorf("reset: delete the local state %s: %w", stateDir, err)
		}
	}
	printStateStep(w, o, stateDir, false)
	return nil
}

// checkGroupEmpty refuses a group with members, naming them.
func checkGroupEmpty(ctx context.Context, adm *kadm.Client, group string) error {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("reset: describe consumer group %s: %w", group, err)
	}
	g, ok := described[group]
	if !ok || errors.Is(g.Err, kerr.GroupIDNotFound) {
		return nil // never ran, or expired: nothing alive
	}
	if g.Err != nil {
		return fmt.Errorf("reset: describe consumer group %s: %w", group, g.Err)
	}
	if (g.State == "Empty" || g.State == "Dead") && len(g.Members) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "reset: refusing: consumer group %s is %s with %d live member(s); stop every instance of the application first:", group, g.State, len(g.Members))
	static := false
	for _, m := range g.Members {
		fmt.Fprintf(&b, "\n  member %s (client %s, host %s", m.MemberID, m.ClientID, m.ClientHost)
		if m.InstanceID != nil {
			static = true
			fmt.Fprintf(&b, ", instance id %s", *m.InstanceID)
		}
		b.WriteString(")")
	}
	if static {
		b.WriteString("\na static member (--instance-id) does not leave the group when it stops or is killed: it stays until its session times out (session.timeout, 10s by default); wait that long and run reset again")
	} else if len(g.Members) == 0 {
		b.WriteString("\nthe group is between states; run reset again in a few seconds")
	}
	return errors.New(b.String())
}

// resetOffsets lists the new offsets of every partition of topics.
func resetOffsets(ctx context.Context, adm *kadm.Client, target resetTarget, topics []string) (kadm.Offsets, error) {
	out := kadm.Offsets{}
	if len(topics) == 0 {
		return out, nil
	}
	var (
		listed kadm.ListedOffsets
		err    error
	)
	if target.earliest {
		listed, err = adm.ListStartOffsets(ctx, topics...)
	} else {
		listed, err = adm.ListOffsetsAfterMilli(ctx, target.millis, topics...)
	}
	if err != nil {
		return nil, fmt.Errorf("reset: list offsets of %s: %w", strings.Join(topics, ", "), err)
	}
	var errs []error
	for _, t := range topics {
		ps, ok := listed[t]
		if !ok {
			errs = append(errs, fmt.Errorf("reset: input topic %s: no offsets listed", t))
			continue
		}
		for p, lo := range ps {
			if lo.Err != nil {
				if errors.Is(lo.Err, kerr.UnknownTopicOrPartition) {
					errs = append(errs, fmt.Errorf("reset: input topic %s does not exist", t))
				} else {
					errs = append(errs, fmt.Errorf("reset: list offsets of %s/%d: %w", t, p, lo.Err))
				}
				continue
			}
			out.Add(kadm.Offset{Topic: t, Partition: p, At: lo.Offset, LeaderEpoch: -1})
		}
	}
	return out, errors.Join(errs...)
}

// deleteTopics deletes topics and waits, bounded, until the cluster no longer
// lists them: an application started while a deletion is pending would find
// a topic that then vanishes under it.
func deleteTopics(ctx context.Context, adm *kadm.Client, topics []string) error {
	resp, err := adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("reset: delete internal topics: %w", err)
	}
	var errs []error
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			errs = append(errs, fmt.Errorf("reset: delete internal topic %s: %w", r.Topic, r.Err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	deadline := time.Now().Add(resetTopicWait)
	for {
		// All topics: asking for missing ones by name makes the client
		// retry them as if they were still being created.
		tds, err := adm.ListTopics(ctx)
		if err != nil {
			return fmt.Errorf("reset: list topics after deleting: %w", err)
		}
		var left []string
		for _, t := range topics {
			if tds.Has(t) {
				left = append(left, t)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("reset: internal topics still listed %v after deleting them: %s; wait until they are gone before starting the application", resetTopicWait, strings.Join(left, ", "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("reset: waiting for internal topics to be deleted: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// appStateDir is the application's local state, <state.dir>/<app-id>, as
// processor.App lays it out; an application id that is not a single path
// element would make that a different directory, so it is refused.
func appStateDir(root, appID string) (string, error) {
	if err := statedir.CheckAppID(appID); err != nil {
		return "", fmt.Errorf("reset: application id %q is not a directory name; delete its local state by hand", appID)
	}
	return statedir.App(root, appID), nil
}

// lockStateDir takes the lock every running instance holds on its state
// directory, so that reset never deletes the state under a live process. A
// missing directory needs no lock.
func lockStateDir(dir string) (func(), error) {
	unlock, err := statedir.LockExisting(dir)
	if errors.Is(err, statedir.ErrInUse) {
		return nil, fmt.Errorf("reset: refusing: the local state %s is in use by a running instance (stop it first): %w", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("reset: lock the local state %s: %w", dir, err)
	}
	return unlock, nil
}

// printStateStep reports the local state step: done (or, dry, to be done)
// with --state-dir, else what the operator must do on each machine.
func printStateStep(w io.Writer, o resetOptions, stateDir string, dry bool) {
	if stateDir != "" {
		verb := "deleted"
		if dry {
			verb = "would delete"
		}
		fmt.Fprintf(w, "local state: %s %s\n", verb, stateDir)
		fmt.Fprintln(w, "other machines that ran an instance: delete <state.dir>/"+o.appID+" there too (or run this reset there with --state-dir)")
		return
	}
	path := o.appID
	if p, err := appStateDir(o.stateRoot, o.appID); err == nil {
		path = p
	}
	fmt.Fprintf(w, "local state: not deleted (no --state-dir). Before restarting, on every machine that ran an instance, run:\n  rm -rf %s\n", path)
	fmt.Fprintln(w, "(with that machine's state.dir. An instance that keeps its old state wipes each store whose changelog is now behind the store's checkpoint, but it cannot tell once another instance has refilled the changelog past it: delete the state.)")
}
