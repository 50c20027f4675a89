package assignwire

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/task"
)

func tid(s int, p int32) task.ID { return task.ID{Sub: s, Partition: p} }

// TestMemberRoundTrip: a member's endpoint and offset sums survive the
// bytes, whatever the endpoint looks like; metadata from a member that
// predates the offsets, and bytes that are not ours, parse to what they
// hold (or nothing) instead of failing the group.
func TestMemberRoundTrip(t *testing.T) {
	sums := map[task.ID]int64{tid(0, 0): -2, tid(1, 2): 42, tid(7, 1<<30): 1 << 40}
	for _, ep := range []string{"", "h:1", "[::1]:8081", strings.Repeat("x", 300) + ":1", `"quoted\"host":9`} {
		got := ParseMember(EncodeMember(Member{Endpoint: ep, Offsets: sums}))
		if got.Endpoint != ep || !maps.Equal(got.Offsets, sums) {
			t.Errorf("endpoint %q: round trip gave %q %v", ep, got.Endpoint, got.Offsets)
		}
	}
	if a, b := EncodeMember(Member{Endpoint: "h:1", Offsets: sums}), EncodeMember(Member{Endpoint: "h:1", Offsets: maps.Clone(sums)}); string(a) != string(b) {
		t.Errorf("equal members, different bytes: %s vs %s", a, b)
	}
	if got := ParseMember([]byte(`{"endpoint":"h:1"}`)); got.Endpoint != "h:1" || len(got.Offsets) != 0 {
		t.Errorf("old metadata: %+v", got)
	}
	for _, bad := range [][]byte{nil, {}, []byte("not json"), {0xff, 0xfe, 0}, []byte(`{"offsets":"x"}`)} {
		if got := ParseMember(bad); got.Endpoint != "" || len(got.Offsets) != 0 {
			t.Errorf("%q parsed as %+v", bad, got)
		}
	}
}

// TestAssignmentRoundTrip: routing, standbys, generation and sources
// survive the bytes; every member gets the same routing whatever the map's
// order; an old leader's assignment (no generation, no sources) reads as
// generation -1 and nil sources; garbage reads as empty.
func TestAssignmentRoundTrip(t *testing.T) {
	a := Assignment{
		Routing:    map[task.ID]string{tid(0, 0): "a:1", tid(0, 1): "b:1", tid(1, 0): "a:1", tid(1, 1): ""},
		Standby:    []task.ID{tid(1, 1), tid(0, 1)},
		Generation: 3,
		Sources:    map[string]int{"text-lines": 0, "app-counts-repartition": 1, "ünï.côdé_-9": 2},
	}
	got := ParseAssignment(EncodeAssignment(a))
	if !maps.Equal(got.Routing, a.Routing) || got.Generation != 3 || !maps.Equal(got.Sources, a.Sources) {
		t.Errorf("round trip: %+v", got)
	}
	if want := []task.ID{tid(0, 1), tid(1, 1)}; !slices.Equal(got.Standby, want) {
		t.Errorf("standby %v, want %v (sorted)", got.Standby, want)
	}
	for range 20 {
		b := a
		b.Routing = maps.Clone(a.Routing)
		if x, y := EncodeAssignment(a), EncodeAssignment(b); string(x) != string(y) {
			t.Fatalf("same assignment, different bytes:\n%s\n%s", x, y)
		}
	}
	// Generation 0 is a generation; -1 writes none.
	if g := ParseAssignment(EncodeAssignment(Assignment{Generation: 0})).Generation; g != 0 {
		t.Errorf("generation 0 read back as %d", g)
	}
	if b := EncodeAssignment(Assignment{Generation: -1}); strings.Contains(string(b), "generation") {
		t.Errorf("unknown generation written: %s", b)
	}
	old := ParseAssignment([]byte(`{"owners":[{"endpoint":"a:1","tasks":[[0,1]]}],"standby":[[1,0]]}`))
	if old.Routing[tid(0, 1)] != "a:1" || len(old.Standby) != 1 || old.Standby[0] != tid(1, 0) || old.Generation != -1 || old.Sources != nil {
		t.Errorf("old leader's assignment: %+v", old)
	}
	for _, bad := range [][]byte{nil, []byte("not json"), {0xff}, []byte(`{"owners":7}`)} {
		if got := ParseAssignment(bad); len(got.Routing) != 0 || got.Standby != nil || got.Generation != -1 || got.Sources != nil {
			t.Errorf("%q parsed as %+v", bad, got)
		}
	}
}
