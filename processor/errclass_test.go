package processor

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/store"
)

// errClassCases are session errors and the class Run must give them.
func errClassCases() []struct {
	name string
	err  error
	want errClass
} {
	id := task.ID{Sub: 1, Partition: 2}
	dir := filepath.Join("state", "app", id.String(), "counts")
	corrupt := fmt.Errorf("processor: task %s: open store counts: %w", id, &store.CorruptedError{Dir: dir, Err: errors.New("pebble: corruption")})
	return []struct {
		name string
		err  error
		want errClass
	}{
		{"unexpected error", errors.New("boom"), classFatal},
		{"unexpected error, wrapped", fmt.Errorf("processor: end transaction: %w", errors.New("boom")), classFatal},
		{"non-retriable broker error", fmt.Errorf("processor: produce to out: %w", kerr.MessageTooLarge), classFatal},
		{"data loss", fatalError{fmt.Errorf("%w: in/0", ErrDataLoss)}, classFatal},
		{"repartitioned", fatalError{ErrRepartitioned}, classFatal},
		{"fatal wrapping a fenced producer", fatalError{kerr.ProducerFenced}, classFatal},
		{"producer fenced", fmt.Errorf("processor: end transaction: %w", kerr.ProducerFenced), classRetryable},
		{"producer epoch bumped", fmt.Errorf("processor: produce to out: %w", kerr.InvalidProducerEpoch), classRetryable},
		{"producer state unknown", fmt.Errorf("processor: end transaction: %w", kerr.UnknownProducerID), classRetryable},
		{"sequence out of step", fmt.Errorf("processor: end transaction: unable to commit transaction offsets: %w", kerr.OutOfOrderSequenceNumber), classRetryable},
		{"generation moved on", fmt.Errorf("processor: end transaction: %w", kerr.IllegalGeneration), classRetryable},
		{"coordinator moving", fmt.Errorf("processor: init producer id: %w", kerr.NotCoordinator), classRetryable},
		{"connection refused", fmt.Errorf("processor: list offsets: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), classRetryable},
		{"record timed out", fmt.Errorf("processor: produce to out: %w", kgo.ErrRecordTimeout), classRetryable},
		{"marked retryable", errRetryable{errors.New("a transaction stayed open")}, classRetryable},
		{"corrupted store", asCorrupted(id, corrupt), classCorrupted},
		{"corrupted store, wrapped", fmt.Errorf("processor: task %s: %w", id, openFailed(id, corrupt)), classCorrupted},
		{"open failure, not corrupted", openFailed(id, kerr.NotCoordinator), classFatal},
		{"damaged store read inside an operator", fatalError{fmt.Errorf("processing error in count: %w", &store.CorruptedError{Dir: dir})}, classCorrupted},
	}
}

// TestClassifySessionErrors: an error nobody expected stops the instance;
// a fenced or unknown producer, a moved generation and an unreachable
// cluster rebuild the session; a corrupted store is wiped and restored.
func TestClassifySessionErrors(t *testing.T) {
	for _, tc := range errClassCases() {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("%s: %v classified %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	var c errCorrupted
	if err := openFailed(task.ID{Sub: 1, Partition: 2}, &store.CorruptedError{Dir: "d/1_2/counts"}); !errors.As(err, &c) || c.store != "counts" || c.task.Partition != 2 {
		t.Errorf("openFailed names %+v", c)
	}
	// A damaged store found at run time names its task by its directory.
	for dir, want := range map[string]*task.ID{
		"s/app/3_17/counts":  {Sub: 3, Partition: 17},
		"s/app/global/users": nil,
		"s/app/3_17x/counts": nil,
		"s/app/03_17/counts": nil,
	} {
		c := corruptedStore(fatalError{&store.CorruptedError{Dir: dir}})
		if c == nil || c.known != (want != nil) || want != nil && c.task != *want {
			t.Errorf("%s: %+v, want task %v", dir, c, want)
		}
	}
}

// TestClassifyCatchesTheOldPolicy is the negative control: the policy
// before (retry everything not wrapped in fatalError) disagrees with the
// table on the unexpected error, which it retried.
func TestClassifyCatchesTheOldPolicy(t *testing.T) {
	old := func(err error) errClass {
		var fatal fatalError
		if errors.As(err, &fatal) {
			return classFatal
		}
		return classRetryable
	}
	caught := map[string]bool{}
	for _, tc := range errClassCases() {
		if old(tc.err) != tc.want {
			caught[tc.name] = true
		}
	}
	if !caught["unexpected error"] || !caught["non-retriable broker error"] {
		t.Errorf("the table does not tell the old policy apart (differs on %v)", caught)
	}
}

// TestWipeCorruptedStaysInsideTheStateDir: the wipe removes only a store
// directory under the instance's state directory.
func TestWipeCorruptedStaysInsideTheStateDir(t *testing.T) {
	a := &App{dir: t.TempDir(), log: quietLog()}
	for _, dir := range []string{a.dir, filepath.Dir(a.dir), "/", filepath.Join(a.dir, "..", "x")} {
		if err := a.wipeCorrupted(errCorrupted{store: "s", dir: dir}); classify(err) != classFatal {
			t.Errorf("wipe of %s: %v", dir, err)
		}
	}
	for _, dir := range []string{a.dir, filepath.Dir(a.dir), "/", filepath.Join(a.dir, "..", "x")} {
		if err := a.wipeCorrupted(errCorrupted{known: true, store: "s", dir: dir}); classify(err) != classFatal {
			t.Errorf("wipe of %s: %v", dir, err)
		}
	}
	// A global table's store is open across sessions: not wiped.
	if err := a.wipeCorrupted(errCorrupted{store: "users", dir: filepath.Join(a.dir, "global", "users")}); classify(err) != classFatal {
		t.Errorf("wipe of a global store: %v", err)
	}
	if err := a.wipeCorrupted(errCorrupted{known: true, store: "s", dir: filepath.Join(a.dir, "1_0", "s")}); err != nil {
		t.Errorf("wipe inside: %v", err)
	}
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
