package nexmark

// Tracker follows a query's output record by record and tells when it has
// become the oracle's answer, at a cost per record independent of the
// output's size: how a benchmark knows that a streaming query is done.
// It compares bytes as written (the queries and the oracle encode the same
// row types with encoding/json); Check, which also compares canonically
// and reports differences, remains the verdict.
type Tracker struct {
	mode Mode
	// Append: how many of each record are still to come, and how many in
	// all.
	remaining map[string]int
	missing   int
	extra     int
	// Upsert: the wanted and current value per key, and how many keys
	// match (keys not wanted count in extra while they have a value).
	want, cur map[string]string
	matched   int
}

// NewTracker returns a tracker of output that should become want.
func NewTracker(want Expected) *Tracker {
	t := &Tracker{mode: want.Mode}
	if want.Mode == Append {
		t.remaining = map[string]int{}
		for _, r := range want.Records {
			t.remaining[r.Key+"\x00"+string(r.Value)]++
		}
		t.missing = len(want.Records)
		return t
	}
	t.want, t.cur = map[string]string{}, map[string]string{}
	for k, v := range finalOf(want.Records) {
		t.want[k] = v
	}
	return t
}

// Add takes the next output record (a nil value deletes its key).
func (t *Tracker) Add(r Record) {
	if t.mode == Append {
		k := r.Key + "\x00" + string(r.Value)
		if t.remaining[k] > 0 {
			t.remaining[k]--
			t.missing--
		} else {
			t.extra++
		}
		return
	}
	w, wanted := t.want[r.Key]
	old, had := t.cur[r.Key]
	if r.Value == nil {
		delete(t.cur, r.Key)
	} else {
		t.cur[r.Key] = string(r.Value)
	}
	v, has := t.cur[r.Key]
	if !wanted {
		switch {
		case has && !had:
			t.extra++
		case had && !has:
			t.extra--
		}
		return
	}
	if had && old == w {
		t.matched--
	}
	if has && v == w {
		t.matched++
	}
}

// Done reports whether the output so far is the oracle's answer.
func (t *Tracker) Done() bool {
	if t.mode == Append {
		return t.missing == 0 && t.extra == 0
	}
	return t.matched == len(t.want) && t.extra == 0
}
