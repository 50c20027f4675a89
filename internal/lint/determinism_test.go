package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The determinism rule: the task and the operator runtimes are a
// deterministic state machine (STYLE.md, 8): they read no wall clock and
// start no goroutines, so the production driver and topologytest run them
// unchanged and a replay computes what the first run did. Time reaches
// the core from its driver (through exec.Context); goroutines
// belong to the driver.
//
// The rule flags, in the non-test files of the packages below, every use
// of a package-level function of "time" that reads the wall clock or
// waits on it (called or taken as a value, under whatever name the file
// imports "time" as), a dot import of "time" (which would hide them), and
// every go statement. A local variable named like the time import is
// flagged too; rename it. A finding is ignored on a line with, or after,
// the comment "lint:ignore determinism" followed by a reason.

// deterministicDirs are the packages of the deterministic core, relative
// to the module's root.
var deterministicDirs = []string{"internal/task", "internal/exec", "window", "topology", "internal/ops", "internal/layout"}

// wallClock are the functions of package time that read or wait on the
// wall clock.
var wallClock = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true,
	"After": true, "Tick": true, "NewTimer": true, "NewTicker": true, "AfterFunc": true,
}

const determinismOptOut = "lint:ignore determinism"

// findNondeterminism returns the findings of the rule in one parsed file.
func findNondeterminism(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ignored := map[int]bool{}
	for _, g := range f.Comments {
		for _, c := range g.List {
			_, reason, ok := strings.Cut(c.Text, determinismOptOut)
			if ok && strings.TrimSpace(reason) != "" {
				ignored[fset.Position(c.Pos()).Line] = true
			}
		}
	}
	report := func(pos token.Pos, format string, args ...any) {
		p := fset.Position(pos)
		if ignored[p.Line] || ignored[p.Line-1] {
			return
		}
		out = append(out, fmt.Sprintf("%s: %s", p, fmt.Sprintf(format, args...)))
	}

	// The names "time" is imported under in this file.
	names := map[string]bool{}
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil || path != "time" {
			continue
		}
		switch {
		case imp.Name == nil:
			names["time"] = true
		case imp.Name.Name == ".":
			report(imp.Pos(), `dot import of "time": it hides the wall-clock reads this rule looks for; import it by name`)
		case imp.Name.Name != "_":
			names[imp.Name.Name] = true
		}
	}

	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n.Pos(), "go statement in the deterministic core: goroutines belong to the driver")
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && names[id.Name] && wallClock[n.Sel.Name] {
				report(n.Pos(), "%s.%s in the deterministic core: take the time the driver passes in (exec.Context)", id.Name, n.Sel.Name)
			}
		}
		return true
	})
	return out
}

// TestDeterministicCore applies the determinism rule to the non-test Go
// files of the deterministic core.
func TestDeterministicCore(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	for _, dir := range deterministicDirs {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		files := 0
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			path := filepath.Join(root, dir, name)
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files++
			for _, finding := range findNondeterminism(fset, f) {
				if rel, err := filepath.Rel(root, finding); err == nil && !strings.HasPrefix(rel, "..") {
					finding = rel
				}
				t.Error(finding)
			}
		}
		if files == 0 {
			t.Errorf("lint: no non-test Go files in %s", dir)
		}
	}
}

// TestDeterminismRuleCatches is the rule's negative control: snippets that
// read the clock or start a goroutine are flagged, their deterministic
// forms are not.
func TestDeterminismRuleCatches(t *testing.T) {
	cases := []struct {
		name string
		src  string
		bad  bool
	}{
		{"time.Now", `import "time"
		func f() int64 { return time.Now().UnixMilli() }`, true},
		{"time.Since", `import "time"
		func f(t0 time.Time) time.Duration { return time.Since(t0) }`, true},
		{"time.Until", `import "time"
		func f(t0 time.Time) time.Duration { return time.Until(t0) }`, true},
		{"time.Sleep", `import "time"
		func f() { time.Sleep(time.Millisecond) }`, true},
		{"time.After in a select", `import "time"
		func f(c chan int) {
			select {
			case <-c:
			case <-time.After(time.Second):
			}
		}`, true},
		{"time.Tick", `import "time"
		func f() { for range time.Tick(time.Second) {} }`, true},
		{"time.NewTimer", `import "time"
		func f() *time.Timer { return time.NewTimer(time.Second) }`, true},
		{"time.NewTicker", `import "time"
		func f() *time.Ticker { return time.NewTicker(time.Second) }`, true},
		{"time.AfterFunc", `import "time"
		func f(g func()) { time.AfterFunc(time.Second, g) }`, true},
		{"time.Now as a value", `import "time"
		type P struct{ now func() time.Time }
		func f() P { return P{now: time.Now} }`, true},
		{"an aliased import", `import stdtime "time"
		func f() int64 { return stdtime.Now().UnixMilli() }`, true},
		{"a dot import", `import . "time"
		func f() int64 { return Now().UnixMilli() }`, true},
		{"a go statement", `func f(c chan int) { go func() { c <- 1 }() }`, true},
		{"a go statement on a method", `func f(p *P) { go p.run() }`, true},
		{"in a closure", `import "time"
		var f = func() int64 { return time.Now().UnixMilli() }`, true},
		{"an opt-out without a reason", `import "time"
		func f() int64 { return time.Now().UnixMilli() } // lint:ignore determinism`, true},
		{"an opt-out for another rule", `import "time"
		func f() int64 { return time.Now().UnixMilli() } // lint:ignore appendalias not this one`, true},

		{"ignored with a reason", `import "time"
		func f() int64 { return time.Now().UnixMilli() } // lint:ignore determinism a test hook`, false},
		{"ignored on the line before", `func f(c chan int) {
			// lint:ignore determinism the driver's own loop
			go func() { c <- 1 }()
		}`, false},
		{"durations and types", `import "time"
		func f(d time.Duration, t time.Time) time.Time { return t.Add(d + time.Second) }`, false},
		{"time from millis", `import "time"
		func f(ms int64) time.Time { return time.UnixMilli(ms) }`, false},
		{"a method named Now", `func f(c Clock) int64 { return c.Now() }`, false},
		{"Now on another package", `import "github.com/x/clock"
		func f() int64 { return clock.Now() }`, false},
		{"time shadowed by an alias", `import (
			t0 "time"
			time "github.com/x/clock"
		)
		func f() (int64, t0.Duration) { return time.Now(), t0.Second }`, false},
		{"no time import", `func f(time T) int64 { return time.Now() }`, false},
		{"a field named like a wall-clock function", `import "time"
		func f(p P) time.Duration { return p.Since }`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "snippet.go", "package p\n"+c.src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			got := findNondeterminism(fset, f)
			if (len(got) > 0) != c.bad {
				t.Fatalf("findings %q, want any: %v", got, c.bad)
			}
		})
	}
}
