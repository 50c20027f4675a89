package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The append-alias rule: append(x, ...) may write into x's backing array
// when x has spare capacity, so two appends to one x whose results are both
// kept can share bytes, the second overwriting the first. The stream-stream
// join built both bounds of its range scan so, and for keys whose prefix
// had 8 bytes spare the range was [x, x): empty (issue 15, defect 1).
//
// The rule flags, in one function, an append-like call on a variable x
// (builtin append, or a function named append*/Append* taking x first)
// whose result is kept anywhere but x itself, when another append-like
// call on x follows it, or when it sits in a loop that does not set x
// (the next iteration appends to x again). It does not flag x built by
// slices.Clip or a full slice expression a[i:j:k], whose appends always
// copy. Appends to x[...] are not tracked: reusing a scratch buffer with
// x[:0] is the one deliberate form.

// appendAt says which argument of an append-like function is the slice
// appended to, where it is not the first.
var appendAt = map[string]int{"AppendEncode": 1}

// targetOf returns the variable call appends to, if it is an
// append-like call on a variable (or a field, written x.f).
func targetOf(call *ast.CallExpr) (string, bool) {
	var name string
	switch f := call.Fun.(type) {
	case *ast.Ident:
		name = f.Name
	case *ast.SelectorExpr:
		name = f.Sel.Name
	case *ast.IndexExpr: // a generic function with explicit type arguments
		if id, ok := f.X.(*ast.Ident); ok {
			name = id.Name
		}
	}
	if !strings.HasPrefix(name, "append") && !strings.HasPrefix(name, "Append") {
		return "", false
	}
	i := appendAt[name]
	if i >= len(call.Args) {
		return "", false
	}
	if inner, ok := call.Args[i].(*ast.CallExpr); ok {
		return targetOf(inner) // a chain: append(append(x, a), b) appends to x
	}
	return exprName(call.Args[i])
}

// chained reports whether call appends to the result of another
// append-like call, which is then part of one chain with it.
func chained(call *ast.CallExpr) bool {
	if _, ok := targetOf(call); !ok {
		return false
	}
	name := ""
	switch f := call.Fun.(type) {
	case *ast.Ident:
		name = f.Name
	case *ast.SelectorExpr:
		name = f.Sel.Name
	}
	i := appendAt[name]
	inner, ok := call.Args[i].(*ast.CallExpr)
	if !ok {
		return false
	}
	_, ok = targetOf(inner)
	return ok
}

// exprName names an identifier or a chain of field selections.
func exprName(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name, e.Name != "nil" && e.Name != "_"
	case *ast.SelectorExpr:
		x, ok := exprName(e.X)
		return x + "." + e.Sel.Name, ok
	case *ast.ParenExpr:
		return exprName(e.X)
	}
	return "", false
}

// appendSite is one append-like call in a function.
type appendSite struct {
	pos    token.Pos
	target string
	self   bool     // its result is assigned to its target
	loop   ast.Node // the innermost loop around it in the function, or nil
	ret    ast.Node // the return statement it is in, or nil
}

// funcAppends collects the append-like calls in body (not in function
// literals, which are checked on their own), the variables clipped, and
// the variables each loop sets.
type funcAppends struct {
	sites   []appendSite
	clipped map[string]bool
	sets    map[ast.Node]map[string]bool // loop → variables assigned in it
	loops   []ast.Node
}

