package processor

import (
	"fmt"
	"os"

	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/store"
)

// resumePoint is where a copy of a store resumes reading its changelog
// partition: the one rule shared by restore (an active task opening) and
// the standby follower (a copy opening), so that a copy the follower would
// wipe is wiped by restore too, and the other way round.
type resumePoint struct {
	// from is the first offset to read; records below it are in the copy.
	from int64
	// wipe: the copy disagrees with the log and must be emptied before
	// reading from from (= log start).
	wipe bool
	// why names the disagreement when wipe is set, for the warning.
	why string
}

// resumeFrom applies the rule to a copy's checkpoint cp (the offset of the
// last changelog record it reflects, or store.NoCheckpoint) and the
// partition's log start and end (for a table read from its source topic,
// end is the group's committed offset). Kafka Streams' corrupted task:
//
//   - no checkpoint: read everything, from the log start;
//   - cp+1 in [start, end]: read the tail from cp+1 (at end: nothing). A
//     checkpoint inside a compacted gap is fine: the consumer skips to the
//     next offset that exists;
//   - cp+1 < start: records the copy lacks were deleted (retention,
//     DeleteRecords): wipe and read from start;
//   - cp+1 > end: the copy holds what the log does not (the changelog was
//     truncated or recreated, e.g. `sluice reset` without wiping the
//     state, or the group's offsets were moved back): wipe and read from
//     start.
func resumeFrom(cp, start, end int64) resumePoint {
	if cp == store.NoCheckpoint {
		return resumePoint{from: start}
	}
	from := cp + 1
	switch {
	case from < start:
		return resumePoint{from: start, wipe: true, why: fmt.Sprintf("checkpoint %d is below the log start %d", cp, start)}
	case from > end:
		return resumePoint{from: start, wipe: true, why: fmt.Sprintf("checkpoint %d is past the log end %d", cp, end)}
	}
	return resumePoint{from: from}
}

// openEngine opens the Pebble engine of a store copy (standby copies and
// global tables), sized by the memory budget (memory.go); tests replace it
// to inject faults.
var openEngine = func(dir string, o store.PebbleOptions) (store.Engine, error) {
	return store.OpenPebbleWith(dir, o)
}

// openCopy opens the engine in dir of store name of task id for the
// standby follower. A copy found corrupted is wiped and opened empty: the
// follower then reads its changelog from the start, as restore does for an
// active task (errCorrupted).
func (a *App) openCopy(id task.ID, name, dir string) (store.Engine, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	eng, err := openEngine(dir, a.mem.pebble)
	if c, ok := asCorrupted(id, err).(errCorrupted); ok {
		if err := a.wipeCorrupted(c); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		eng, err = openEngine(dir, a.mem.pebble)
	}
	return eng, err
}
