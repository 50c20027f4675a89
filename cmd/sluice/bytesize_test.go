package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/processor"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"268435456", 256 << 20},
		{"0", 0},
		{"512MiB", 512 << 20},
		{"512 MiB", 512 << 20},
		{"512mib", 512 << 20},
		{"512Mi", 512 << 20},
		{"1GiB", 1 << 30},
		{"1.5GiB", 3 << 29},
		{"64KiB", 64 << 10},
		{"2TiB", 2 << 40},
		{"100MB", 100e6},
		{"100M", 100e6},
		{"1G", 1e9},
		{"7B", 7},
		{" 3KiB ", 3 << 10},
	} {
		got, err := parseBytes(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "MiB", "abc", "12XB", "-1MiB", "1e9", "0x10", "1_000", "NaN", "Inf", "+5", "9999999TiB", "5 5MiB", "MiB5"} {
		if got, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, got)
		}
	}
	for _, n := range []int64{256 << 20, 1 << 30, 3 << 10, 1000, 0} {
		if got, err := parseBytes(formatBytes(n)); err != nil || got != n {
			t.Errorf("parseBytes(formatBytes(%d) = %q) = %d, %v", n, formatBytes(n), got, err)
		}
	}
}

// TestMemoryBudgetConfig: state.memory.budget is read from the flag, the
// environment and the config file (a YAML number or a string with a unit),
// defaults to processor's, and bad values are errors naming the key.
func TestMemoryBudgetConfig(t *testing.T) {
	clearEnv(t)
	c, err := loadVia(t, "app")
	if err != nil || c.MemoryBudget != processor.DefaultMemoryBudget {
		t.Fatalf("default: %d, %v; want %d", c.MemoryBudget, err, processor.DefaultMemoryBudget)
	}
	if c, err = loadVia(t, "app", "--memory-budget", "512MiB"); err != nil || c.MemoryBudget != 512<<20 {
		t.Fatalf("flag: %d, %v", c.MemoryBudget, err)
	}
	if o := c.opt(keyMemoryBudget); o == nil {
		t.Fatal("state.memory.budget has no processor option")
	}
	t.Setenv(envName(keyMemoryBudget), "1GiB")
	if c, err = loadVia(t, "app"); err != nil || c.MemoryBudget != 1<<30 {
		t.Fatalf("environment %s: %d, %v", envName(keyMemoryBudget), c.MemoryBudget, err)
	}
	clearEnv(t)
	for yaml, want := range map[string]int64{
		"state.memory.budget: 134217728\n":               128 << 20,
		"state.memory.budget: 64MiB\n":                   64 << 20,
		"state:\n  memory:\n    budget: 2GiB\n":          2 << 30,
		"state.dir: /tmp/x\nstate.memory.budget: 32Mi\n": 32 << 20,
	} {
		f := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if c, err = loadVia(t, "app", "--config", f); err != nil || c.MemoryBudget != want {
			t.Errorf("config file %q: %d, %v; want %d", yaml, c.MemoryBudget, err, want)
		}
	}
	for _, bad := range []string{"lots", "-5MiB", "1MiB", "12XB"} {
		_, err := loadVia(t, "app", "--memory-budget", bad)
		if err == nil || !strings.Contains(err.Error(), "state.memory.budget") || !strings.Contains(err.Error(), "--memory-budget") {
			t.Errorf("--memory-budget %s: %v, want an error naming the key and the flag", bad, err)
		}
	}
}

// TestPartFetchBytesConfig: max.partition.fetch.bytes is read from the
// flag, the environment and the config file, defaults to processor's,
// reaches a processor option, and values outside 1 byte to 50MiB are errors
// naming the key.
func TestPartFetchBytesConfig(t *testing.T) {
	clearEnv(t)
	c, err := loadVia(t, "app")
	if err != nil || c.PartFetchBytes != processor.DefaultMaxPartitionFetchBytes {
		t.Fatalf("default: %d, %v; want %d", c.PartFetchBytes, err, processor.DefaultMaxPartitionFetchBytes)
	}
	if c, err = loadVia(t, "app", "--max-partition-fetch-bytes", "1MiB"); err != nil || c.PartFetchBytes != 1<<20 {
		t.Fatalf("flag: %d, %v", c.PartFetchBytes, err)
	}
	if o := c.opt(keyPartFetchBytes); o == nil {
		t.Fatal("max.partition.fetch.bytes has no processor option")
	}
	t.Setenv(envName(keyPartFetchBytes), "16KiB")
	if c, err = loadVia(t, "app"); err != nil || c.PartFetchBytes != 16<<10 {
		t.Fatalf("environment %s: %d, %v", envName(keyPartFetchBytes), c.PartFetchBytes, err)
	}
	clearEnv(t)
	f := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(f, []byte("max.partition.fetch.bytes: 50MiB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err = loadVia(t, "app", "--config", f); err != nil || c.PartFetchBytes != 50<<20 {
		t.Errorf("config file: %d, %v", c.PartFetchBytes, err)
	}
	for _, bad := range []string{"0", "-1MiB", "51MiB", "many"} {
		_, err := loadVia(t, "app", "--max-partition-fetch-bytes", bad)
		if err == nil || !strings.Contains(err.Error(), "max.partition.fetch.bytes") || !strings.Contains(err.Error(), "--max-partition-fetch-bytes") {
			t.Errorf("--max-partition-fetch-bytes %s: %v, want an error naming the key and the flag", bad, err)
		}
	}
}
