package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/topology"
)

// userTopics are the topics a topology reads and writes that its user
// creates: sources and sinks that are not internal, and global tables'
// topics (compacted, as a table's log should be). Internal topics
// (repartition, changelog, dead letters) are the application's to create.
type userTopics struct {
	plain, compacted []string
}

// all returns every user topic, sorted.
func (u userTopics) all() []string {
	return slices.Sorted(slices.Values(append(slices.Clone(u.plain), u.compacted...)))
}

// topologyUserTopics reads the user topics from the built topology's
// description, so that a new example or a renamed parameter needs no list
// kept by hand. Global tables are not in Description (they are not part of
// any sub-topology), so their topics come from Describe's "Global tables:"
// section, whose lines are "  NAME (topic TOPIC, ...)".
func topologyUserTopics(b *topology.Built) userTopics {
	seen := map[string]bool{}
	var u userTopics
	for _, sub := range b.Description().SubTopologies {
		for _, n := range sub.Nodes {
			if n.Internal || (n.Kind != "source" && n.Kind != "sink") {
				continue
			}
			for _, t := range n.Topics {
				if !seen[t] {
					seen[t] = true
					u.plain = append(u.plain, t)
				}
			}
		}
	}
	_, globals, _ := strings.Cut(b.Describe(), "\nGlobal tables:\n")
	for line := range strings.SplitSeq(globals, "\n") {
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
			break // the end of the section
		}
		_, rest, ok := strings.Cut(line, " (topic ")
		t, _, ok2 := strings.Cut(rest, ",")
		if !ok || !ok2 || t == "" {
			continue
		}
		if seen[t] {
			// Read as a stream or table too: a global table's log
			// still wants compaction.
			u.plain = slices.DeleteFunc(u.plain, func(s string) bool { return s == t })
		}
		if !slices.Contains(u.compacted, t) {
			seen[t] = true
			u.compacted = append(u.compacted, t)
		}
	}
	slices.Sort(u.plain)
	slices.Sort(u.compacted)
	return u
}

// missing returns the topics of u that the cluster does not have.
func (u userTopics) missing(ctx context.Context, adm *kadm.Client) (userTopics, error) {
	td, err := adm.ListTopics(ctx, u.all()...)
	if err != nil {
		return userTopics{}, err
	}
	absent := func(ts []string) []string {
		var out []string
		for _, t := range ts {
			if d, ok := td[t]; !ok || d.Err != nil {
				out = append(out, t)
			}
		}
		return out
	}
	return userTopics{plain: absent(u.plain), compacted: absent(u.compacted)}, nil
}

// empty reports whether u names no topic.
func (u userTopics) empty() bool { return len(u.plain) == 0 && len(u.compacted) == 0 }

// createCommands returns the sluice topic create commands that create u.
func (u userTopics) createCommands() []string {
	var cmds []string
	if len(u.plain) > 0 {
		cmds = append(cmds, "sluice topic create "+strings.Join(u.plain, " ")+" --partitions N")
	}
	if len(u.compacted) > 0 {
		cmds = append(cmds, "sluice topic create "+strings.Join(u.compacted, " ")+" --compact")
	}
	return cmds
}

// missingError is the error of a command that needs the topics of u, which
// do not exist: it names each of them and the command that creates them,
// and hint if not empty (another way out).
func (u userTopics) missingError(cmd, hint string) error {
	all := u.all()
	what := fmt.Sprintf("topic %q does not exist; create it first", all[0])
	if len(all) > 1 {
		what = "topics " + strings.Join(all, ", ") + " do not exist; create them first"
	}
	how := strings.Join(u.createCommands(), ", then ")
	if hint != "" {
		how += ", or " + hint
	}
	return fmt.Errorf("%s: %s (%s)", cmd, what, how)
}

// create creates the topics of u with partitions each, printing a line per
// topic on w; a topic another process created meanwhile is no error.
func (u userTopics) create(ctx context.Context, w io.Writer, adm *kadm.Client, partitions int32) error {
	if len(u.plain) > 0 {
		if err := createTopics(ctx, w, adm, partitions, nil, true, u.plain); err != nil {
			return err
		}
	}
	if len(u.compacted) > 0 {
		compact, _ := topicConfigs(true, nil)
		return createTopics(ctx, w, adm, partitions, compact, true, u.compacted)
	}
	return nil
}

// ensureUserTopics checks that the user topics of built exist; missing ones
// are created with partitions each when create is set, and are an error
// naming every one of them otherwise (the instance itself checks only its
// sources, and a missing output would fail only at the first record).
func ensureUserTopics(ctx context.Context, w io.Writer, cfg appConfig, built *topology.Built, create bool, partitions int32) error {
	if create && partitions < 1 {
		return fmt.Errorf("run: --partitions %d must be at least 1", partitions)
	}
	cl, err := kgo.NewClient(cfg.clientOpts()...)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, topicTimeout)
	defer cancel()
	missing, err := topologyUserTopics(built).missing(ctx, adm)
	switch {
	case err != nil && create:
		return fmt.Errorf("run: --create-topics: list the example's topics: %w", err)
	case err != nil:
		// The instance meets the same failure at its start and
		// classifies it (a refused login is ErrAuthentication).
		return nil
	case missing.empty():
		return nil
	case !create:
		return missing.missingError("run", "start with --create-topics")
	}
	if err := missing.create(ctx, w, adm, partitions); err != nil {
		return fmt.Errorf("run: --create-topics: %w", err)
	}
	return nil
}

// checkTopicsExist returns an error naming every one of topics that the
// cluster cl talks to does not have, and the command that creates them: a
// producer would otherwise retry UNKNOWN_TOPIC_OR_PARTITION and fail with
// it, naming neither.
func checkTopicsExist(ctx context.Context, cmd string, cl *kgo.Client, topics ...string) error {
	ctx, cancel := context.WithTimeout(ctx, topicTimeout)
	defer cancel()
	missing, err := userTopics{plain: topics}.missing(ctx, kadm.NewClient(cl))
	switch {
	case err != nil:
		return fmt.Errorf("%s: list topics: %w", cmd, err)
	case !missing.empty():
		return missing.missingError(cmd, "")
	}
	return nil
}
