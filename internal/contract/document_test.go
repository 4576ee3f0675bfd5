package contract_test

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/format"

	"github.com/policycheck/policycheck/internal/contract"
	"github.com/policycheck/policycheck/policies"
)

// TestGeneratedFilesAreCurrent: the input tables of docs/input.md and
// the gate's list of set paths are what document.go's types generate.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := contract.Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: run go generate ./internal/contract", name)
		}
		if strings.HasSuffix(name, ".rego") {
			if formatted, err := format.Source(name, want); err != nil || string(formatted) != string(want) {
				t.Errorf("%s as generated is not opa fmt clean (%v)", name, err)
			}
		}
	}
}

// TestShippedPolicyAnswersTheResult: the shipped availability policy's
// decision_from_sets object holds exactly Result's keys, and the gate's
// verdict objects together exactly Verdict's: the policy and the type
// cannot drift apart in either direction.
func TestShippedPolicyAnswersTheResult(t *testing.T) {
	modules := map[string]*ast.Module{}
	for _, file := range []string{"availability/availability.rego", "lib/gate.rego"} {
		src, err := fs.ReadFile(policies.FS(), file)
		if err != nil {
			t.Fatal(err)
		}
		if modules[file], err = ast.ParseModule(file, string(src)); err != nil {
			t.Fatal(err)
		}
	}
	keysOf := func(file, rule string) []string {
		seen := map[string]bool{}
		for _, r := range modules[file].Rules {
			if r.Head.Name.String() != rule && r.Head.Ref().String() != rule {
				continue
			}
			for _, v := range contract.HeadValues(r) {
				obj, ok := v.Value.(ast.Object)
				if !ok {
					t.Fatalf("%s: %s yields %v, not an object", file, rule, v)
				}
				for _, k := range obj.Keys() {
					seen[string(k.Value.(ast.String))] = true
				}
			}
		}
		return slices.Sorted(maps.Keys(seen))
	}
	defined := func(prefix string) []string {
		var out []string
		for _, p := range contract.ResultPaths() {
			if rest, ok := strings.CutPrefix(p.Path, prefix); ok && !strings.ContainsAny(rest, ".[") {
				out = append(out, rest)
			}
		}
		return out
	}
	for _, c := range []struct{ file, rule, prefix string }{
		{"availability/availability.rego", "decision_from_sets", ""},
		{"lib/gate.rego", "verdict", "verdicts[]."},
	} {
		got, want := keysOf(c.file, c.rule), defined(c.prefix)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %s holds the keys %v; contract.Result defines %v", c.file, c.rule, got, want)
		}
	}
}
