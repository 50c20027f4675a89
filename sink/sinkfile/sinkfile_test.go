package sinkfile_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink"
	"github.com/sluice-streams/sluice/sink/sinkfile"
)

// adversarial records: keys of every length 0..140 and UUIDs, values that
// are empty or not UTF-8, every coordinate shape.
func records(n int) []sink.Record[string, []byte] {
	keys := testkeys.All()
	out := make([]sink.Record[string, []byte], n)
	for i := range out {
		v := []byte(fmt.Sprintf("v%d", i))
		switch i % 3 {
		case 1:
			v = []byte{}
		case 2:
			v = []byte{0xff, 0xfe, byte(i), 0}
		}
		out[i] = sink.Record[string, []byte]{Key: keys[i%len(keys)], Value: v, Timestamp: int64(i) - 1, Topic: "in", Partition: int32(i % 3), Offset: int64(i)}
	}
	return out
}

func same(a, b []sink.Record[string, []byte]) bool {
	return slices.EqualFunc(a, b, func(x, y sink.Record[string, []byte]) bool {
		return x.Key == y.Key && string(x.Value) == string(y.Value) && x.Timestamp == y.Timestamp &&
			x.Topic == y.Topic && x.Partition == y.Partition && x.Offset == y.Offset
	})
}

