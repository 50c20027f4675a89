package diskfault

import (
	"fmt"
	"os"
	"path/filepath"
)

// GarbleTables flips bytes 100 to 199 of every sstable in dir and returns
// how many it damaged. Those bytes lie inside the first data block, so a
// read of it fails its checksum; the footer and index stay readable, so
// Pebble opens the store and finds the damage on the read.
func GarbleTables(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("diskfault: %w", err)
	}
	n := 0
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ".sst" {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return n, fmt.Errorf("diskfault: %w", err)
		}
		for i := 100; i < 200 && i < len(b); i++ {
			b[i] ^= 0xff
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return n, fmt.Errorf("diskfault: %w", err)
		}
		n++
	}
	return n, nil
}
