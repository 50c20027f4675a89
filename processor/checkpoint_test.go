package processor

import (
	"testing"

	"github.com/sluice-streams/sluice/store"
)

// TestResumeFrom is the one checkpoint rule of restore and of the standby
// follower, over every place a checkpoint can sit against the log.
func TestResumeFrom(t *testing.T) {
	const none = store.NoCheckpoint
	for _, tc := range []struct {
		name           string
		cp, start, end int64
		from           int64
		wipe           bool
	}{
		{"no checkpoint, empty log", none, 0, 0, 0, false},
		{"no checkpoint", none, 0, 10, 0, false},
		{"no checkpoint, log start moved", none, 7, 10, 7, false},
		{"no checkpoint, emptied by DeleteRecords", none, 10, 10, 10, false},
		{"below log start", 3, 7, 10, 7, true},
		{"just below log start", 5, 7, 10, 7, true},
		{"at log start - 1", 6, 7, 10, 7, false},
		{"inside", 4, 0, 10, 5, false},
		{"inside, in a compacted gap", 4, 0, 10, 5, false},
		{"at end (the last marker)", 9, 0, 10, 10, false},
		{"at end, emptied partition", 9, 10, 10, 10, false},
		{"past end by one", 10, 0, 10, 0, true},
		{"past end, recreated topic", 500, 0, 3, 0, true},
		{"past end, recreated topic, log start moved", 500, 2, 3, 2, true},
		{"at offset 0", 0, 0, 1, 1, false},
		{"checkpoint 0, log emptied", 0, 0, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resumeFrom(tc.cp, tc.start, tc.end)
			if got.from != tc.from || got.wipe != tc.wipe {
				t.Errorf("resumeFrom(%d, %d, %d) = from %d wipe %v (%s), want from %d wipe %v",
					tc.cp, tc.start, tc.end, got.from, got.wipe, got.why, tc.from, tc.wipe)
			}
			if got.wipe != (got.why != "") {
				t.Errorf("wipe %v with reason %q", got.wipe, got.why)
			}
			// A copy is read from a point inside the log, never before
			// its start or past its end.
			if got.from < tc.start || got.from > max(tc.end, tc.start) {
				t.Errorf("from %d outside [%d, %d]", got.from, tc.start, tc.end)
			}
		})
	}
}
