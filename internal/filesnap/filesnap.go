package filesnap

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Snapshot maps each path under a directory to its description.
type Snapshot map[string]string

// Take describes every entry under dir.
func Take(dir string) (Snapshot, error) {
	out := Snapshot{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[p] = desc
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("filesnap: %w", err)
	}
	return out, nil
}

// Diff describes the first differences between a and b (in path order),
// "" if there are none.
func Diff(a, b Snapshot) string {
	var diffs []string
	for p, d := range a {
		if e, ok := b[p]; !ok {
			diffs = append(diffs, p+" disappeared")
		} else if e != d {
			diffs = append(diffs, fmt.Sprintf("%s: %q, then %q", p, d, e))
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			diffs = append(diffs, p+" appeared")
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 3 {
		diffs = append(diffs[:3], fmt.Sprintf("and %d more", len(diffs)-3))
	}
	s := ""
	for i, d := range diffs {
		if i > 0 {
			s += "; "
		}
		s += d
	}
	return s
}
