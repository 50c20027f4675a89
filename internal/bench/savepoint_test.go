package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

// TestRunSavepoint: the savepoint scenario at a tiny size loads, restores,
// takes a savepoint and starts a fork from it, each verified (RunSavepoint
// fails if a store it left does not hold exactly the keys counted once).
func TestRunSavepoint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jobs on an embedded broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := RunSavepoint(ctx, Config{Records: 3000, Partitions: 4, CommitInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{SavepointPhaseLoad, SavepointPhaseRestore, SavepointPhaseTake, SavepointPhaseStart, SavepointPhaseSeed}
	if len(res.Phases) != len(want) {
		t.Fatalf("phases %+v", res.Phases)
	}
	for i, p := range res.Phases {
		if p.Scenario != want[i] || p.Records != 3000 || p.Seconds <= 0 || p.PerSecond <= 0 {
			t.Errorf("phase %d: %+v", i, p)
		}
	}
	if res.Bytes <= 0 {
		t.Errorf("savepoint size %d", res.Bytes)
	}
}

// TestCheckCounts: the checker accepts exactly the keys counted once and
// catches a missing key, a duplicate, a wrong count and a foreign key,
// including keys of other lengths (negative controls).
func TestCheckCounts(t *testing.T) {
	const n = 100
	good := func(fn func(string, int64) error) error {
		for i := range n {
			if err := fn(fmt.Sprintf("%010d", i), 1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := checkCounts(n, good); err != nil {
		t.Fatalf("good store refused: %v", err)
	}
	bad := map[string]func(fn func(string, int64) error) error{
		"missing": func(fn func(string, int64) error) error {
			for i := 1; i < n; i++ {
				if err := fn(fmt.Sprintf("%010d", i), 1); err != nil {
					return err
				}
			}
			return nil
		},
		"duplicate": func(fn func(string, int64) error) error {
			if err := good(fn); err != nil {
				return err
			}
			return fn(fmt.Sprintf("%010d", 7), 1)
		},
		"count 2": func(fn func(string, int64) error) error {
			if err := fn(fmt.Sprintf("%010d", 0), 2); err != nil {
				return err
			}
			return good(fn)
		},
		"out of range": func(fn func(string, int64) error) error {
			if err := good(fn); err != nil {
				return err
			}
			return fn(fmt.Sprintf("%010d", n), 1)
		},
	}
	for _, k := range testkeys.Bytes() {
		bad[fmt.Sprintf("foreign key %x", k)] = func(fn func(string, int64) error) error {
			if err := good(fn); err != nil {
				return err
			}
			return fn(string(k), 1)
		}
	}
	for name, each := range bad {
		if err := checkCounts(n, each); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
