package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/names"
)

// Sentinel errors that Build's joined error wraps, one per mistake.
var (
	ErrNoSource         = errors.New("topology: no source")
	ErrMissingName      = errors.New("topology: missing name")
	ErrDuplicateName    = errors.New("topology: duplicate name")
	ErrDuplicateTopic   = errors.New("topology: topic read twice")
	ErrMissingSerde     = errors.New("topology: missing serde")
	ErrUnknownStore     = errors.New("topology: unknown store")
	ErrStoreShared      = errors.New("topology: store used by two sub-topologies")
	ErrNilFunction      = errors.New("topology: nil function")
	ErrForeignHandle    = errors.New("topology: handle from another topology")
	ErrAlreadyBuilt     = errors.New("topology: already built")
	ErrInvalidTopicName = errors.New("topology: invalid topic name")
	ErrInvalidWindow    = errors.New("topology: invalid window")
	ErrTypeMismatch     = errors.New("topology: type mismatch")
	ErrNoAggregation    = errors.New("topology: late records of a windowed stream with no aggregation")
)

// Topology collects the operators of one job. The zero value is not usable;
// call New. A Topology is not safe for concurrent use while it is built.
type Topology struct {
	nodes []*exec.Node
	names map[string]bool
	// stores are the topology's own copies of the stores it was given
	// (addStore), and origins the specs they were copied from: a
	// Materialization or state kept in a variable and handed to several
	// topologies is a store of each, which each completes on its own.
	stores  map[string]*exec.Store
	origins map[string]*exec.Store
	topics  map[string]bool // source topics
	// globals are the global tables, in definition order.
	globals []*exec.Global
	// migrations are the registered store migrations (migrate.go).
	migrations map[string]*exec.Migration
	errs       []error
	seq        int
	built      *Built
}

// New returns an empty topology.
func New() *Topology {
	return &Topology{names: map[string]bool{}, stores: map[string]*exec.Store{}, origins: map[string]*exec.Store{}, topics: map[string]bool{}}
}

func (t *Topology) errorf(sentinel error, format string, args ...any) {
	t.errs = append(t.errs, fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...)))
}

// name returns a unique node name: the user's when given, else
// KIND-0000000003 as in Kafka Streams (stateless nodes only: their names
// never reach a topic or a directory).
func (t *Topology) name(given, kind string) string {
	t.seq++
	if given == "" {
		return fmt.Sprintf("%s-%010d", kind, t.seq)
	}
	if t.names[given] {
		t.errorf(ErrDuplicateName, "node name %q is used twice", given)
	}
	t.names[given] = true
	return given
}

func (t *Topology) add(n *exec.Node, parents ...*exec.Node) *exec.Node {
	for _, p := range parents {
		if p == nil {
			continue
		}
		p.Children = append(p.Children, n)
		n.Parents = append(n.Parents, p)
	}
	t.nodes = append(t.nodes, n)
	return n
}

func (t *Topology) addStore(s *exec.Store) {
	if err := validTopicPart(s.Name); err != nil {
		t.errorf(ErrInvalidTopicName, "store %q: %v", s.Name, err)
	}
	if _, dup := t.stores[s.Name]; dup {
		t.errorf(ErrDuplicateName, "store %q is defined twice", s.Name)
		return
	}
	own := *s
	t.stores[s.Name], t.origins[s.Name] = &own, s
}

// registered reports whether s, as given, is already a store of t: the same
// store handed to two processors of one sub-topology.
func (t *Topology) registered(s *exec.Store) bool { return t.origins[s.Name] == s }

func validTopicPart(s string) error {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("character %q is not allowed in a topic name", r)
		}
	}
	if len(s) > 200 {
		return errors.New("longer than 200 characters")
	}
	return nil
}

// Built is a validated topology, ready to run.
type Built struct {
	plan *exec.Plan
}

