package ops

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
)

// TestFKRecordsEveryLength round-trips subscriptions and responses with
// left keys and right values of every length and UUIDs, pins their bytes,
// and rejects truncated records.
func TestFKRecordsEveryLength(t *testing.T) {
	keys := testkeys.Bytes()
	for _, k := range testkeys.All() {
		keys = append(keys, []byte(k))
	}
	for i, kb := range keys {
		for _, s := range []Subscription{{Add: true, Key: kb, Hash: uint64(i) * 0x9e3779b97f4a7c15}, {Add: false, Key: kb}} {
			b, err := SubscriptionSerde{}.Encode(s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := SubscriptionSerde{}.Decode(b)
			if err != nil || got.Add != s.Add || !bytes.Equal(got.Key, s.Key) || got.Hash != s.Hash {
				t.Fatalf("subscription %+v came back as %+v, %v", s, got, err)
			}
			if _, err := (SubscriptionSerde{}).Decode(b[:len(b)-1]); !errors.Is(err, serde.ErrDecode) {
				t.Fatalf("a truncated subscription of a key of %d bytes decoded: %v", len(kb), err)
			}
		}
		for _, vb := range [][]byte{nil, {}, kb} {
			r := Response{Hash: uint64(i), Value: vb}
			b, err := ResponseSerde{}.Encode(r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ResponseSerde{}.Decode(b)
			if err != nil || got.Hash != r.Hash || (got.Value == nil) != (vb == nil) || !bytes.Equal(got.Value, vb) {
				t.Fatalf("response %+v came back as %+v, %v", r, got, err)
			}
		}
	}
	if b, _ := (SubscriptionSerde{}).Encode(Subscription{Add: true, Key: []byte("k"), Hash: 2}); string(b) != "\x01\x01k\x00\x00\x00\x00\x00\x00\x00\x02" {
		t.Fatalf("subscription bytes %x", b)
	}
	if b, _ := (ResponseSerde{}).Encode(Response{Hash: 2, Value: []byte("v")}); string(b) != "\x00\x00\x00\x00\x00\x00\x00\x02\x01v" {
		t.Fatalf("response bytes %x", b)
	}
	if h := ValueHash([]byte("a")); h != 0xaf63dc4c8601ec8c { // FNV-1a 64 of "a"
		t.Fatalf("ValueHash(a) = %x", h)
	}
	for _, b := range [][]byte{nil, {1}, {1, 5, 'a'}, {1, 0x80}} {
		if _, err := (SubscriptionSerde{}).Decode(b); !errors.Is(err, serde.ErrDecode) {
			t.Fatalf("subscription %x decoded: %v", b, err)
		}
	}
	for _, b := range [][]byte{nil, make([]byte, 8), append(make([]byte, 8), 2)} {
		if _, err := (ResponseSerde{}).Decode(b); !errors.Is(err, serde.ErrDecode) {
			t.Fatalf("response %x decoded: %v", b, err)
		}
	}
}

// order is the left table's value: its foreign key and a number.
type order struct {
	FK string
	N  int
}

// fkRun is a foreign-key join of orders (left, keyed by order id) with
// customers (right, keyed by customer id), both sides' runtimes wired to
// each other through their record serdes, as the repartition topics do.
type fkRun struct {
	c     *joinCtx
	left  *FKLeft[string, order, string, string, string]
	right *FKRight[string, string, string]
	ord   kvView[string, order]
	cust  kvView[string, string]
}

func newFKRun(t *testing.T, inner bool) *fkRun {
	c := newJoinCtx(t, "orders", "customers", "fk-subscriptions", "fk-results")
	f := &fkRun{c: c,
		ord:  kvView[string, order]{c.stores["orders"], serde.String, serde.JSON[order]()},
		cust: kvView[string, string]{c.stores["customers"], serde.String, serde.String},
	}
	f.left = NewFKLeft(FKLeftConfig[string, order, string, string, string]{
		Left: func(c exec.Context) FKTable[string, order] { return f.ord },
		Results: func(c exec.Context) FKTable[string, string] {
			return kvView[string, string]{c.Store("fk-results"), serde.String, serde.String}
		},
		Key: serde.String, Value: serde.JSON[order](), RightKey: serde.String, RightValue: serde.String,
		FK: func(o order) string { return o.FK },
		Join: func(o order, cust string, ok bool) (string, bool) {
			if !ok && inner {
				return "", false
			}
			return fmt.Sprintf("%d:%v:%s", o.N, ok, cust), true
		},
	})
	f.right = NewFKRight(FKRightConfig[string, string, string]{Subscriptions: "fk-subscriptions", Right: "customers",
		RightKey: serde.String, RightValue: serde.String, LeftKey: serde.String})
	c.fwd = func(r exec.Record) error {
		switch v := r.Value.(type) {
		case Subscription:
			b, err := SubscriptionSerde{}.Encode(v)
			if err != nil {
				return err
			}
			if r.Value, err = (SubscriptionSerde{}).Decode(b); err != nil {
				return err
			}
			return f.right.Process(r)
		case Response:
			b, err := ResponseSerde{}.Encode(v)
			if err != nil {
				return err
			}
			if r.Value, err = (ResponseSerde{}).Decode(b); err != nil {
				return err
			}
			return f.left.Process(r)
		case exec.Change:
			c.out = append(c.out, fmt.Sprintf("%s=%v->%v@%d", r.Key, v.Old, v.New, r.Timestamp))
			return nil
		}
		return fmt.Errorf("forwarded %T", r.Value)
	}
	if err := errors.Join(f.left.Init(c), f.right.Init(c)); err != nil {
		t.Fatal(err)
	}
	return f
}

// putOrder writes order k (nil: deletes it) as the left table does, and
// hands the left side the change.
func (f *fkRun) putOrder(k string, o *order, ts int64) func() error {
	return putRow(f.ord, k, o, ts, f.left.Process)
}

// putCustomer writes customer k (nil: deletes it) as the right table does,
// and hands the right side the change.
func (f *fkRun) putCustomer(k string, name *string, ts int64) func() error {
	return putRow(f.cust, k, name, ts, f.right.Process)
}

// putRow writes row k of a table (nil: deletes it), and hands process the
// change, as a table node does.
func putRow[V any](kv kvView[string, V], k string, v *V, ts int64, process func(exec.Record) error) func() error {
	return func() error {
		old, had, err := kv.Get(k)
		if err != nil {
			return err
		}
		ch := exec.Change{}
		if had {
			ch.Old = old
		}
		if v == nil {
			err = kv.Delete(k)
		} else {
			ch.New, err = *v, kv.Put(k, *v)
		}
		if err != nil {
			return err
		}
		return process(exec.Record{Key: k, Value: ch, Timestamp: ts})
	}
}

// fkSteps writes customers and orders keyed by keys of every length and
// UUIDs, then changes and deletes customers, moves orders to other
// customers and deletes orders; model is the joined table it should give.
func (f *fkRun) fkSteps(inner bool) (steps []func() error, model map[string]string) {
	keys := testkeys.All()
	n := len(keys)
	custs, ords := map[string]string{}, map[string]order{}
	ts := int64(0)
	cust := func(k string, name *string) {
		ts++
		steps = append(steps, f.putCustomer(k, name, ts))
		if name == nil {
			delete(custs, k)
		} else {
			custs[k] = *name
		}
	}
	ord := func(k string, o *order) {
		ts++
		steps = append(steps, f.putOrder(k, o, ts))
		if o == nil {
			delete(ords, k)
		} else {
			ords[k] = *o
		}
	}
	for i, k := range keys {
		if i%3 != 2 {
			name := "c" + k
			cust(k, &name)
		}
	}
	for i, k := range keys {
		ord(k, &order{FK: keys[(i*7)%n], N: i})
	}
	for i, k := range keys {
		switch {
		case i%11 == 0:
			cust(k, nil)
		case i%5 == 0:
			name := "renamed" + k
			cust(k, &name)
		}
	}
	for i, k := range keys {
		switch {
		case i%9 == 0:
			ord(k, nil)
		case i%4 == 0:
			ord(k, &order{FK: keys[(i*13+1)%n], N: -i})
		case i%6 == 1:
			ord(k, &order{FK: ords[k].FK, N: i + 1000}) // same customer, new value
		}
	}
	model = map[string]string{}
	for k, o := range ords {
		name, ok := custs[o.FK]
		if !ok && inner {
			continue
		}
		model[k] = fmt.Sprintf("%d:%v:%s", o.N, ok, name)
	}
	return steps, model
}

// results reads the join's result store.
func (f *fkRun) results(t *testing.T) map[string]string {
	got := map[string]string{}
	if err := f.c.stores["fk-results"].Range(nil, nil, func(k, v []byte) error {
		got[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestFKJoinEveryKey drives both sides of inner and left foreign-key joins
// directly, over Pebble, with left and foreign keys of every encoded length
// and UUIDs: the emitted changes, applied in order, and the result store
// both equal the model, and every change's Old is the row emitted before.
func TestFKJoinEveryKey(t *testing.T) {
	for _, inner := range []bool{true, false} {
		f := newFKRun(t, inner)
		steps, model := f.fkSteps(inner)
		if len(model) < 40 {
			t.Fatalf("inner %v: the model joins only %d rows", inner, len(model))
		}
		var emitted []exec.Record
		fwd := f.c.fwd
		f.c.fwd = func(r exec.Record) error {
			if _, ok := r.Value.(exec.Change); ok {
				emitted = append(emitted, r)
			}
			return fwd(r)
		}
		f.c.runTxns(t, steps, 10, func(int) bool { return false })
		table := map[string]string{}
		for _, r := range emitted {
			ch := r.Value.(exec.Change)
			k := r.Key.(string)
			if old, had := table[k]; (ch.Old == nil) == had || had && ch.Old != old {
				t.Fatalf("inner %v: change of %q has Old %v, but %q (%v) was emitted before", inner, k, ch.Old, old, had)
			}
			if ch.New == nil {
				delete(table, k)
			} else {
				table[k] = ch.New.(string)
			}
		}
		if !maps.Equal(table, model) {
			t.Fatalf("inner %v: emitted table of %d rows, want %d", inner, len(table), len(model))
		}
		if got := f.results(t); !maps.Equal(got, model) {
			t.Fatalf("inner %v: result store of %d rows, want %d", inner, len(got), len(model))
		}
	}
}

// TestFKRightSubscriptionKeys checks the subscription store's bytes: one
// entry per subscribed left key under its foreign key's prefix, holding
// the hash of the left value.
func TestFKRightSubscriptionKeys(t *testing.T) {
	f := newFKRun(t, true)
	fk := testkeys.UUIDs(1)[0]
	var steps []func() error
	keys := []string{"", "a", testkeys.Len(127, 2), testkeys.Len(130, 3)}
	for i, k := range keys {
		steps = append(steps, f.putOrder(k, &order{FK: fk, N: i}, 1))
	}
	f.c.runTxns(t, steps, 1, func(int) bool { return false })
	pre := layout.SubscriptionPrefix([]byte(fk))
	var got []string
	if err := f.c.stores["fk-subscriptions"].Range(nil, nil, func(k, v []byte) error {
		if !bytes.HasPrefix(k, pre) {
			t.Fatalf("subscription key %x lacks the prefix %x", k, pre)
		}
		got = append(got, string(k[len(pre):]))
		vb, _ := serde.JSON[order]().Encode(order{FK: fk, N: slices.Index(keys, string(k[len(pre):]))})
		if layout.ReadSubscriptionHash(v) != ValueHash(vb) {
			t.Fatalf("subscription of %q has hash %x, want %x", k[len(pre):], v, ValueHash(vb))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("subscribed %q, want %q", got, want)
	}
}

// TestFKJoinAbortReplay aborts every other transaction once and replays
// it: outputs and changelogs equal a run without aborts.
func TestFKJoinAbortReplay(t *testing.T) {
	for _, per := range []int{1, 4, 25} {
		f0 := newFKRun(t, false)
		steps0, _ := f0.fkSteps(false)
		wantOut, wantLog := f0.c.runTxns(t, steps0, per, func(int) bool { return false })
		f := newFKRun(t, false)
		steps, _ := f.fkSteps(false)
		out, log := f.c.runTxns(t, steps, per, func(i int) bool { return i%2 == 0 })
		if !slices.Equal(out, wantOut) {
			t.Fatalf("%d steps a transaction: %d results after aborts, want %d", per, len(out), len(wantOut))
		}
		if !slices.Equal(log, wantLog) {
			t.Fatalf("%d steps a transaction: changelogs differ after aborts", per)
		}
	}
}
