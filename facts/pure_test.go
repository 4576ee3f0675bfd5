package facts_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFactsIsPure holds facts/doc.go's promise (issue 44, item 3): the
// package is a model in pure Go. It imports no encoding/json, and reaches
// no JSON Schema library, no golang.org/x/text and no OPA even
// indirectly (the registry's schemas are compiled by package loader and
// held through facts.Schema); the one package under it that reads JSON
// bytes with encoding/json (a call's numbers as json.Number, the flow
// walk's fallback) is facts/internal/jsonvalue.
func TestFactsIsPure(t *testing.T) {
	list := func(args ...string) []string {
		cmd := exec.Command("go", append([]string{"list"}, args...)...)
		cmd.Dir = "."
		out, err := cmd.Output()
		require.NoError(t, err, "go list %v", args)
		return strings.Fields(string(out))
	}
	forbidden := func(p string) bool {
		return strings.Contains(p, "jsonschema") || strings.Contains(p, "json-schema") ||
			strings.HasPrefix(p, "golang.org/x/text") || strings.HasPrefix(p, "github.com/open-policy-agent/")
	}
	for _, p := range list("-f", `{{join .Imports " "}}`, ".") {
		require.False(t, p == "encoding/json" || forbidden(p), "package facts imports %s", p)
	}
	for _, p := range list("-deps", ".") {
		require.False(t, forbidden(p), "package facts reaches %s", p)
	}
	const module = "github.com/policycheck/policycheck/"
	for _, line := range list("-deps", "-f", `{{.ImportPath}}|{{join .Imports ","}}`, ".") {
		path, imports, _ := strings.Cut(line, "|")
		if !strings.HasPrefix(path, module) {
			continue
		}
		for _, p := range strings.Split(imports, ",") {
			if p == "encoding/json" {
				require.Equal(t, module+"facts/internal/jsonvalue", path, "%s reads JSON with encoding/json for facts", path)
			}
		}
	}
}
