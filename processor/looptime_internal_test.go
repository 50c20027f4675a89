package processor

import (
	"testing"
	"time"
)

// TestLoopClockCountsThePhaseUnderWay: a phase counts while it runs, not
// only when it ends, so two readings never differ by more than the time
// between them (the console reads every second, and a poll may wait a
// whole commit interval); between phases nothing counts.
func TestLoopClockCountsThePhaseUnderWay(t *testing.T) {
	const d = 20 * time.Millisecond
	var s Stats
	if lt := s.LoopTime(); len(lt) != len(LoopPhases) || lt[PhasePoll] != 0 {
		t.Fatalf("a new clock: %v", lt)
	}
	began := time.Now()
	s.enter(loopPoll)
	time.Sleep(d)
	first := s.LoopTime()[PhasePoll]
	if first < d {
		t.Errorf("poll under way for %v counts %v", d, first)
	}
	time.Sleep(d)
	s.enter(loopProcess)
	polled := s.LoopTime()[PhasePoll]
	if polled-first < d {
		t.Errorf("poll counted %v, then %v after %v more", first, polled, d)
	}
	time.Sleep(d)
	s.enter(loopOther)
	between := s.LoopTime()
	time.Sleep(d)
	if after := s.LoopTime(); after[PhasePoll] != between[PhasePoll] || after[PhaseProcess] != between[PhaseProcess] {
		t.Errorf("between phases the clock moved: %v, then %v", between, after)
	}
	if between[PhaseProcess] < d {
		t.Errorf("process took %v, counted %v", d, between[PhaseProcess])
	}
	var sum time.Duration
	for _, v := range between {
		sum += v
	}
	if took := time.Since(began); sum > took {
		t.Errorf("the phases add up to %v in %v", sum, took)
	}
}

// TestLoopClockCountsProcessingWhileThePollWaits: the tasks process while
// the loop polls again (pipeline.go); time in which a task processes counts
// as processing, whatever the loop does, and the poll counts only while no
// task processes.
func TestLoopClockCountsProcessingWhileThePollWaits(t *testing.T) {
	const d = 20 * time.Millisecond
	var s Stats
	s.working(1)
	s.working(1)
	s.enter(loopPoll)
	time.Sleep(d)
	s.working(-1)
	time.Sleep(d)
	busy := s.LoopTime()
	s.working(-1)
	time.Sleep(d)
	s.enter(loopOther)
	lt := s.LoopTime()
	if busy[PhaseProcess] < 2*d || busy[PhasePoll] != 0 {
		t.Errorf("tasks processed for %v while the loop polled: counted %v", 2*d, busy)
	}
	if polled := lt[PhasePoll]; polled < d || polled > lt[PhaseProcess] {
		t.Errorf("the loop polled %v after the tasks' %v: counted %v", d, 2*d, lt)
	}
	s.working(1)
	time.Sleep(d)
	s.working(-1)
	if after := s.LoopTime(); after[PhaseProcess]-lt[PhaseProcess] < d || after[PhasePoll] != lt[PhasePoll] {
		t.Errorf("a task processed %v between the loop's phases: counted %v, then %v", d, lt, after)
	}
}
