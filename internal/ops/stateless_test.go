package ops

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/testkeys"
)

// fwdCtx records what a stateless body forwards; the rest of exec.Context
// is nil (a body calling it panics the test). fail makes Forward fail.
type fwdCtx struct {
	exec.Context
	out     []string
	fail    error
	ignored int // deletes counted as ignored
}

func (c *fwdCtx) CountIgnoredDelete() { c.ignored++ }

func (c *fwdCtx) Forward(r exec.Record) error { return c.ForwardTo("*", r) }
func (c *fwdCtx) ForwardTo(child string, r exec.Record) error {
	if c.fail != nil {
		return c.fail
	}
	v := fmt.Sprint(r.Value)
	if r.Value == exec.Tombstone {
		v = "<tombstone>"
	}
	c.out = append(c.out, fmt.Sprintf("%s %q=%s @%d", child, r.Key, v, r.Timestamp))
	return nil
}

// erased runs op's New on each record.
func erased[K, V, K2, V2 any](t *testing.T, op Stateless[K, V, K2, V2], recs []exec.Record) []string {
	t.Helper()
	c := &fwdCtx{}
	p := op.New()()
	if err := p.Init(c); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := p.Process(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	return c.out
}

// typed links op's Typed into a chain ending in the erased output
// (exec.ChainOut, as a task links it) and runs each record through it,
// checking the frame names the node.
func typed[K, V, K2, V2 any](t *testing.T, op Stateless[K, V, K2, V2], recs []exec.Record) []string {
	t.Helper()
	n := &exec.Node{Name: "op"}
	ty := op.Typed(n)
	if ty == nil {
		t.Fatal("no Typed")
	}
	c := &fwdCtx{}
	f := &exec.Frame{}
	entry, ok := ty.Link(f, nil, ty.Out(f, c.Forward)).(func(K, V) error)
	if !ok {
		t.Fatal("Link returned no entry of the input types")
	}
	if ty.Link(f, nil, func(struct{}, V2) error { return nil }) != nil {
		t.Fatal("Link accepted a child entry of other types")
	}
	for _, r := range recs {
		f.Timestamp, f.Node, f.Class = r.Timestamp, nil, ""
		if err := entry(r.Key.(K), r.Value.(V)); err != nil {
			t.Fatal(err)
		}
		if f.Node != n || f.Class != exec.Processing {
			t.Fatalf("frame names %v/%v, not the operator's node", f.Node, f.Class)
		}
	}
	return c.out
}

func keyRecords() []exec.Record {
	var recs []exec.Record
	for i, k := range testkeys.All() {
		recs = append(recs, exec.Record{Key: k, Value: i, Timestamp: int64(i)})
	}
	return recs
}

// TestStatelessErasedAndTypedAgree runs every stateless operator over keys
// of every encoded length through both paths, which must forward the same
// records, and checks what they forward.
func TestStatelessErasedAndTypedAgree(t *testing.T) {
	recs := keyRecords()
	type kv struct {
		Key   string
		Value int
	}
	cases := []struct {
		name   string
		run    func(t *testing.T, recs []exec.Record) (erased, typed []string)
		expect func(r exec.Record) []string // "" key/value: as erased shows them
	}{
		{"Map", func(t *testing.T, recs []exec.Record) ([]string, []string) {
			op := Map(func(k string, v int) (string, int) { return k + "!", v * 2 })
			return erased(t, op, recs), typed(t, op, recs)
		}, func(r exec.Record) []string {
			return []string{fmt.Sprintf("* %q=%d @%d", r.Key.(string)+"!", r.Value.(int)*2, r.Timestamp)}
		}},
		{"MapValues", func(t *testing.T, recs []exec.Record) ([]string, []string) {
			op := MapValues[string](func(v int) string { return fmt.Sprint("v", v) })
			return erased(t, op, recs), typed(t, op, recs)
		}, func(r exec.Record) []string {
			return []string{fmt.Sprintf("* %q=v%d @%d", r.Key, r.Value, r.Timestamp)}
		}},
		{"FlatMap", func(t *testing.T, recs []exec.Record) ([]string, []string) {
			op := FlatMap(func(k string, v int) []kv {
				out := make([]kv, v%3)
				for i := range out {
					out[i] = kv{strings.Repeat(k, i+1), v + i}
				}
				return out
			})
			return erased(t, op, recs), typed(t, op, recs)
		}, func(r exec.Record) []string {
			var out []string
			for i := 0; i < r.Value.(int)%3; i++ {
				out = append(out, fmt.Sprintf("* %q=%d @%d", strings.Repeat(r.Key.(string), i+1), r.Value.(int)+i, r.Timestamp))
			}
			return out
		}},
		{"FlatMapValues", func(t *testing.T, recs []exec.Record) ([]string, []string) {
			op := FlatMapValues[string](func(v int) []int { return make([]int, v%3) })
			return erased(t, op, recs), typed(t, op, recs)
		}, func(r exec.Record) []string {
			var out []string
			for i := 0; i < r.Value.(int)%3; i++ {
				out = append(out, fmt.Sprintf("* %q=0 @%d", r.Key, r.Timestamp))
			}
			return out
		}},
		{"Filter", func(t *testing.T, recs []exec.Record) ([]string, []string) {
			op := Filter(func(k string, v int) bool { return len(k)%2 == 0 })
			return erased(t, op, recs), typed(t, op, recs)
		}, func(r exec.Record) []string {
			if len(r.Key.(string))%2 != 0 {
				return nil
			}
			return []string{fmt.Sprintf("* %q=%d @%d", r.Key, r.Value, r.Timestamp)}
		}},
		{"SelectKey", func(t *testing.T, recs []exec.Record) ([]string, []string) {
			op := SelectKey(func(k string, v int) int { return len(k) + v })
			return erased(t, op, recs), typed(t, op, recs)
		}, func(r exec.Record) []string {
			return []string{fmt.Sprintf("* %q=%d @%d", any(len(r.Key.(string))+r.Value.(int)), r.Value, r.Timestamp)}
		}},
		{"Peek", func(t *testing.T, recs []exec.Record) ([]string, []string) {
			var seen []string
			op := Peek(func(k string, v int) { seen = append(seen, k) })
			e := erased(t, op, recs)
			n := len(seen)
			ty := typed(t, op, recs)
			if n != len(recs) || len(seen) != 2*len(recs) || !reflect.DeepEqual(seen[:n], seen[n:]) {
				t.Errorf("Peek saw %d then %d keys of %d", n, len(seen)-n, len(recs))
			}
			return e, ty
		}, func(r exec.Record) []string {
			return []string{fmt.Sprintf("* %q=%d @%d", r.Key, r.Value, r.Timestamp)}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, ty := tc.run(t, recs)
			var want []string
			for _, r := range recs {
				want = append(want, tc.expect(r)...)
			}
			if !reflect.DeepEqual(e, want) {
				t.Errorf("erased path forwarded\n%s\nwant\n%s", strings.Join(e, "\n"), strings.Join(want, "\n"))
			}
			if !reflect.DeepEqual(ty, e) {
				t.Errorf("typed path forwarded\n%s\nerased\n%s", strings.Join(ty, "\n"), strings.Join(e, "\n"))
			}
		})
	}
}

// TestStatelessTombstones: a tombstone never reaches the user's function;
// operators that keep the key pass it on, those that change it drop it.
func TestStatelessTombstones(t *testing.T) {
	called := func(t *testing.T) { t.Helper(); t.Error("user function called with a tombstone") }
	type kv struct {
		Key   string
		Value int
	}
	ops := map[string]struct {
		p      func() exec.Processor
		passes bool
	}{
		"Map":           {Map(func(string, int) (string, int) { called(t); return "", 0 }).New(), false},
		"FlatMap":       {FlatMap(func(string, int) []kv { called(t); return nil }).New(), false},
		"SelectKey":     {SelectKey(func(string, int) string { called(t); return "" }).New(), false},
		"MapValues":     {MapValues[string](func(int) int { called(t); return 0 }).New(), true},
		"FlatMapValues": {FlatMapValues[string](func(int) []int { called(t); return nil }).New(), true},
		"Filter":        {Filter(func(string, int) bool { called(t); return false }).New(), true},
		"Peek":          {Peek(func(string, int) { called(t) }).New(), true},
		"BranchChild":   {BranchChild[string, int]().New(), true},
	}
	for name, op := range ops {
		for _, k := range testkeys.All() {
			c := &fwdCtx{}
			p := op.p()
			if err := p.Init(c); err != nil {
				t.Fatal(err)
			}
			if err := p.Process(exec.Record{Key: k, Value: exec.Tombstone, Timestamp: 7}); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var want []string
			wantIgnored := 1 // an operator that rekeys ignores it, and counts it
			if op.passes {
				want, wantIgnored = []string{fmt.Sprintf("* %q=<tombstone> @7", k)}, 0
			}
			if !reflect.DeepEqual(c.out, want) {
				t.Fatalf("%s forwarded %q for a tombstone of %q, want %q", name, c.out, k, want)
			}
			if c.ignored != wantIgnored {
				t.Fatalf("%s counted %d ignored deletes for a tombstone of %q, want %d", name, c.ignored, k, wantIgnored)
			}
		}
	}
}

// TestStatelessErrors: an error forwarding stops the operator and is
// returned as it is, on both paths (FlatMap after its first output).
func TestStatelessErrors(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	op := FlatMapValues[string](func(v int) []int { return []int{1, 2, 3} })
	c := &fwdCtx{fail: boom}
	p := op.New()()
	_ = p.Init(c)
	if err := p.Process(exec.Record{Key: "k", Value: 1}); err != boom {
		t.Fatalf("erased: %v, want boom", err)
	}
	f := &exec.Frame{}
	entry := op.Typed(&exec.Node{}).Link(f, nil, func(string, int) error { calls++; return boom }).(func(string, int) error)
	if err := entry("k", 1); err != boom || calls != 1 {
		t.Fatalf("typed: %v after %d calls, want boom after 1", err, calls)
	}
	if BranchChild[string, int]().Typed(&exec.Node{}) != nil {
		t.Fatal("an operator without a Link has a Typed")
	}
}

// TestBranch: the first matching predicate's child gets the record, none
// matching drops it, a tombstone goes to the first child; the children's
// names may be filled in after the body is made.
func TestBranch(t *testing.T) {
	names := make([]string, 3)
	body := Branch([]func(string, int) bool{
		func(k string, _ int) bool { return len(k) < 10 },
		func(k string, _ int) bool { return len(k) < 100 },
		func(_ string, v int) bool { return v%2 == 0 },
	}, names)
	copy(names, []string{"short", "medium", "even"})
	p := NewFn(body)()
	c := &fwdCtx{}
	_ = p.Init(c)
	var want []string
	for i, k := range testkeys.All() {
		if err := p.Process(exec.Record{Key: k, Value: i}); err != nil {
			t.Fatal(err)
		}
		switch {
		case len(k) < 10:
			want = append(want, fmt.Sprintf("short %q=%d @0", k, i))
		case len(k) < 100:
			want = append(want, fmt.Sprintf("medium %q=%d @0", k, i))
		case i%2 == 0:
			want = append(want, fmt.Sprintf("even %q=%d @0", k, i))
		}
	}
	_ = p.Process(exec.Record{Key: strings.Repeat("x", 200), Value: exec.Tombstone})
	want = append(want, fmt.Sprintf("short %q=<tombstone> @0", strings.Repeat("x", 200)))
	if !reflect.DeepEqual(c.out, want) {
		t.Fatalf("forwarded\n%s\nwant\n%s", strings.Join(c.out, "\n"), strings.Join(want, "\n"))
	}
}

// TestPassAndKeepIf: Pass forwards everything, tombstones included; KeepIf
// only the values it accepts.
func TestPassAndKeepIf(t *testing.T) {
	c := &fwdCtx{}
	pass, keep := NewFn(Pass)(), NewFn(KeepIf(func(v any) bool { _, ok := v.(int); return ok }))()
	_, _ = pass.Init(c), keep.Init(c)
	for _, v := range []any{1, "s", exec.Tombstone} {
		_ = pass.Process(exec.Record{Key: "p", Value: v})
		_ = keep.Process(exec.Record{Key: "k", Value: v})
	}
	want := []string{`* "p"=1 @0`, `* "k"=1 @0`, `* "p"=s @0`, `* "p"=<tombstone> @0`}
	if !reflect.DeepEqual(c.out, want) {
		t.Fatalf("forwarded %q, want %q", c.out, want)
	}
}
