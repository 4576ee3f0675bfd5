package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
)

// exported returns the exported top-level names of the Go package in dir.
func exported(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						names[spec.Name.Name] = spec.Name.IsExported()
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							names[n.Name] = n.IsExported()
						}
					}
				}
			}
		}
	}
	return names
}

// The embedding snippet (docs/embedding.md, once the README's) uses the API as it is, and checks the
// fail-closed signal of both decisions it makes (a decision that fails
// closed comes back with a nil error), and the runnable example it names
// exists.
func TestReadmeEmbeddingSnippet(t *testing.T) {
	blocks := codeBlocks(t, "embedding.md", "go")
	require.Len(t, blocks, 1, "docs/embedding.md's Go blocks")
	snippet := blocks[0]
	pkgs := map[string]map[string]bool{"engine": exported(t, "../engine"), "loader": exported(t, "../loader")}
	for _, m := range regexp.MustCompile(`\b(engine|loader)\.([A-Za-z_]\w*)`).FindAllStringSubmatch(snippet, -1) {
		assert.True(t, pkgs[m[1]][m[2]], "docs/embedding.md's snippet uses %s.%s, which the package does not export", m[1], m[2])
	}
	var _ func(*engine.Decision) bool = (*engine.Decision).FailedClosed
	assert.Contains(t, snippet, "if d.FailedClosed() {", "the stateless decision's fail-closed check")
	assert.Contains(t, snippet, "if sd.FailedClosed() {", "the run step's fail-closed check")

	readme, err := os.ReadFile("embedding.md")
	require.NoError(t, err)
	examples, err := os.ReadFile("../engine/example_test.go")
	require.NoError(t, err)
	for _, m := range regexp.MustCompile("`(Example\\w+)`").FindAllStringSubmatch(string(readme), -1) {
		assert.Contains(t, string(examples), "func "+m[1]+"()", "docs/embedding.md names the runnable example %s", m[1])
	}
}
