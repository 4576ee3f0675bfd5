package engine

import (
	"io/fs"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/policies"
)

// TestPerCallRestMirrorsTheDecision: restQuery is the shipped
// decision_from_sets with its verdicts left out, key by key and rule by
// rule, so an error outside the verdicts fails the whole decision closed
// and the rest of the decision reads the rules the combined one reads.
func TestPerCallRestMirrorsTheDecision(t *testing.T) {
	src, err := fs.ReadFile(policies.FS(), "availability/availability.rego")
	require.NoError(t, err)
	m, err := ast.ParseModule("availability.rego", string(src))
	require.NoError(t, err)
	var shipped ast.Object
	for _, r := range m.Rules {
		if r.Head.Name == "decision_from_sets" {
			shipped, _ = r.Head.Value.Value.(ast.Object)
		}
	}
	require.NotNil(t, shipped, "the shipped availability policy defines decision_from_sets as an object")
	body, err := ast.ParseBody(restQuery)
	require.NoError(t, err)
	rest, ok := body[0].Operand(1).Value.(ast.Object)
	require.True(t, ok)
	want := map[string]string{}
	for _, k := range shipped.Keys() {
		v := shipped.Get(k).String()
		switch {
		case k.Equal(ast.StringTerm("verdicts")):
			v = "[]"
		case len(v) > 5 && v[:5] == "gate.":
			v = "data.policycheck.lib." + v
		default:
			v = "data.policycheck.availability." + v
		}
		want[k.String()] = v
	}
	got := map[string]string{}
	for _, k := range rest.Keys() {
		got[k.String()] = rest.Get(k).String()
	}
	assert.Equal(t, want, got)
}