func collect(body *ast.BlockStmt) *funcAppends {
	fa := &funcAppends{clipped: map[string]bool{}, sets: map[ast.Node]map[string]bool{}}
	selfCalls := map[*ast.CallExpr]bool{}
	inChain := map[*ast.CallExpr]bool{} // the inner calls of chains
	var ret ast.Node
	var walk func(n ast.Node) bool
	walk = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			ret = n
			for _, e := range n.Results {
				ast.Inspect(e, walk)
			}
			ret = nil
			return false
		case *ast.ForStmt, *ast.RangeStmt:
			fa.sets[n] = map[string]bool{}
			fa.loops = append(fa.loops, n)
			if r, ok := n.(*ast.RangeStmt); ok {
				for _, e := range []ast.Expr{r.Key, r.Value} {
					if name, ok := exprName(e); ok && e != nil {
						fa.sets[n][name] = true
					}
				}
			}
			// The init statement and the ranged expression run once,
			// before the loop; the rest runs per iteration.
			fa.loops = fa.loops[:len(fa.loops)-1]
			var per []ast.Node
			switch l := n.(type) {
			case *ast.ForStmt:
				if l.Init != nil {
					ast.Inspect(l.Init, walk)
				}
				per = []ast.Node{l.Cond, l.Post, l.Body}
			case *ast.RangeStmt:
				ast.Inspect(l.X, walk)
				per = []ast.Node{l.Body}
			}
			fa.loops = append(fa.loops, n)
			for _, p := range per {
				if p != nil && !isNilNode(p) {
					ast.Inspect(p, walk)
				}
			}
			fa.loops = fa.loops[:len(fa.loops)-1]
			return false
		case *ast.AssignStmt:
			// x, ok = appendX(x, ...): a function with more results
			// gives its slice first, so this assigns the append back.
			if len(n.Rhs) == 1 && len(n.Lhs) > 1 {
				if call, ok := n.Rhs[0].(*ast.CallExpr); ok {
					if t, ok := targetOf(call); ok {
						if name, ok := exprName(n.Lhs[0]); ok && t == name {
							selfCalls[call] = true
						}
					}
				}
			}
			for i, lhs := range n.Lhs {
				name, ok := exprName(lhs)
				if !ok {
					continue
				}
				for _, l := range fa.loops {
					fa.sets[l][name] = true
				}
				if len(n.Rhs) != len(n.Lhs) {
					continue
				}
				if isClip(n.Rhs[i]) {
					fa.clipped[name] = true
				}
				if call, ok := n.Rhs[i].(*ast.CallExpr); ok {
					if t, ok := targetOf(call); ok && t == name {
						selfCalls[call] = true
					}
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				for _, l := range fa.loops {
					fa.sets[l][id.Name] = true
				}
				if i < len(n.Values) && isClip(n.Values[i]) {
					fa.clipped[id.Name] = true
				}
			}
		case *ast.CallExpr:
			if chained(n) {
				// Only the outermost call of a chain is a site: the inner
				// results are consumed by the chain.
				for c := n; chained(c); {
					c = chainInner(c)
					inChain[c] = true
				}
			}
			if t, ok := targetOf(n); ok && !inChain[n] {
				var loop ast.Node
				if len(fa.loops) > 0 {
					loop = fa.loops[len(fa.loops)-1]
				}
				fa.sites = append(fa.sites, appendSite{pos: n.Pos(), target: t, self: selfCalls[n], loop: loop, ret: ret})
			}
		}
		return true
	}
	ast.Inspect(body, walk)
	return fa
}

// chainInner returns the append-like call that a chained call appends to.
func chainInner(call *ast.CallExpr) *ast.CallExpr {
	name := ""
	switch f := call.Fun.(type) {
	case *ast.Ident:
		name = f.Name
	case *ast.SelectorExpr:
		name = f.Sel.Name
	}
	return call.Args[appendAt[name]].(*ast.CallExpr)
}

// isNilNode reports whether n is a typed nil (an absent statement or
// expression of a for loop).
func isNilNode(n ast.Node) bool {
	switch n := n.(type) {
	case ast.Expr:
		return n == nil
	case *ast.BlockStmt:
		return n == nil
	case ast.Stmt:
		return n == nil
	}
	return false
}

// isClip reports whether e is slices.Clip(...) or a full slice expression.
func isClip(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.SliceExpr:
		return e.Slice3
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "slices" && sel.Sel.Name == "Clip" {
				return true
			}
		}
	}
	return false
}

// findAppendAliases returns the findings of the rule in one parsed file.
func findAppendAliases(fset *token.FileSet, f *ast.File) []string {
	var out []string
	// A finding is ignored on a line with, or after, the comment
	// "lint:ignore appendalias" and a reason.
	ignored := map[int]bool{}
	for _, g := range f.Comments {
		for _, c := range g.List {
			if strings.Contains(c.Text, "lint:ignore appendalias") {
				ignored[fset.Position(c.Pos()).Line] = true
			}
		}
	}
	check := func(body *ast.BlockStmt) {
		if body == nil {
			return
		}
		fa := collect(body)
		for i, s := range fa.sites {
			if s.self || fa.clipped[s.target] {
				continue
			}
			why := ""
			for _, later := range fa.sites[i+1:] {
				// Past a return only its own other results run after
				// it (a loop around it is the loop rule's).
				if later.target == s.target && (s.ret == nil || later.ret == s.ret) {
					why = fmt.Sprintf("appended to again at line %d", fset.Position(later.pos).Line)
					break
				}
			}
			if why == "" && s.loop != nil && !fa.sets[s.loop][s.target] {
				why = "appended to again by the next iteration of its loop"
			}
			if line := fset.Position(s.pos).Line; why != "" && !ignored[line] && !ignored[line-1] {
				out = append(out, fmt.Sprintf("%s: the result of an append to %s is kept, and %s is %s: clip it (slices.Clip) or build each result in its own buffer",
					fset.Position(s.pos), s.target, s.target, why))
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			check(n.Body)
		case *ast.FuncLit:
			check(n.Body)
		}
		return true
	})
	return out
}

// repoRoot finds the module's root from the test's directory.
func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		dir = filepath.Dir(dir)
	}
	t.Fatal("lint: no go.mod above the test's directory")
	return ""
}