// Build validates the topology and splits it into sub-topologies. It returns
// every mistake found, joined; each wraps one of the Err sentinels.
func (t *Topology) Build() (*Built, error) {
	if t.built != nil {
		return t.built, nil
	}
	errs := slices.Clone(t.errs)
	hasSource := false
	for _, n := range t.nodes {
		if n.Kind == exec.KindSource && !n.Internal {
			hasSource = true
		}
		for _, s := range n.Stores {
			if _, ok := t.stores[s]; !ok {
				errs = append(errs, fmt.Errorf("%w: node %q uses store %q, which is not defined", ErrUnknownStore, n.Name, s))
			}
		}
	}
	if !hasSource {
		errs = append(errs, fmt.Errorf("%w: the topology reads no topic", ErrNoSource))
	}
	plan := &exec.Plan{Stores: t.stores, StoreSub: map[string]int{}, Globals: t.globals}
	for _, n := range t.nodes {
		for _, g := range n.Globals {
			if !slices.ContainsFunc(t.globals, func(x *exec.Global) bool { return x.Name == g }) {
				errs = append(errs, fmt.Errorf("%w: node %q reads global table %q, which is not defined", ErrUnknownStore, n.Name, g))
			}
		}
	}
	for _, comp := range components(t.nodes) {
		sub := &exec.SubTopology{ID: len(plan.Subs), Nodes: comp}
		seen := map[string]bool{}
		for _, n := range comp {
			if n.Kind == exec.KindSource {
				sub.Sources = append(sub.Sources, n)
			}
			for _, s := range n.Stores {
				if seen[s] {
					continue
				}
				seen[s] = true
				if other, ok := plan.StoreSub[s]; ok && other != sub.ID {
					errs = append(errs, fmt.Errorf("%w: store %q is used in sub-topologies %d and %d", ErrStoreShared, s, other, sub.ID))
				}
				plan.StoreSub[s] = sub.ID
				sub.Stores = append(sub.Stores, s)
			}
		}
		// The task's time state lives in the first windowed store, by
		// name, so that it stays put when the topology is edited.
		for _, s := range slices.Sorted(slices.Values(sub.Stores)) {
			if t.stores[s] != nil && t.stores[s].Windowed {
				sub.TimeStore = s
				break
			}
		}
		if len(sub.Sources) == 0 {
			continue // reported above (a dangling part of the graph has no source only when the whole has none)
		}
		plan.Subs = append(plan.Subs, sub)
	}
	errs = append(errs, addTimeStores(plan)...)
	for _, name := range slices.Sorted(maps.Keys(t.migrations)) {
		if _, ok := plan.Stores[name]; !ok {
			errs = append(errs, fmt.Errorf("%w: a migration names store %q, which is not defined", ErrUnknownStore, name))
		}
	}
	plan.Migrations = t.migrations
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t.built = &Built{plan: plan}
	return t.built, nil
}

// TimeStoreSuffix ends the name of the store that sluice adds to a
// sub-topology to keep its time state when the sub-topology has no
// windowed store but must persist its watermark (addTimeStores): the
// store is <first repartition topic it writes>-time, its changelog
// <application.id>-<that topic>-time-changelog.
const TimeStoreSuffix = "-time"

