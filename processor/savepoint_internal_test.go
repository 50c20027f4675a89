package processor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestSavepointMessageJSON: the control topic's records round-trip; a
// field a later sluice adds is ignored (the protocol can grow), an
// absent one is zero; the request's deadline survives to the millisecond.
func TestSavepointMessageJSON(t *testing.T) {
	dl := time.Date(2026, 12, 2, 10, 0, 0, 123_000_000, time.UTC)
	req := spMessage{Type: spRequest, ID: "abc", To: "/tmp/sp", Continue: true, Deadline: dl}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "topology") || strings.Contains(string(b), "generation") {
		t.Errorf("a request carries the answer's fields: %s", b)
	}
	var got spMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Type != spRequest || got.ID != "abc" || got.To != "/tmp/sp" || !got.Continue || !got.Deadline.Equal(dl) {
		t.Fatalf("round trip: %+v", got)
	}
	later := `{"type":"release","id":"abc","stop":true,"reason":"a field of a later version"}`
	got = spMessage{}
	if err := json.Unmarshal([]byte(later), &got); err != nil || got.Type != spRelease || !got.Stop {
		t.Fatalf("a later version's release: %+v %v", got, err)
	}
	paused := spMessage{Type: spPaused, ID: "abc", Member: "m-1", Generation: 7, Topology: &spTopology{Fingerprint: "sha256:x",
		Stores: []spStore{{Name: "counts", Layout: "key-value", Partitions: 4, Changelog: "app-counts-changelog"}}}}
	b, _ = json.Marshal(paused)
	got = spMessage{}
	if err := json.Unmarshal(b, &got); err != nil || got.Generation != 7 || got.Topology == nil || got.Topology.Stores[0].Partitions != 4 {
		t.Fatalf("paused round trip: %s → %+v %v", b, got, err)
	}
}

// TestSameOffsets: two reads of the committed offsets are the same cut
// only if every partition's offset and metadata (the watermarks) agree and
// neither has a partition the other lacks.
func TestSameOffsets(t *testing.T) {
	mk := func(rs ...kadm.OffsetResponse) kadm.OffsetResponses {
		out := kadm.OffsetResponses{}
		for _, r := range rs {
			out.Add(r)
		}
		return out
	}
	at := func(topic string, p int32, o int64, meta string) kadm.OffsetResponse {
		return kadm.OffsetResponse{Offset: kadm.Offset{Topic: topic, Partition: p, At: o, Metadata: meta}}
	}
	a := mk(at("in", 0, 5, "w1"), at("in", 1, 7, "w2"))
	for _, tc := range []struct {
		name string
		b    kadm.OffsetResponses
		same bool
	}{
		{"equal", mk(at("in", 1, 7, "w2"), at("in", 0, 5, "w1")), true},
		{"an offset moved", mk(at("in", 0, 6, "w1"), at("in", 1, 7, "w2")), false},
		{"a watermark moved", mk(at("in", 0, 5, "w9"), at("in", 1, 7, "w2")), false},
		{"a partition more", mk(at("in", 0, 5, "w1"), at("in", 1, 7, "w2"), at("rep", 0, 1, "")), false},
		{"a partition less", mk(at("in", 0, 5, "w1")), false},
	} {
		if got := sameOffsets(a, tc.b); got != tc.same {
			t.Errorf("%s: sameOffsets = %v", tc.name, got)
		}
	}
}
