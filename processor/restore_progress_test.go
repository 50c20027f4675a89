package processor

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRestoreProgress checks that every step reaches the status and that a
// restore running for longer than restoreLogEvery logs a line with its rate
// and time left, and that a finished one does not.
func TestRestoreProgress(t *testing.T) {
	var buf bytes.Buffer
	var reported [][2]int64
	p := &restoreProgress{task: "1_3", store: "counts", log: slog.New(slog.NewTextHandler(&buf, nil)),
		report: func(restored, remaining int64) { reported = append(reported, [2]int64{restored, remaining}) }}
	p.update(0, 4000)
	if buf.Len() != 0 {
		t.Errorf("a restore just begun logged %q", buf.String())
	}
	// As if it had started 10 s ago: 1,000 records in 10 s, 3,000 left.
	p.start, p.last = time.Now().Add(-10*time.Second), time.Now().Add(-10*time.Second)
	p.update(1000, 3000)
	line := buf.String()
	for _, want := range []string{"task=1_3", "store=counts", "restored=1000", "remaining=3000", "records_per_second=99", "eta=30s"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line %q lacks %s", line, want)
		}
	}
	buf.Reset()
	p.last = time.Now().Add(-10 * time.Second)
	p.update(4000, 0)
	if buf.Len() != 0 {
		t.Errorf("a finished restore logged %q", buf.String())
	}
	if want := [][2]int64{{0, 4000}, {1000, 3000}, {4000, 0}}; len(reported) != 3 || reported[0] != want[0] || reported[1] != want[1] || reported[2] != want[2] {
		t.Errorf("reported %v, want %v", reported, want)
	}
}
