package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The public-API rule: what `go doc` shows of a public package names no
// type, function or variable of an internal package. A user cannot name
// an internal type, so an option declared as func(*exec.Store) or a
// variable declared as = exec.ErrX leaves them reading code they cannot
// use, and ties the public API to the runtime's insides (issue 16).
// Public types may wrap internal ones in unexported fields.
//
// The rule reads the declarations as go doc prints them: exported
// functions and methods of exported types (receiver, type parameters,
// parameters, results; not bodies), exported types (an alias's right-hand
// side; a struct's exported and embedded fields; an interface's exported
// and embedded methods; anything else whole, anonymous interfaces
// included), and exported constants and variables (type and value). It
// flags every selector there on an import of a package whose path has an
// "internal" element, and dot imports of such packages.

// leak is one finding: the declaration that shows an internal name, and
// where.
type leak struct {
	pos  token.Position
	decl string // Name, or Type.Method
	name string // pkg.Name as written
}

func (l leak) String() string { return fmt.Sprintf("%s: %s shows %s", l.pos, l.decl, l.name) }

// isInternal reports whether an import path has an "internal" element.
func isInternal(path string) bool {
	return slices.Contains(strings.Split(path, "/"), "internal")
}

// findInternalLeaks returns the findings of the rule in one parsed file.
func findInternalLeaks(fset *token.FileSet, f *ast.File) []leak {
	var out []leak
	internal := map[string]string{} // local name -> path
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil || !isInternal(path) {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		switch name {
		case "_":
		case ".":
			out = append(out, leak{fset.Position(imp.Pos()), "import", path})
		default:
			internal[name] = path
		}
	}
	if len(internal) == 0 {
		return out
	}
	check := func(decl string, nodes ...ast.Node) {
		for _, n := range nodes {
			if n == nil {
				continue
			}
			ast.Inspect(n, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && internal[x.Name] != "" {
					out = append(out, leak{fset.Position(sel.Pos()), decl, x.Name + "." + sel.Sel.Name})
				}
				return true
			})
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				base := receiverBase(d.Recv.List[0].Type)
				if !ast.IsExported(base) {
					continue
				}
				name = base + "." + name
				check(name, d.Recv)
			}
			check(name, d.Type)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if s.TypeParams != nil {
						check(s.Name.Name, s.TypeParams)
					}
					check(s.Name.Name, shownType(s.Type)...)
				case *ast.ValueSpec:
					if !slices.ContainsFunc(s.Names, (*ast.Ident).IsExported) {
						continue
					}
					check(s.Names[0].Name, s.Type)
					for _, v := range s.Values {
						check(s.Names[0].Name, v)
					}
				}
			}
		}
	}
	return out
}

// receiverBase is the name of a receiver's type: T of T, *T, T[K], *T[K].
func receiverBase(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// shownType is what go doc shows of a declared type: of a struct its
// exported and embedded fields, of an interface its exported and embedded
// methods, of anything else all of it.
func shownType(e ast.Expr) []ast.Node {
	var list *ast.FieldList
	switch t := e.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return []ast.Node{e}
	}
	var out []ast.Node
	for _, f := range list.List {
		if len(f.Names) == 0 || slices.ContainsFunc(f.Names, (*ast.Ident).IsExported) {
			out = append(out, f.Type)
		}
	}
	return out
}

// publicPackages lists the directories (relative to the module's root) of
// the packages users import: all but internal/, cmd/, integration/ and
// testdata.
func publicPackages(t *testing.T, root string) []string {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" ||
				rel == "internal" || rel == "cmd" || rel == "integration") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			if dir := filepath.Dir(rel); !slices.Contains(dirs, dir) {
				dirs = append(dirs, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// leaksIn applies the rule to the non-test files of the package in dir.
func leaksIn(t *testing.T, dir string) []leak {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []leak
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, findInternalLeaks(fset, f)...)
	}
	return out
}

// TestPublicAPIHidesInternalTypes applies the public-API rule to every
// public package of the module.
func TestPublicAPIHidesInternalTypes(t *testing.T) {
	root := repoRoot(t)
	dirs := publicPackages(t, root)
	for _, want := range []string{"topology", "processor", "topologytest"} {
		if !slices.Contains(dirs, want) {
			t.Fatalf("lint: public package %s not found among %v", want, dirs)
		}
	}
	for _, dir := range dirs {
		for _, l := range leaksIn(t, filepath.Join(root, dir)) {
			if rel, err := filepath.Rel(root, l.pos.Filename); err == nil {
				l.pos.Filename = rel
			}
			t.Error(l)
		}
	}
}

// TestPublicAPIRuleCatches is the rule's negative control: the package in
// testdata/leak shows internal names in every way go doc can show them,
// and hides them in the ways go doc hides them.
func TestPublicAPIRuleCatches(t *testing.T) {
	var got []string
	for _, l := range leaksIn(t, filepath.Join("testdata", "leak")) {
		got = append(got, l.decl+" "+l.name)
	}
	slices.Sort(got)
	want := []string{
		"Alias exec.Header",
		"Class ex.ErrorClass",
		"Config exec.Store",
		"Context exec.Context",
		"ErrX exec.ErrInvalidTimestamp",
		"Generic exec.Node",
		"Handle exec.ErrorHandler",
		"Option exec.Store",
		"Opts exec.Node",
		"Run exec.Plan",
		"T.Plan exec.Plan",
		"Wrapper exec.Store",
		"import github.com/sluice-streams/sluice/internal/layout",
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
