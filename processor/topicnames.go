package processor

import (
	"slices"

	"github.com/sluice-streams/sluice/internal/names"
)

// DeadLetterTopics are the topics the application writes dead letters to:
// its own (DeadLetterTopic, default <application.id>-dlq) and each
// source's (topology.DeadLetter), sorted, each once. Tools beside the app
// (the web console's dead-letter view) read them.
func (a *App) DeadLetterTopics() []string {
	out := []string{a.deadLetterTopic()}
	for _, sub := range a.plan.Subs {
		for _, n := range sub.Sources {
			if n.DeadLetter != "" {
				out = append(out, n.DeadLetter)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ChangelogTopics maps each store of the topology to its changelog topic as
// the cluster names it: <application.id>-<store>-changelog, or for a table
// read from a topic that topic itself (it is the changelog).
func (a *App) ChangelogTopics() map[string]string {
	out := make(map[string]string, len(a.plan.Stores))
	for name, st := range a.plan.Stores {
		if st.Source != "" {
			out[name] = st.Source
			continue
		}
		out[name] = names.Changelog(a.cfg.appID, name)
	}
	return out
}
