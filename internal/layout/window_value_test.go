package layout

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/window"
)

// TestWindowValueBytes pins the encoding of a window's value down to the
// byte: the changelogs and local stores of deployed topologies hold it.
func TestWindowValueBytes(t *testing.T) {
	v := WindowValue{End: 0x0102, Count: 3, EventTimer: window.NoTimer, ProcTimer: -1, Seq: 4, SinceFire: 300, Records: true, Emitted: true, Shown: []byte("s")}
	got := AppendWindowValue([]byte("pre"), v, []byte("agg"))
	want := "pre" +
		"\x00\x00\x00\x00\x00\x00\x01\x02" + // end
		"\x00\x00\x00\x00\x00\x00\x00\x03" + // count
		"\x80\x00\x00\x00\x00\x00\x00\x00" + // event timer: window.NoTimer
		"\xff\xff\xff\xff\xff\xff\xff\xff" + // processing timer -1
		"\x00\x00\x00\x00\x00\x00\x00\x04" + // seq
		"\x0f" + // flags: records, emitted, kept, shown
		"\xac\x02" + // since-fire 300
		"\x01s" + // shown
		"agg"
	if string(got) != want {
		t.Fatalf("AppendWindowValue = %x\nwant                %x", got, want)
	}
	if window.NoTimer != -1<<63 {
		t.Fatalf("window.NoTimer is %d: the expected bytes above assume math.MinInt64", window.NoTimer)
	}
}

// TestWindowValueRoundTrip: every combination of the facts comes back as
// written, with aggregates and shown results empty or long.
func TestWindowValueRoundTrip(t *testing.T) {
	for _, agg := range []string{"", "x", strings.Repeat("é", 100)} {
		for _, shown := range []string{"-", "", "s", strings.Repeat("s", 200)} { // "-": none
			for _, records := range []bool{false, true} {
				for _, emitted := range []bool{false, true} {
					v := WindowValue{End: 1 << 40, Count: 7, EventTimer: window.NoTimer, ProcTimer: 99, Seq: 3, SinceFire: 200, Records: records, Emitted: emitted}
					if shown != "-" {
						v.Shown = []byte(shown)
					}
					name := fmt.Sprintf("agg %q shown %q records %v emitted %v", agg, shown, records, emitted)
					got, ab, err := ParseWindowValue(AppendWindowValue(nil, v, []byte(agg)))
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if string(ab) != agg || (got.Shown == nil) != (v.Shown == nil) || !bytes.Equal(got.Shown, v.Shown) {
						t.Errorf("%s: aggregate %q, shown %q", name, ab, got.Shown)
					}
					got.Shown = v.Shown
					if fmt.Sprint(got) != fmt.Sprint(v) {
						t.Errorf("%s: read back %+v, wrote %+v", name, got, v)
					}
				}
			}
		}
	}
}

// TestWindowValueCorrupt: undefined flags, legacy entries with new flags,
// and truncated fields are reported as corrupt, not misread.
func TestWindowValueCorrupt(t *testing.T) {
	base := make([]byte, WindowValueHeader)
	for _, c := range []struct {
		name string
		val  []byte
	}{
		{"empty", nil},
		{"short", base[:WindowValueHeader-1]},
		{"undefined flag", append(append([]byte(nil), base[:40]...), 1<<4)},
		{"legacy with emitted", append(append([]byte(nil), base[:40]...), windowFlagEmitted)},
		{"no since-fire", append(append([]byte(nil), base[:40]...), windowFlagKept)},
		{"since-fire cut", append(append([]byte(nil), base[:40]...), windowFlagKept, 0x80)},
		{"no shown length", append(append([]byte(nil), base[:40]...), windowFlagKept|windowFlagShown, 0)},
		{"shown past the end", append(append([]byte(nil), base[:40]...), windowFlagKept|windowFlagShown, 0, 9, 'a')},
	} {
		if _, _, err := ParseWindowValue(c.val); !errors.Is(err, window.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
}

// TestWindowValueLegacy: an entry written before the since-fire count and
// the emitted flag (flags 0 or 1, the aggregate right after the header)
// parses as Legacy, its since-fire count its count.
func TestWindowValueLegacy(t *testing.T) {
	for _, records := range []bool{false, true} {
		val := AppendWindowValue(nil, WindowValue{End: 100, Count: 5}, nil)[:WindowValueHeader]
		val[40] = 0
		if records {
			val[40] = windowFlagRecords
			val = append(val, "agg"...)
		}
		v, ab, err := ParseWindowValue(val)
		if err != nil || !v.Legacy || v.SinceFire != 5 || v.Count != 5 || v.End != 100 || v.Records != records || v.Emitted || v.Shown != nil {
			t.Fatalf("records %v: %+v %v", records, v, err)
		}
		if records && string(ab) != "agg" {
			t.Fatalf("aggregate %q", ab)
		}
	}
}
