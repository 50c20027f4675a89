package topology_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink/sinkfile"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

// TestExternalSinkNames: external sinks are named as stores are, and Build
// reports every mistake.
func TestExternalSinkNames(t *testing.T) {
	p, err := sinkfile.NewParticipant(t.TempDir(), serde.String, serde.String)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sinkfile.NewStore(t.TempDir(), serde.String, serde.String)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		build func(s topology.Stream[string, string])
		want  error
	}{
		{"empty", func(s topology.Stream[string, string]) { topology.ToParticipant(s, "", p) }, topology.ErrMissingName},
		{"slash", func(s topology.Stream[string, string]) {
			topology.ToIdempotent(s, "a/b", st, serde.String, serde.String)
		}, topology.ErrInvalidTopicName},
		{"twice", func(s topology.Stream[string, string]) {
			topology.ToParticipant(s, "db", p)
			topology.ToIdempotent(s, "db", st, serde.String, serde.String)
		}, topology.ErrDuplicateName},
		{"nil participant", func(s topology.Stream[string, string]) { topology.ToParticipant(s, "db", nil) }, topology.ErrNilFunction},
		{"nil store", func(s topology.Stream[string, string]) {
			topology.ToIdempotent[string, string](s, "db", nil, serde.String, serde.String)
		}, topology.ErrNilFunction},
		{"no serde", func(s topology.Stream[string, string]) { topology.ToIdempotent(s, "db", st, nil, serde.String) }, topology.ErrMissingSerde},
	} {
		tp := topology.New()
		tc.build(topology.From(tp, "in", serde.String, serde.String))
		if _, err := tp.Build(); !errors.Is(err, tc.want) {
			t.Errorf("%s: Build = %v, want %v", tc.name, err, tc.want)
		}
	}
	tp := topology.New()
	s := topology.From(tp, "in", serde.String, serde.String)
	topology.ToParticipant(s, "db-2pc", p)
	topology.ToIdempotent(s, "db-offsets", st, serde.String, serde.String)
	b, err := tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	if d := b.Describe(); !strings.Contains(d, "db-2pc-sink") || !strings.Contains(d, "db-offsets-sink") {
		t.Errorf("Describe does not show the sinks:\n%s", d)
	}
}

// TestExternalSinkRefusesDeletes: a delete reaching an external sink is an
// error of the sink's node, handled by the error policy (here Fail: the
// pipe returns it), never dropped.
func TestExternalSinkRefusesDeletes(t *testing.T) {
	p, _ := sinkfile.NewParticipant(t.TempDir(), serde.String, serde.String)
	st, _ := sinkfile.NewStore(t.TempDir(), serde.String, serde.String)
	for _, mode := range []string{"two-phase", "offsets"} {
		tp := topology.New()
		tb := topology.TableFrom(tp, "users", topology.Materialized("users", serde.String, serde.String))
		s := topology.ToStream(tb)
		if mode == "two-phase" {
			topology.ToParticipant(s, "db", p)
		} else {
			topology.ToIdempotent(s, "db", st, serde.String, serde.String)
		}
		d, err := topologytest.New(tp)
		if err != nil {
			t.Fatal(err)
		}
		in := topologytest.NewInputTopic(d, "users", serde.String, serde.String)
		if err := in.Pipe("a", "1", 0); err != nil {
			t.Errorf("%s: an upsert: %v", mode, err)
		}
		if err := in.PipeBytes([]byte("a"), nil, 1); err == nil || !strings.Contains(err.Error(), "cannot write a delete") {
			t.Errorf("%s: a delete: %v, want the sink's error", mode, err)
		}
		d.Close()
	}
}
