package bench

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/txn"
)

// TestVerifiersCatchWrongOutput runs the pipe, stateless, count, wordcount
// and billing scenarios small, and checks that each verification passes on
// the real output but fails once the input it compares with is changed in
// one record: the output then no longer matches it.
func TestVerifiersCatchWrongOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jobs on an embedded broker")
	}
	tamper := map[string]func(r *kgo.Record){
		"pipe":      func(r *kgo.Record) { r.Key = []byte("elsewhere") },
		"stateless": func(r *kgo.Record) { r.Value = append([]byte("x"), r.Value...) },
		"count":     func(r *kgo.Record) { r.Key = []byte("elsewhere") },
		"wordcount": func(r *kgo.Record) { r.Value = []byte("unheard") },
		"billing": func(r *kgo.Record) {
			var b examples.Bill
			_ = json.Unmarshal(r.Value, &b)
			b.AmountCents++
			r.Value, _ = json.Marshal(b)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := Config{Records: 3000, Partitions: 2, CommitInterval: 50 * time.Millisecond}
	for name, change := range tamper {
		t.Run(name, func(t *testing.T) {
			sc, _ := scenarioNamed(name)
			verify := sc.verify
			sc.verify = func(ctx context.Context, addrs []string, g txn.Guarantee, input []*kgo.Record) (string, error) {
				note, err := verify(ctx, addrs, g, input)
				if err != nil {
					return note, err
				}
				recs := make([]*kgo.Record, len(input))
				for i, r := range input {
					c := *r
					recs[i] = &c
				}
				change(recs[len(recs)/2])
				if _, err := verify(ctx, addrs, g, recs); err == nil {
					t.Errorf("the output verified against an input with one record changed")
				}
				return note, nil
			}
			res, err := runOne(ctx, cfg, sc, txn.ExactlyOnce)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res.Note)
		})
	}
}
