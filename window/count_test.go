package window

import (
	"errors"
	"fmt"
	"testing"
)

func TestCountValidate(t *testing.T) {
	for _, w := range []Count{TumblingCount(0), SlidingCount(3, 0), SlidingCount(-1, 1), SlidingCount(3, 4)} {
		if err := w.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v accepted: %v", w, err)
		}
	}
	for _, w := range []Count{TumblingCount(1), TumblingCount(5), SlidingCount(5, 1), SlidingCount(5, 5)} {
		if err := w.Validate(); err != nil {
			t.Errorf("%+v rejected: %v", w, err)
		}
	}
}

// TestCountMatchesModel runs each definition against a brute force: a
// buffer of every record, a window firing every slide records with the last
// size of them, and eviction of what no later window reads.
func TestCountMatchesModel(t *testing.T) {
	for size := int64(1); size <= 7; size++ {
		for slide := int64(1); slide <= size; slide++ {
			w := SlidingCount(size, slide)
			const n = 60
			// firings[k] = the window fired by record k+1, in the model.
			type win struct{ from, to int64 }
			var fired []win
			for seen := int64(1); seen <= n; seen++ {
				var f win
				if seen%slide == 0 {
					for i := seen - 1; i >= 0 && i >= seen-size; i-- {
						f.from = i
					}
					f.to = seen
				}
				fired = append(fired, f)
			}
			for seen := int64(0); seen <= n; seen++ {
				from, to, ok := w.Window(seen)
				var want win
				if seen > 0 {
					want = fired[seen-1]
				}
				if ok != (want.to != 0) || w.Fires(seen) != ok {
					t.Fatalf("size %d slide %d seen %d: fires %v/%v, model %v", size, slide, seen, ok, w.Fires(seen), want.to != 0)
				}
				if ok && (from != want.from || to != want.to) {
					t.Fatalf("size %d slide %d seen %d: window [%d,%d), model [%d,%d)", size, slide, seen, from, to, want.from, want.to)
				}
				if !ok && from != to {
					t.Fatalf("size %d slide %d seen %d: no firing but non-empty [%d,%d)", size, slide, seen, from, to)
				}
				// Retain: the oldest record any later firing reads; if
				// none within reach does, the next record to come.
				keep := seen
				for later := seen + 1; later <= n; later++ {
					if f := fired[later-1]; f.to != 0 {
						keep = min(keep, f.from)
					}
				}
				if seen+size+slide <= n && w.Retain(seen) != keep {
					t.Fatalf("size %d slide %d seen %d: retain %d, model %d", size, slide, seen, w.Retain(seen), keep)
				}
			}
		}
	}
}

func TestTumblingCountPurges(t *testing.T) {
	w := TumblingCount(3)
	var got []string
	for seen := int64(1); seen <= 7; seen++ {
		if from, to, ok := w.Window(seen); ok {
			got = append(got, fmt.Sprintf("[%d,%d) retain %d", from, to, w.Retain(seen)))
		}
	}
	if fmt.Sprint(got) != "[[0,3) retain 3 [3,6) retain 6]" {
		t.Errorf("got %v", got)
	}
}

func ExampleSlidingCount() {
	w := SlidingCount(3, 2)
	for seen := int64(1); seen <= 6; seen++ {
		if from, to, ok := w.Window(seen); ok {
			fmt.Printf("record %d fires records [%d,%d), keep from %d\n", seen-1, from, to, w.Retain(seen))
		}
	}
	// Output:
	// record 1 fires records [0,2), keep from 1
	// record 3 fires records [1,4), keep from 3
	// record 5 fires records [3,6), keep from 5
}
