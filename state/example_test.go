package state_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/state"
	"github.com/sluice-streams/sluice/store"
)

// Read the counts a stopped wordcount left in its state directory (here a
// store written by hand, as task 0_0 of application "wc" would).
func Example() {
	root, _ := os.MkdirTemp("", "state-example-")
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "wc", "0_0", "counts")
	_ = os.MkdirAll(dir, 0o755)
	eng, _ := store.OpenPebble(dir)
	n, _ := serde.Int64.Encode(3)
	_ = eng.Apply([]store.Write{{Key: []byte("sluice"), Value: n}}, 41)
	_ = eng.Close()

	r, err := state.Open(root)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	infos, _ := r.Stores()
	for _, s := range infos {
		fmt.Println(s.Application, s.Task, s.Store, s.Records, "records, changelog offset", s.ChangelogOffset)
	}
	_ = state.KeyValues(r, "counts", serde.String, serde.Int64, func(kv state.KeyValue[string, int64]) error {
		fmt.Println(kv.Key, kv.Value)
		return nil
	})
	// Output:
	// wc 0_0 counts 1 records, changelog offset 41
	// sluice 3
}
