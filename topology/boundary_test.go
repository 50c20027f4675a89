package topology

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
)

// TestPublicTypesMatchExec: topology's error classes, actions and
// punctuation clocks convert to exec's by value, so each constant must
// equal its exec counterpart, and the names must agree.
func TestPublicTypesMatchExec(t *testing.T) {
	classes := map[ErrorClass]exec.ErrorClass{
		Deserialization: exec.Deserialization, Processing: exec.Processing, Production: exec.Production,
	}
	for c, e := range classes {
		if exec.ErrorClass(c) != e {
			t.Errorf("class %q converts to %q", c, exec.ErrorClass(c))
		}
	}
	actions := map[Action]exec.Action{Fail: exec.Fail, Continue: exec.Continue, SendToDeadLetterQueue: exec.DeadLetter}
	for a, e := range actions {
		if exec.Action(a) != e || a.String() != e.String() {
			t.Errorf("action %v converts to %v", a, exec.Action(a))
		}
	}
	if DeadLetterIt != SendToDeadLetterQueue {
		t.Error("DeadLetterIt is not SendToDeadLetterQueue")
	}
	if exec.PunctuationType(StreamTime) != exec.StreamTime || exec.PunctuationType(WallClockTime) != exec.WallClockTime {
		t.Error("punctuation types do not convert to exec's")
	}
}

// TestErrorHandlerCrossesToExec: a handler sees every field of the
// runtime's error context and its action reaches the runtime; a nil
// handler stays nil, so the application's handler applies.
func TestErrorHandlerCrossesToExec(t *testing.T) {
	if ErrorHandler(nil).toExec() != nil || exec.HandlerOf(nil) != nil || exec.HandlerOf(ErrorHandler(nil)) != nil {
		t.Fatal("a nil handler does not stay nil")
	}
	cause := errors.New("boom")
	in := exec.ErrorContext{Class: exec.Production, Node: "SINK-1", Topic: "t", Partition: 3, Offset: 42, Timestamp: 7, Err: cause}
	var got ErrorContext
	h := exec.HandlerOf(ErrorHandler(func(ec ErrorContext) Action { got = ec; return SendToDeadLetterQueue }))
	if a := h(in); a != exec.DeadLetter {
		t.Errorf("action %v, want dead-letter", a)
	}
	want := ErrorContext{Class: Production, Node: "SINK-1", Topic: "t", Partition: 3, Offset: 42, Timestamp: 7, Err: cause}
	if got != want {
		t.Errorf("handler saw %+v, want %+v", got, want)
	}
}

// TestSentinelsMatchPublicErrors: the runtime wraps exec's sentinels;
// users match topology's.
func TestSentinelsMatchPublicErrors(t *testing.T) {
	for _, c := range []struct {
		runtime *exec.Sentinel
		public  error
	}{{exec.ErrInvalidTimestamp, ErrInvalidTimestamp}, {exec.ErrRecordTooLarge, ErrRecordTooLarge}} {
		err := fmt.Errorf("task 0_1: %w", fmt.Errorf("%w: -1", c.runtime))
		if !errors.Is(err, c.public) || !errors.Is(err, c.runtime) {
			t.Errorf("%v does not match %v", err, c.public)
		}
		if c.runtime.Error() != c.public.Error() {
			t.Errorf("messages differ: %q, %q", c.runtime, c.public)
		}
	}
	if errors.Is(fmt.Errorf("x: %w", exec.ErrInvalidTimestamp), ErrRecordTooLarge) {
		t.Error("one sentinel matches the other's public error")
	}
}

// TestHeadersCrossInPlace: headers convert without a copy, keeping nil,
// length and capacity, as when Header was exec.Header.
func TestHeadersCrossInPlace(t *testing.T) {
	if headersOf(nil) != nil || execHeaders(nil) != nil {
		t.Error("nil headers are not nil")
	}
	if hs := headersOf([]exec.Header{}); hs == nil || len(hs) != 0 {
		t.Error("empty headers are nil")
	}
	in := make([]exec.Header, 2, 5)
	in[0], in[1] = exec.Header{Key: "a", Value: []byte{1}}, exec.Header{Key: "", Value: nil}
	out := headersOf(in)
	if len(out) != 2 || cap(out) != 5 || out[0].Key != "a" || out[0].Value[0] != 1 || out[1].Value != nil {
		t.Fatalf("headersOf = %v (cap %d)", out, cap(out))
	}
	out[1].Key = "b" // shared, as before
	if in[1].Key != "b" {
		t.Error("headersOf copied")
	}
	back := execHeaders(out)
	if &back[0] != &in[0] || cap(back) != 5 {
		t.Error("execHeaders copied")
	}
}