func TestParticipantPrepareCommitRollback(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p, err := sinkfile.NewParticipant(dir, serde.String, serde.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	a, b := records(300), records(7)
	xa, xb := "app-0_1-aa-1", "app-0_1-aa-2"
	if err := p.Prepare(ctx, xa, a); err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(ctx, xb, b); err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(ctx, xa, b); err == nil {
		t.Error("an id prepared twice was accepted")
	}
	if got, _ := p.Committed(); len(got) != 0 {
		t.Errorf("prepared records are visible: %d", len(got))
	}
	// Reopened (another process, a restart): the prepared survive.
	p, _ = sinkfile.NewParticipant(dir, serde.String, serde.Bytes)
	xids, err := p.Prepared(ctx, "app-0_1-")
	if err != nil || !slices.Equal(slices.Sorted(slices.Values(xids)), []string{xa, xb}) {
		t.Fatalf("Prepared = %v, %v", xids, err)
	}
	if xids, _ := p.Prepared(ctx, "app-0_10-"); len(xids) != 0 {
		t.Errorf("another task's prefix lists %v", xids)
	}
	if err := p.CommitPrepared(ctx, xa); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitPrepared(ctx, xa); !errors.Is(err, sink.ErrNotPrepared) {
		t.Errorf("second commit: %v, want ErrNotPrepared", err)
	}
	if err := p.RollbackPrepared(ctx, xb); err != nil {
		t.Fatal(err)
	}
	if err := p.RollbackPrepared(ctx, xb); !errors.Is(err, sink.ErrNotPrepared) {
		t.Errorf("second rollback: %v, want ErrNotPrepared", err)
	}
	if err := p.CommitPrepared(ctx, xb); !errors.Is(err, sink.ErrNotPrepared) {
		t.Errorf("commit after rollback: %v, want ErrNotPrepared", err)
	}
	got, err := p.Committed()
	if err != nil || !same(got, a) {
		t.Errorf("committed %d records (%v), want the %d of %s exactly", len(got), err, len(a), xa)
	}
	if n, _ := p.PreparedCount(); n != 0 {
		t.Errorf("%d left prepared", n)
	}
	for _, bad := range []string{"", "../x", "a/b", strings.Repeat("x", sink.MaxXIDLength+1), "é"} {
		if err := p.Prepare(ctx, bad, a); err == nil {
			t.Errorf("xid %q accepted", bad)
		}
	}
}

func TestStoreSkipsWhatIsStored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := sinkfile.NewStore(dir, serde.String, serde.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	recs := records(200) // offsets 0..199 over partitions 0..2
	if offs, err := s.Offsets(ctx, "sk", "app-sk-sink"); err != nil || len(offs) != 0 {
		t.Fatalf("empty store: %v, %v", offs, err)
	}
	next := func(rs []sink.Record[string, []byte]) map[int32]int64 {
		m := map[int32]int64{}
		for _, r := range rs {
			m[r.Partition] = max(m[r.Partition], r.Offset+1)
		}
		return m
	}
	if err := s.Write(ctx, "sk", "app-sk-sink", recs[:120], next(recs[:120])); err != nil {
		t.Fatal(err)
	}
	// A replay from before the stored offsets, overlapping: skipped.
	if err := s.Write(ctx, "sk", "app-sk-sink", recs[60:], next(recs[60:])); err != nil {
		t.Fatal(err)
	}
	got, err := s.Records("sk", "app-sk-sink")
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(recs)
	slices.SortStableFunc(want, func(a, b sink.Record[string, []byte]) int { return int(a.Partition - b.Partition) })
	if !same(got, want) {
		t.Errorf("stored %d records, want the %d written, each once", len(got), len(want))
	}
	// A leftover segment past the stored offset (a Write that crashed
	// before its commit point) is neither read nor kept.
	leftover := filepath.Join(dir, "sk~app-sk-sink", "0", fmt.Sprintf("%020d", 10_000))
	if err := os.WriteFile(leftover, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Records("sk", "app-sk-sink"); err != nil || len(got) != len(want) {
		t.Errorf("with a leftover: %d records, %v", len(got), err)
	}
	extra := []sink.Record[string, []byte]{{Key: "", Value: nil, Topic: "t", Partition: 0, Offset: 10_000}}
	if err := s.Write(ctx, "sk", "app-sk-sink", extra, map[int32]int64{0: 10_001}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Records("sk", "app-sk-sink"); err != nil || len(got) != len(want)+1 {
		t.Errorf("after a write over the leftover: %d records, %v", len(got), err)
	}
	if offs, _ := s.Offsets(ctx, "sk", "app-sk-sink"); offs[0] != 10_001 || offs[1] != next(recs)[1] {
		t.Errorf("offsets %v", offs)
	}
	if err := s.Write(ctx, "../x", "t", nil, nil); err == nil {
		t.Error("a sink name leaving the directory was accepted")
	}
}

// TestRejectedIndex: a record the store's serde refuses is a
// sink.Rejected naming its index in the batch handed to Write (not in a
// partition's share of it, nor among the records kept), and nothing is
// written; Prepare's is its index too.
func TestRejectedIndex(t *testing.T) {
	ctx := context.Background()
	refuse := serde.Funcs(func(v string) ([]byte, error) {
		if v == "bad" {
			return nil, errors.New("refused")
		}
		return []byte(v), nil
	}, func(b []byte) (string, error) { return string(b), nil })
	st, err := sinkfile.NewStore(t.TempDir(), serde.String, refuse)
	if err != nil {
		t.Fatal(err)
	}
	recs := []sink.Record[string, string]{
		{Key: "a", Value: "x", Topic: "t", Partition: 0, Offset: 5},
		{Key: "b", Value: "x", Topic: "t", Partition: 1, Offset: 0},
		{Key: "c", Value: "x", Topic: "t", Partition: 0, Offset: 6},
		{Key: "d", Value: "bad", Topic: "t", Partition: 1, Offset: 1},
	}
	err = st.Write(ctx, "s", "t", recs, map[int32]int64{0: 7, 1: 2})
	var rej sink.Rejected
	if !errors.As(err, &rej) {
		t.Fatalf("Write: %v, want a sink.Rejected", err)
	}
	if i, msg := rej.Rejected(); i != 3 || !strings.Contains(msg, "refused") {
		t.Fatalf("rejected %d (%q), want 3", i, msg)
	}
	if got, err := st.Records("s", "t"); err != nil || len(got) != 0 {
		t.Fatalf("a refused batch stored %v (%v)", got, err)
	}
	// The control: without the bad record, all is stored.
	if err := st.Write(ctx, "s", "t", recs[:3], map[int32]int64{0: 7, 1: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := sinkfile.NewParticipant(t.TempDir(), serde.String, refuse)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(ctx, "x-1", recs); !errors.As(err, &rej) {
		t.Fatalf("Prepare: %v", err)
	} else if i, _ := rej.Rejected(); i != 3 {
		t.Fatalf("Prepare rejected %d, want 3", i)
	}
	if n, _ := p.PreparedCount(); n != 0 {
		t.Fatal("a refused batch was prepared")
	}
}
