package tests

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The public API is a checked-in listing, as the Go project's api/
// directory is: every exported name of the library's public packages
// (functions and methods with their signatures, types with their exported
// fields and methods, constants, variables) in api/tulip.txt. A change to
// any of them fails this test until the listing is updated on purpose,
// with the change in CHANGELOG.md:
//
//	TULIP_UPDATE_API=1 go test ./tests -run TestAPIListing
//
// A removal is marked Deprecated for a round first (docs/migrating.md).
func TestAPIListing(t *testing.T) {
	list := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Dir}}", "./...")
	list.Dir = ".."
	out, err := list.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, dir, _ := strings.Cut(l, " ")
		if strings.Contains(pkg, "/internal/") {
			continue
		}
		lines = append(lines, apiOf(t, pkg, dir)...)
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("..", "api", "tulip.txt")
	if os.Getenv("TULIP_UPDATE_API") == "1" {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		t.Logf("wrote %s: %d lines", path, len(lines))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "api/tulip.txt: write it with TULIP_UPDATE_API=1 go test ./tests -run TestAPIListing")
	wantLines := strings.Split(strings.TrimSpace(string(want)), "\n")
	for _, l := range wantLines {
		if !slices.Contains(lines, l) {
			t.Errorf("gone from the API: %s (deprecate it for a round first; then update api/tulip.txt and CHANGELOG.md)", l)
		}
	}
	for _, l := range lines {
		if !slices.Contains(wantLines, l) {
			t.Errorf("new or changed in the API: %s (update api/tulip.txt with TULIP_UPDATE_API=1, and CHANGELOG.md)", l)
		}
	}
	assert.Greater(t, len(lines), 100, "sanity: the listing is real")
}

// apiOf lists a package's exported API, one line a name.
func apiOf(t *testing.T, pkg, dir string) []string {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	src := func(n ast.Node) string {
		var b bytes.Buffer
		_ = printer.Fprint(&b, fset, n)
		return strings.Join(strings.Fields(b.String()), " ")
	}
	var out []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					recv := ""
					if d.Recv != nil {
						typ := d.Recv.List[0].Type
						if st, ok := typ.(*ast.StarExpr); ok {
							typ = st.X
						}
						if id, ok := typ.(*ast.Ident); ok && !id.IsExported() {
							continue
						}
						recv = "(" + src(d.Recv.List[0].Type) + ") "
					}
					out = append(out, pkg+", method "+recv+d.Name.Name+strings.TrimPrefix(src(d.Type), "func"))
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							switch typ := s.Type.(type) {
							case *ast.StructType:
								out = append(out, pkg+", type "+s.Name.Name+" struct")
								for _, fld := range typ.Fields.List {
									for _, n := range fld.Names {
										if n.IsExported() {
											out = append(out, pkg+", type "+s.Name.Name+" struct, "+n.Name+" "+src(fld.Type))
										}
									}
								}
							case *ast.InterfaceType:
								out = append(out, pkg+", type "+s.Name.Name+" interface")
								for _, m := range typ.Methods.List {
									for _, n := range m.Names {
										out = append(out, pkg+", type "+s.Name.Name+" interface, "+n.Name+strings.TrimPrefix(src(m.Type), "func"))
									}
								}
							default:
								eq := " "
								if s.Assign.IsValid() {
									eq = " = "
								}
								out = append(out, pkg+", type "+s.Name.Name+eq+src(s.Type))
							}
						case *ast.ValueSpec:
							kind := "var"
							if d.Tok == token.CONST {
								kind = "const"
							}
							for _, n := range s.Names {
								if n.IsExported() {
									out = append(out, pkg+", "+kind+" "+n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	for i, l := range out {
		out[i] = strings.Replace(l, ", method ", ", func ", 1)
	}
	return out
}
