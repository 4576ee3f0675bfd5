package engine

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/policies"
)

// TestLibFlowReaders: for each field of a call the engine builds on
// demand (libCallReaders: flows, window, args_integrity), every function
// of the shipped library whose body names the field (call.flows,
// object.get(call, "flows", ...)) is in its list, so that handing it
// input.call counts as reading that field (reads.go), and every name
// listed is such a function. A function that calls one that names the
// field (its package's helpers included) reads it too.
func TestLibFlowReaders(t *testing.T) {
	readers := map[string]map[string]bool{}
	for field := range libCallReaders {
		readers[field] = map[string]bool{}
	}
	calls := map[string]map[string]bool{} // function -> the package's functions it calls
	err := fs.WalkDir(policies.FS(), "lib", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rego") || strings.HasSuffix(path, "_test.rego") {
			return err
		}
		src, err := fs.ReadFile(policies.FS(), path)
		if err != nil {
			return err
		}
		m, err := ast.ParseModuleWithOpts(path, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return err
		}
		for _, r := range m.Rules {
			if len(r.Head.Args) == 0 {
				continue
			}
			name := r.Head.Ref().String()
			if calls[name] == nil {
				calls[name] = map[string]bool{}
			}
			for rule := r; rule != nil; rule = rule.Else {
				ast.WalkRefs(rule, func(ref ast.Ref) bool {
					if v, ok := ref[0].Value.(ast.Var); ok && len(ref) == 1 {
						calls[name][string(v)] = true
					}
					return false
				})
			}
			for field := range libCallReaders {
				names := func(t *ast.Term) bool {
					s, ok := t.Value.(ast.String)
					return ok && string(s) == field
				}
				found := false
				for rule := r; rule != nil && !found; rule = rule.Else {
					ast.WalkTerms(rule, func(t *ast.Term) bool {
						found = found || names(t)
						return found
					})
				}
				if found {
					readers[field][r.Head.Ref().String()] = true
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	for field, want := range libCallReaders {
		for grew := true; grew; {
			grew = false
			for fn, callees := range calls {
				for callee := range callees {
					if readers[field][callee] && !readers[field][fn] {
						readers[field][fn], grew = true, true
					}
				}
			}
		}
		for fn := range readers[field] {
			if strings.HasPrefix(fn, "_") {
				delete(readers[field], fn)
			}
		}
		require.Equal(t, readers[field], want, field)
	}
}
