package caches_test

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/caches"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/internal/testkit/handlertest"
	"github.com/policycheck/policycheck/loader"
)

var update = flag.Bool("update", false, "rewrite docs/caches.md's table from the Go table")

const root = "../.."

// TestTableRowsAreComplete: every row names what it keeps, its key,
// bound and invalidation, a metric or why none, and a benchmark or why
// none; names are unique.
func TestTableRowsAreComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range caches.Table {
		require.False(t, seen[c.Name], "%s is listed twice", c.Name)
		seen[c.Name] = true
		require.NotEmpty(t, c.Keeps, c.Name)
		require.NotEmpty(t, c.Key, c.Name)
		require.NotEmpty(t, c.Bound, c.Name)
		require.NotEmpty(t, c.Invalidation, c.Name)
		require.True(t, len(c.Metrics) > 0 != (c.NoMetric != ""), "%s: a metric, or why none (not both)", c.Name)
		require.True(t, len(c.Benches) > 0 != (c.NoBench != ""), "%s: a benchmark, or why none (not both)", c.Name)
		if c.Kind == caches.Shared {
			require.NotEmpty(t, c.Benches, "%s: a shared cache is kept only with a benchmark", c.Name)
			require.NotEmpty(t, c.Saves, "%s: what its benchmarks measured", c.Name)
		}
	}
}

// TestTableNamesDeclarations: each row's declaration is in its file.
func TestTableNamesDeclarations(t *testing.T) {
	for _, c := range caches.Table {
		decls := declarations(t, filepath.Join(root, c.File))
		require.True(t, decls[c.Decl], "%s: %s declares no %s", c.Name, c.File, c.Decl)
	}
}

// declarations returns the names a Go file declares: types, functions,
// methods, constants, variables and struct fields.
func declarations(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	require.NoError(t, err)
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.FuncDecl:
			names[x.Name.Name] = true
		case *ast.TypeSpec:
			names[x.Name.Name] = true
		case *ast.ValueSpec:
			for _, id := range x.Names {
				names[id.Name] = true
			}
		case *ast.Field:
			for _, id := range x.Names {
				names[id.Name] = true
			}
		}
		return true
	})
	return names
}

// TestBenchmarksExist: each benchmark a row names is a function of its
// package's tests that runs the row's workload, and the cache's name is
// one its package's test hook turns off.
func TestBenchmarksExist(t *testing.T) {
	for _, c := range caches.Table {
		for _, b := range c.Benches {
			dir := filepath.Join(root, b.Pkg)
			src := packageSources(t, dir)
			var found bool
			for path, text := range src {
				if !strings.HasSuffix(path, "_test.go") {
					continue
				}
				if strings.Contains(text, "func "+b.Func+"(b *testing.B)") {
					found = true
					require.Contains(t, text, strconv.Quote(b.Workload), "%s: %s in %s runs no workload %q", c.Name, b.Func, path, b.Workload)
				}
			}
			require.True(t, found, "%s: no %s in %s", c.Name, b.Func, dir)
			var named bool
			for _, text := range src {
				named = named || strings.Contains(text, strconv.Quote(c.Name))
			}
			require.True(t, named, "%s: package %s never names it (its WithoutCache hook)", c.Name, b.Pkg)
		}
	}
}

func packageSources(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		out[f] = string(b)
	}
	return out
}

// TestMetricsExist: every metric the table names is on the sidecar's
// /metrics once it has served a request with a registry and a run; the
// gateway's rows (files under gateway/) name the gateway's own metrics,
// which gateway's TestCachesTableMetrics checks on its /metrics.
func TestMetricsExist(t *testing.T) {
	o := gen.Default(10)
	reg, err := loader.ParseRegistry("gen", gen.Registry(7, o))
	require.NoError(t, err)
	h := handlertest.Handler(t, reg)
	hist := "[" + string(gen.Messages(7, o)[0]) + "]"
	for path, body := range map[string]string{
		"/v1/decide":        `{"registry":` + string(gen.Registry(7, o)) + `,"history":` + hist + `}`,
		"/v1/runs/r/decide": `{"offset":0,"messages":` + hist + `}`,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		require.Equal(t, http.StatusOK, rec.Code, "%s: %s", path, rec.Body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	page, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	for _, c := range caches.Table {
		if strings.HasPrefix(c.File, "gateway/") {
			continue
		}
		for _, m := range c.Metrics {
			require.Contains(t, string(page), "\n# TYPE "+m+" ", "%s: /metrics has no %s", c.Name, m)
		}
	}
}

// TestEveryLRUIsListed: each production file that makes an internal/ground/lru
// cache (lru.New, lru.NewSized), or keeps a list of its own, is the file of as many shared or
// state rows: a cache added without a row fails here.
func TestEveryLRUIsListed(t *testing.T) {
	rows := map[string]int{}
	for _, c := range caches.Table {
		if c.Kind == caches.Shared || c.Kind == caches.State {
			rows[c.File]++
		}
	}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "internal/ground/lru/") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(b)
		n := strings.Count(text, "lru.New[") + strings.Count(text, "lru.NewSized(") + strings.Count(text, "lru.NewSized[")
		if strings.Contains(text, `"container/list"`) || strings.Contains(text, "sync.Pool") {
			n = max(n, 1)
		}
		require.LessOrEqual(t, n, rows[rel], "%s makes %d caches (lru.New, lru.NewSized, container/list, sync.Pool) and the table lists %d: add its row to internal/caches", rel, n, rows[rel])
		return nil
	})
	require.NoError(t, err)
}

// TestDocIsTheTable: docs/caches.md holds the table as Markdown renders
// it (go test ./internal/caches -run TestDocIsTheTable -update rewrites
// it).
func TestDocIsTheTable(t *testing.T) {
	path := filepath.Join(root, "docs", "caches.md")
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	got, err := caches.Splice(string(doc))
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	require.Equal(t, got, string(doc), "docs/caches.md drifted from internal/caches: run go test ./internal/caches -run TestDocIsTheTable -update")
}
