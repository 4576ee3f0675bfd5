package engine

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/policies"
)

// TestLibFlowReaders: every function of the shipped library whose body
// names a field flows (call.flows, object.get(call, "flows", ...)) is in libFlowReaders, so that handing it
// input.call counts as reading input.call.flows (reads.go), and every
// name listed is such a function.
func TestLibFlowReaders(t *testing.T) {
	readers := map[string]bool{}
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
			found := false
			ast.WalkTerms(r.Body, func(t *ast.Term) bool {
				if s, ok := t.Value.(ast.String); ok && s == "flows" {
					found = true
				}
				return found
			})
			ast.WalkTerms(r.Head.Value, func(t *ast.Term) bool {
				if s, ok := t.Value.(ast.String); ok && s == "flows" {
					found = true
				}
				return found
			})
			if found {
				readers[r.Head.Ref().String()] = true
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, readers, libFlowReaders)
}
