package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteUnits are the units parseBytes accepts, longest first so that "MiB"
// is not read as "B". Binary units (KiB, Ki) are powers of 1024, decimal
// ones (KB, K) of 1000, as in Kubernetes' quantities.
var byteUnits = []struct {
	name string
	mult float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"ki", 1 << 10}, {"mi", 1 << 20}, {"gi", 1 << 30}, {"ti", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12},
	{"b", 1},
}

var errBadBytes = errors.New("want a size in bytes such as 268435456, 512MiB or 1GiB")

// parseBytes reads a size in bytes: a number, optionally with a fraction,
// and an optional unit (B, KiB, MiB, GiB, TiB, Ki…, KB…, K…; any case).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num, mult := s, 1.0
	lower := strings.ToLower(s)
	for _, u := range byteUnits {
		if strings.HasSuffix(lower, u.name) {
			num, mult = strings.TrimSpace(s[:len(s)-len(u.name)]), u.mult
			break
		}
	}
	if num == "" || strings.ContainsAny(num, "eEx_+") {
		return 0, errBadBytes
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errBadBytes
	}
	if f < 0 {
		return 0, errors.New("must not be negative")
	}
	if f*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("too large: %s", s)
	}
	return int64(f * mult), nil
}

// formatBytes writes n in the largest binary unit that divides it.
func formatBytes(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
