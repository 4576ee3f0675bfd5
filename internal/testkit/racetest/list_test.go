package racetest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/conformance"
)

// Every test that sizes itself by racetest (a sample under -race) is in
// scripts/test.sh's without_race list, which runs it in full without
// -race; otherwise its full size would run nowhere. And every name in the
// list is such a test (or the mutation check), so the list stays true.
func TestEveryRaceSampledTestRunsInFullWithoutRace(t *testing.T) {
	root := conformance.ModuleRoot()
	script, err := os.ReadFile(filepath.Join(root, "scripts", "test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^without_race\+?='\|?([^']*)'`).FindAllSubmatch(script, -1) {
		for _, name := range strings.Split(string(m[1]), "|") {
			listed[name] = true
		}
	}
	if len(listed) == 0 {
		t.Fatal("scripts/test.sh has no without_race list")
	}
	sampled := map[string]string{} // test name: its file
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == filepath.Join(root, "internal", "testkit", "racetest") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "racetest" {
						sampled[fn.Name.Name] = path
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sampled) == 0 {
		t.Fatal("found no test that uses racetest")
	}
	for name, file := range sampled {
		if !listed[name] {
			t.Errorf("%s (%s) uses racetest but is not in scripts/test.sh's without_race list", name, file)
		}
	}
	for name := range listed {
		if sampled[name] == "" {
			t.Errorf("scripts/test.sh's without_race lists %s, which does not use racetest", name)
		}
	}
}
