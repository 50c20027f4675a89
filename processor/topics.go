package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/names"
)

// The application's topics: prepareTopics, run once at start, resolves how
// many partitions (tasks) each sub-topology has from its user input topics,
// and creates the internal topics (repartition, changelog, dead letters)
// with the partition counts and configs they need.

func (a *App) deadLetterTopic() string {
	if a.cfg.deadLetter != "" {
		return a.cfg.deadLetter
	}
	return names.DeadLetter(a.cfg.appID)
}

// prepareTopics resolves partition counts and creates the internal topics
// with the partition counts and configs they need.
func (a *App) prepareTopics(ctx context.Context) error {
	// The first requests of the instance: a refused login or TLS
	// handshake shows here, and stops it with ErrAuthentication.
	ctx, watch, stop := withAuthWatch(ctx)
	defer stop()
	cl, err := kgo.NewClient(a.cfg.kgoOpts(watch)...)
	if err != nil {
		return fatalError{fmt.Errorf("processor: admin client: %w", err)}
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	a.subOf = map[string]int{}
	var user []string
	for _, sub := range a.plan.Subs {
		topics, internal := sub.SourceTopics()
		for i, t := range topics {
			if internal[i] {
				t = names.Internal(a.cfg.appID, t)
			} else {
				user = append(user, t)
			}
			a.subOf[t] = sub.ID
		}
	}
	details, err := adm.ListTopics(ctx, user...)
	if err != nil {
		if aerr := authFailure(ctx, err); aerr != nil {
			return aerr
		}
		return fmt.Errorf("processor: list source topics: %w", err)
	}
	counts := map[string]int32{}
	var missing []string
	for _, t := range user {
		d, ok := details[t]
		if !ok || d.Err != nil {
			if !slices.Contains(missing, t) {
				missing = append(missing, t)
			}
			continue
		}
		counts[t] = int32(len(d.Partitions))
	}
	// Every missing topic at once, so that a user creates them in one go.
	switch {
	case len(missing) == 1:
		return fatalError{fmt.Errorf("processor: source topic %q does not exist; create it first (sluice topic create %s --partitions N)", missing[0], missing[0])}
	case len(missing) > 1:
		return fatalError{fmt.Errorf("processor: source topics %s do not exist; create them first (sluice topic create %s --partitions N)", strings.Join(missing, ", "), strings.Join(missing, " "))}
	}
	// Sub-topologies reading repartition topics get their width from the
	// sub-topology writing them: iterate to a fixpoint.
	writer := map[string]int{} // runtime repartition topic → writing sub
	for _, sub := range a.plan.Subs {
		for _, n := range sub.Nodes {
			if n.Kind == exec.KindSink && n.Internal {
				writer[names.Internal(a.cfg.appID, n.Topics[0])] = sub.ID
			}
		}
	}
	a.partitions = map[int]int32{}
	for range len(a.plan.Subs) + 1 {
		for _, sub := range a.plan.Subs {
			topics, internal := sub.SourceTopics()
			var w int32
			for i, t := range topics {
				if internal[i] {
					t = names.Internal(a.cfg.appID, t)
					w = max(w, a.partitions[writer[t]])
				} else {
					w = max(w, counts[t])
				}
			}
			a.partitions[sub.ID] = w
		}
	}
	// Co-partitioned user inputs must agree, where a key must meet its
	// state: a stateless sub-topology may merge inputs of any widths.
	for _, sub := range a.plan.Subs {
		if a.growable(sub.ID) {
			continue
		}
		topics, internal := sub.SourceTopics()
		for i, t := range topics {
			if !internal[i] && counts[t] != a.partitions[sub.ID] {
				return fatalError{fmt.Errorf("processor: sub-topology %d reads %s with %d partitions but needs %d: co-partitioned inputs must have equal partition counts", sub.ID, t, counts[t], a.partitions[sub.ID])}
			}
		}
	}
	type topicSpec struct {
		partitions int32
		configs    map[string]*string
	}
	want := map[string]topicSpec{}
	owner := map[string]int{} // internal topic → the sub-topology whose width it has
	a.internalPartitions = map[string]int32{}
	for topic, sub := range writer {
		want[topic] = topicSpec{a.partitions[sub], nil}
		owner[topic] = sub
		a.internalPartitions[topic] = a.partitions[sub]
	}
	var widest int32
	for _, n := range a.partitions {
		widest = max(widest, n)
	}
	a.changelogs = map[string]bool{}
	compact, compactDelete := "compact", "compact,delete"
	for name, sub := range a.plan.StoreSub {
		if a.plan.Stores[name].Source != "" {
			continue // its source topic is its changelog
		}
		t := names.Changelog(a.cfg.appID, name)
		a.changelogs[t] = true
		configs := map[string]*string{"cleanup.policy": &compact}
		if spec := a.plan.Stores[name]; spec.Windowed && spec.Retention > 0 {
			// Windowed stores expire their own entries; the log may
			// drop what is older than any window can stay open
			// (Kafka Streams' windowed changelogs).
			retention := strconv.FormatInt(spec.Retention.Milliseconds(), 10)
			configs = map[string]*string{"cleanup.policy": &compactDelete, "retention.ms": &retention}
		}
		want[t] = topicSpec{a.partitions[sub], configs}
		owner[t] = sub
	}
	a.addSinkTopics() // partitioned by the task, as changelogs are
	names := make([]string, 0, len(want))
	for t := range want {
		names = append(names, t)
	}
	sort.Strings(names)
	existing, err := adm.ListTopics(ctx, append(names, a.deadLetterTopic())...)
	if err != nil {
		return fmt.Errorf("processor: list internal topics: %w", err)
	}
	// The dead-letter topic is made if missing, as wide as the widest
	// sub-topology; one that exists is used as it is.
	if dlq := a.deadLetterTopic(); existing[dlq].Err != nil || existing[dlq].Topic == "" {
		if err := createTopic(ctx, adm, dlq, widest, nil); err != nil {
			return err
		}
	}
	for _, t := range names {
		w := want[t]
		if d, ok := existing[t]; ok && d.Err == nil {
			if int32(len(d.Partitions)) != w.partitions {
				return fatalError{fmt.Errorf("%w: internal topic %s has %d partitions, but sub-topology %d now has %d (inputs %s); "+
					"adding partitions would move keys away from their state or their repartitioned stream. "+
					"Restore the partition count, or reset the application (sluice reset) to rebuild its state at the new count",
					ErrRepartitioned, t, len(d.Partitions), owner[t], w.partitions, strings.Join(a.userInputs(owner[t], writer), ", "))}
			}
			continue
		}
		if err := createTopic(ctx, adm, t, w.partitions, w.configs); err != nil {
			return err
		}
	}
	return nil
}

// ErrRepartitioned is returned when the input topics of a sub-topology that
// keeps state or writes a repartition topic have a partition count other
// than its internal topics: a key would no longer reach the task holding its
// state. Only sub-topologies that read user topics into stateless operators
// and user topics may grow their inputs, at start or while running.
var ErrRepartitioned = errors.New("processor: input partitions changed")

// growable reports whether sub-topology sub may have its input partitions
// added to: it keeps no state and reads and writes no repartition topic, so
// a key's records need no particular task.
func (a *App) growable(sub int) bool {
	s := a.plan.Subs[sub]
	if len(s.Stores) > 0 {
		return false
	}
	for _, n := range s.Nodes {
		if n.Internal && (n.Kind == exec.KindSink || n.Kind == exec.KindSource) {
			return false
		}
	}
	return true
}

// userInputs names the user topics whose partition counts set the width of
// sub-topology sub: its own, or those of the sub-topologies writing the
// repartition topics it reads.
func (a *App) userInputs(sub int, writer map[string]int) []string {
	var out []string
	seen := map[int]bool{}
	var walk func(s int)
	walk = func(s int) {
		if seen[s] {
			return
		}
		seen[s] = true
		topics, internal := a.plan.Subs[s].SourceTopics()
		for i, t := range topics {
			if !internal[i] {
				out = append(out, t)
			} else if w, ok := writer[names.Internal(a.cfg.appID, t)]; ok {
				walk(w)
			}
		}
	}
	walk(sub)
	sort.Strings(out)
	return slices.Compact(out)
}

// createTopic creates topic, accepting that another instance just did.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) error {
	resp, err := adm.CreateTopic(ctx, partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("processor: create %s: %w", topic, err)
	}
	return nil
}
