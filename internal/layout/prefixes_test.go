package layout

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// prefixErrors checks a table of prefixes: within one store kind no two
// entries share a byte, each entry's key is drawn beginning with its byte,
// and every kind that can be a time store holds the time state exactly once.
func prefixErrors(table []Prefix) []string {
	var bad []string
	seen := map[StoreKind]map[byte]string{}
	for _, p := range table {
		if seen[p.Kind] == nil {
			seen[p.Kind] = map[byte]string{}
		}
		if other, ok := seen[p.Kind][p.Byte]; ok {
			bad = append(bad, fmt.Sprintf("%s: %q begins both %q and %q", p.Kind, p.Byte, other, p.Key))
		}
		seen[p.Kind][p.Byte] = p.Key
		if !strings.HasPrefix(p.Key, string(p.Byte)) {
			bad = append(bad, fmt.Sprintf("%s: key %q is drawn without its byte %q", p.Kind, p.Key, p.Byte))
		}
	}
	for _, k := range TimeStateKinds {
		if seen[k][TimeStateKey[0]] != "T" {
			bad = append(bad, fmt.Sprintf("%s: can be a time store but has no entry for the time state", k))
		}
	}
	return bad
}

func TestPrefixesTable(t *testing.T) {
	if bad := prefixErrors(Prefixes); len(bad) > 0 {
		t.Fatal(strings.Join(bad, "\n"))
	}
	if len(TimeStateKey) != 1 {
		t.Fatalf("the time state key %q is not one byte: the table cannot show it", TimeStateKey)
	}
}

// TestPrefixesCheckCatches is the negative control: a window store whose
// element entries took the fire index's byte, a key drawn with the wrong
// byte, and a time store kind without the time state all fail the check.
func TestPrefixesCheckCatches(t *testing.T) {
	clash := append(slices.Clone(Prefixes), Prefix{KindWindow, WindowFire, "f <d-suffix> seq", "an element"})
	if bad := prefixErrors(clash); len(bad) != 1 || !strings.Contains(bad[0], "begins both") {
		t.Fatalf("a shared prefix byte: %q", bad)
	}
	drawn := slices.Clone(Prefixes)
	drawn[0].Key = "w uvarint(len(key)) key start"
	if bad := prefixErrors(drawn); len(bad) != 1 || !strings.Contains(bad[0], "drawn without") {
		t.Fatalf("a key drawn with the wrong byte: %q", bad)
	}
	var noTime []Prefix
	for _, p := range Prefixes {
		if p.Kind != KindJoin || p.Byte != TimeStateKey[0] {
			noTime = append(noTime, p)
		}
	}
	if bad := prefixErrors(noTime); len(bad) != 1 || !strings.Contains(bad[0], "no entry for the time state") {
		t.Fatalf("a time store kind without the time state: %q", bad)
	}
}

// designRow is how DESIGN.md's table of store layouts shows p.
func designRow(p Prefix) string {
	b := "—"
	if p.Key != "" && p.Byte != 0 {
		b = "`" + string(p.Byte) + "`"
	}
	return fmt.Sprintf("| %s | %s | `%s` | %s |", p.Kind, b, p.Key, p.Value)
}

// TestDesignShowsThePrefixes keeps DESIGN.md's table of store layouts equal
// to Prefixes and Unprefixed, row for row, in order.
func TestDesignShowsThePrefixes(t *testing.T) {
	b, err := os.ReadFile("../../DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range append(slices.Clone(Prefixes), Unprefixed...) {
		want = append(want, designRow(p))
	}
	var got []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, k := range []StoreKind{KindKV, KindWindow, KindSliding, KindJoin, KindState, KindTimers, KindSubscriptions, KindTime} {
			if strings.HasPrefix(line, "| "+string(k)+" | ") {
				got = append(got, line)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("DESIGN.md's table of store layouts differs from layout.Prefixes; it should read:\n%s\n\nit reads:\n%s",
			strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}