// addTimeStores gives a time store to every sub-topology that writes
// repartition topics in a plan that uses event time but has no windowed
// store of its own. Such a task stamps each repartition record with the
// watermark it is judged against downstream (exec.HeaderRecordWatermark)
// and announces its watermark to its readers; both come from its tracker,
// which must therefore commit with the offsets and come back after a
// restart, or the records after it would be judged against a watermark
// that starts again from nothing (invariant 5). The store is named after
// the sub-topology's first repartition topic by name, a user-given name,
// so it stays put when the topology is edited elsewhere.
func addTimeStores(plan *exec.Plan) []error {
	if !plan.UsesEventTime() {
		return nil
	}
	var errs []error
	for _, sub := range plan.Subs {
		if sub.TimeStore != "" {
			continue
		}
		var sinks []string
		for _, n := range sub.Nodes {
			if n.Kind == exec.KindSink && n.Internal {
				sinks = append(sinks, n.Topics[0])
			}
		}
		if len(sinks) == 0 {
			continue
		}
		name := names.TimeStore(slices.Min(sinks))
		if _, dup := plan.Stores[name]; dup {
			errs = append(errs, fmt.Errorf("%w: store %q is the name sluice gives the time state of the sub-topology writing %s; name the store otherwise", ErrDuplicateName, name, slices.Min(sinks)))
			continue
		}
		if err := validTopicPart(name); err != nil {
			errs = append(errs, fmt.Errorf("%w: time store %q: %v", ErrInvalidTopicName, name, err))
			continue
		}
		plan.Stores[name] = &exec.Store{Name: name, Cache: true, TimeState: true, Layout: layout.KindTime}
		plan.StoreSub[name] = sub.ID
		sub.Stores = append(sub.Stores, name)
		sub.TimeStore = name
	}
	return errs
}

// components splits nodes into connected components (union-find over the
// parent/child edges; a repartition topic is a sink in one component and a
// source in another, with no edge between them), ordered by first node.
func components(nodes []*exec.Node) [][]*exec.Node {
	idx := make(map[*exec.Node]int, len(nodes))
	parent := make([]int, len(nodes))
	for i, n := range nodes {
		idx[n] = i
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for i, n := range nodes {
		for _, c := range n.Children {
			a, b := find(i), find(idx[c])
			if a != b {
				parent[max(a, b)] = min(a, b)
			}
		}
	}
	byRoot := map[int][]*exec.Node{}
	var roots []int
	for i, n := range nodes {
		r := find(i)
		if _, ok := byRoot[r]; !ok {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], n)
	}
	sort.Ints(roots)
	out := make([][]*exec.Node, 0, len(roots))
	for _, r := range roots {
		out = append(out, byRoot[r])
	}
	return out
}

// Fingerprint identifies the topology's shape: "sha256:" and the hex
// SHA-256 of Describe's text, so two builds with the same description have
// the same fingerprint. Savepoints record it (informational: whether a
// savepoint fits a topology is decided store by store).
func (b *Built) Fingerprint() string {
	h := sha256.Sum256([]byte(b.Describe()))
	return "sha256:" + hex.EncodeToString(h[:])
}