// TestNoAppendAliases applies the append-alias rule to every Go file of
// the repository, tests included.
func TestNoAppendAliases(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		files++
		for _, finding := range findAppendAliases(fset, f) {
			rel, _ := filepath.Rel(root, finding)
			if rel == "" || strings.HasPrefix(rel, "..") {
				rel = finding
			}
			t.Error(rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("lint: only %d Go files under %s", files, root)
	}
}

// TestAppendAliasRuleCatches is the rule's negative control: snippets that
// alias are flagged, their fixed forms are not.
func TestAppendAliasRuleCatches(t *testing.T) {
	cases := []struct {
		name string
		src  string
		bad  bool
	}{
		{"two bounds from one prefix", `func f(pre []byte) ([]byte, []byte) {
			return appendTime(pre, 1), appendTime(pre, 2)
		}`, true},
		{"range bounds as arguments", `func f(s S, kb []byte) {
			pre := keyPrefix(kb)
			s.Range(appendTime(pre, 1), appendTime(pre, 2), nil)
		}`, true},
		{"kept then self-appended", `func f(b []byte) [][]byte {
			k := append(b, 1)
			b = append(b, 2)
			return [][]byte{k, b}
		}`, true},
		{"encoding helper", `func f(b []byte) ([]byte, []byte) {
			x := binary.BigEndian.AppendUint64(b, 1)
			y := binary.BigEndian.AppendUint64(b, 2)
			return x, y
		}`, true},
		{"in a loop", `func f(pre []byte, ks [][]byte) (out [][]byte) {
			for _, k := range ks {
				out = append(out, append(pre, k...))
			}
			return out
		}`, true},
		{"in a closure", `func f(pre []byte) func() ([]byte, []byte) {
			return func() ([]byte, []byte) { return append(pre, 1), append(pre, 2) }
		}`, true},
		{"a field", `func (p *P) f() ([]byte, []byte) { return append(p.pre, 1), append(p.pre, 2) }`, true},
		{"kept in one branch, appended in a later one", `func f(b []byte, c bool) ([]byte, []byte) {
			k := append(b, 1)
			if c {
				return k, append(b, 2)
			}
			return k, nil
		}`, true},
		{"a second result, the slice kept elsewhere", `func f(b []byte) ([]byte, []byte) {
			k, ok := appendQuoted(b, "x")
			if !ok {
				return nil, nil
			}
			return k, append(b, 2)
		}`, true},
		{"a second result, the slice in the other place", `func f(b []byte) ([]byte, []byte) {
			ok, k := appendQuoted(b, "x")
			_ = ok
			return k, append(b, 2)
		}`, true},
		{"a chain kept twice", `func f(b []byte) ([]byte, []byte) {
			return append(append(b, 1), 2), append(append(b, 3), 4)
		}`, true},
		{"ignored with a reason", `func f(pre []byte) ([]byte, []byte) {
			return appendTime(pre, 1), appendTime(pre, 2) // lint:ignore appendalias the old bug, kept for a test
		}`, false},
		{"one return per branch", `func f(b []byte, c bool) []byte {
			if c {
				return append(b, 0)
			}
			return append(append(b, 1), 2)
		}`, false},
		{"a chain assigned back", `func f(b []byte) []byte {
			b = binary.AppendUvarint(append(b, 'r'), 3)
			return append(b, 4)
		}`, false},
		{"ranging over an append", `func f(in []string) {
			for _, s := range append(in, "end") {
				_ = s
			}
		}`, false},
		{"clipped", `func f(kb []byte) ([]byte, []byte) {
			pre := slices.Clip(keyPrefix(kb))
			return appendTime(pre, 1), appendTime(pre, 2)
		}`, false},
		{"full slice expression", `func f(b []byte) ([]byte, []byte) {
			pre := b[:4:4]
			return append(pre, 1), append(pre, 2)
		}`, false},
		{"clipped at each call", `func f(pre []byte) ([]byte, []byte) {
			return appendTime(slices.Clip(pre), 1), appendTime(slices.Clip(pre), 2)
		}`, false},
		{"a second result, the slice assigned back", `func f(b []byte) ([]byte, bool) {
			var ok bool
			if b, ok = appendQuoted(b, "x"); !ok {
				return b, false
			}
			return append(b, '}'), true
		}`, false},
		{"building one slice", `func f(b []byte) []byte {
			b = append(b, 1)
			b = binary.AppendUvarint(b, 2)
			return append(b, 3)
		}`, false},
		{"a fresh prefix per iteration", `func f(ks [][]byte) (out [][]byte) {
			for _, k := range ks {
				pre := keyPrefix(k)
				out = append(out, append(pre, k...))
			}
			return out
		}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "snippet.go", "package p\n"+c.src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			got := findAppendAliases(fset, f)
			if (len(got) > 0) != c.bad {
				t.Fatalf("findings %q, want any: %v", got, c.bad)
			}
		})
	}
}