// Describe prints the sub-topologies with their nodes, source, sink and
// internal topics, and stores, in the spirit of Kafka Streams'
// TopologyDescription. Internal topic names are shown with the placeholder
// <application.id>.
func (b *Built) Describe() string {
	var sb strings.Builder
	sb.WriteString("Topologies:\n")
	topic := func(n *exec.Node, t string) string {
		if n.Internal {
			return "<application.id>-" + t
		}
		return t
	}
	for _, sub := range b.plan.Subs {
		fmt.Fprintf(&sb, "  Sub-topology: %d\n", sub.ID)
		for _, n := range sub.Nodes {
			switch n.Kind {
			case exec.KindSource:
				ts := make([]string, len(n.Topics))
				for i, t := range n.Topics {
					ts[i] = topic(n, t)
				}
				fmt.Fprintf(&sb, "    Source: %s (topics: [%s])\n", n.Name, strings.Join(ts, ", "))
			case exec.KindProcessor:
				fmt.Fprintf(&sb, "    Processor: %s (stores: [%s])\n", n.Name, strings.Join(n.Stores, ", "))
			case exec.KindSink:
				fmt.Fprintf(&sb, "    Sink: %s (topic: %s)\n", n.Name, topic(n, n.Topics[0]))
			}
			if len(n.Children) > 0 {
				cs := make([]string, len(n.Children))
				for i, c := range n.Children {
					cs[i] = c.Name
				}
				fmt.Fprintf(&sb, "      --> %s\n", strings.Join(cs, ", "))
			}
			if len(n.Parents) > 0 {
				ps := make([]string, len(n.Parents))
				for i, p := range n.Parents {
					ps[i] = p.Name
				}
				fmt.Fprintf(&sb, "      <-- %s\n", strings.Join(ps, ", "))
			}
		}
	}
	if len(b.plan.Globals) > 0 {
		sb.WriteString("Global tables:\n")
		for _, g := range b.plan.Globals {
			fmt.Fprintf(&sb, "  %s (topic %s, every partition on every instance)\n", g.Name, g.Topic)
		}
	}
	var stores []string
	for name := range b.plan.Stores {
		stores = append(stores, name)
	}
	sort.Strings(stores)
	if len(stores) > 0 {
		sb.WriteString("Stores:\n")
		for _, s := range stores {
			st := b.plan.Stores[s]
			kind := "pebble"
			if st.InMemory {
				kind = "in-memory"
			}
			if st.Windowed {
				kind += ", windowed"
			}
			if st.TimeState {
				kind += ", time state"
			}
			changelog := "changelog " + names.Changelog("<application.id>", s)
			if st.Source != "" {
				changelog = "changelog: its source topic " + st.Source
			}
			fmt.Fprintf(&sb, "  %s (%s, cache=%t, sub-topology %d, %s)\n", s, kind, st.Cache, b.plan.StoreSub[s], changelog)
		}
	}
	return sb.String()
}

// Description is the topology as data, for JSON (the `/topology` endpoint).
type Description struct {
	SubTopologies []SubTopologyDescription `json:"sub_topologies"`
	Stores        []StoreDescription       `json:"stores"`
}

// SubTopologyDescription is one sub-topology. Internal topics are named
// without the application id, which the runtime prefixes.
type SubTopologyDescription struct {
	ID     int               `json:"id"`
	Nodes  []NodeDescription `json:"nodes"`
	Stores []string          `json:"stores,omitempty"`
}

// NodeDescription is one node.
type NodeDescription struct {
	Name     string   `json:"name"`
	Kind     string   `json:"kind"` // source, processor, sink
	Topics   []string `json:"topics,omitempty"`
	Internal bool     `json:"internal,omitempty"`
	Stores   []string `json:"stores,omitempty"`
	Children []string `json:"children,omitempty"`
}

// StoreDescription is one store.
type StoreDescription struct {
	Name        string `json:"name"`
	InMemory    bool   `json:"in_memory"`
	Cache       bool   `json:"cache"`
	Windowed    bool   `json:"windowed,omitempty"`
	SubTopology int    `json:"sub_topology"`
}

// Description returns the topology as data.
func (b *Built) Description() Description {
	var d Description
	kinds := map[exec.Kind]string{exec.KindSource: "source", exec.KindProcessor: "processor", exec.KindSink: "sink"}
	for _, sub := range b.plan.Subs {
		sd := SubTopologyDescription{ID: sub.ID, Stores: sub.Stores}
		for _, n := range sub.Nodes {
			nd := NodeDescription{Name: n.Name, Kind: kinds[n.Kind], Topics: n.Topics, Internal: n.Internal, Stores: n.Stores}
			for _, c := range n.Children {
				nd.Children = append(nd.Children, c.Name)
			}
			sd.Nodes = append(sd.Nodes, nd)
		}
		d.SubTopologies = append(d.SubTopologies, sd)
	}
	for name, st := range b.plan.Stores {
		d.Stores = append(d.Stores, StoreDescription{Name: name, InMemory: st.InMemory, Cache: st.Cache, Windowed: st.Windowed, SubTopology: b.plan.StoreSub[name]})
	}
	sort.Slice(d.Stores, func(i, j int) bool { return d.Stores[i].Name < d.Stores[j].Name })
	return d
}
