package facts_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
)

// TestFlowLabelsRefuseUnknownValues: an integrity, confidentiality or
// clearance that is not one of the levels is refused at its pointer,
// on a tool and on a capability.
func TestFlowLabelsRefuseUnknownValues(t *testing.T) {
	cases := map[string]struct {
		caps  []facts.Capability
		tools []facts.Tool
		want  string
	}{
		"tool integrity":             {tools: []facts.Tool{{Name: "a", FlowLabels: facts.FlowLabels{Integrity: "high"}}}, want: `/tools/0/integrity: integrity "high" is not one of "trusted", "untrusted"`},
		"tool confidentiality":       {tools: []facts.Tool{{Name: "a", FlowLabels: facts.FlowLabels{Confidentiality: "private"}}}, want: `/tools/0/confidentiality: confidentiality "private" is not one of "public", "internal", "confidential", "secret"`},
		"tool clearance":             {tools: []facts.Tool{{Name: "a", FlowLabels: facts.FlowLabels{Clearance: "Secret"}}}, want: `/tools/0/clearance: clearance "Secret" is not one of`},
		"capability confidentiality": {caps: []facts.Capability{{ID: "c", FlowLabels: facts.FlowLabels{Confidentiality: "top"}}}, want: `/capabilities/0/confidentiality: confidentiality "top"`},
	}
	for note, tc := range cases {
		_, err := facts.NewRegistry(tc.caps, tc.tools)
		require.Error(t, err, note)
		require.Contains(t, err.Error(), tc.want, note)
	}
}

// TestFlowLabelsInheritAndDefault: a tool inherits its capability's flow
// labels as the join (the lower integrity, the higher confidentiality,
// the lower clearance, consequential when either is); an unlabelled
// tool, an unknown one and the framework tools get the documented
// defaults; a registry that sets none says so.
func TestFlowLabelsInheritAndDefault(t *testing.T) {
	caps := []facts.Capability{
		{ID: "mail", FlowLabels: facts.FlowLabels{Integrity: "untrusted", Confidentiality: "confidential", Clearance: "internal", Consequential: true}},
		{ID: "plain"},
	}
	tools := []facts.Tool{
		{Name: "read_mail", Capability: "mail", FlowLabels: facts.FlowLabels{Integrity: "trusted", Confidentiality: "internal", Clearance: "secret"}},
		{Name: "ledger", Capability: "plain", FlowLabels: facts.FlowLabels{Integrity: "trusted", Confidentiality: "secret"}},
		{Name: "bare"},
	}
	reg, err := facts.NewRegistry(caps, tools)
	require.NoError(t, err)
	require.True(t, reg.UsesFlowLabels())
	require.Equal(t, facts.FlowLabels{Integrity: "untrusted", Confidentiality: "confidential", Clearance: "internal", Consequential: true}, reg.LabelsOf("read_mail"))
	require.Equal(t, facts.FlowLabels{Integrity: "trusted", Confidentiality: "secret", Clearance: "internal"}, reg.LabelsOf("ledger"))
	def := facts.FlowLabels{Integrity: facts.DefaultIntegrity, Confidentiality: facts.DefaultConfidentiality, Clearance: facts.DefaultClearance}
	require.Equal(t, def, reg.LabelsOf("bare"))
	require.Equal(t, def, reg.LabelsOf("web_search"), "a tool the registry does not have")
	require.Equal(t, facts.Label{Integrity: "trusted", Confidentiality: "public"}, reg.ReturnLabel(facts.SearchTool))
	tool, _ := reg.Tool("bare")
	require.Equal(t, facts.FlowLabels{}, tool.FlowLabels, "Tool holds what the registry sets; LabelsOf fills the defaults")

	none, err := facts.NewRegistry(nil, []facts.Tool{{Name: "a"}})
	require.NoError(t, err)
	require.False(t, none.UsesFlowLabels())
}

// TestLabelJoin: the join takes the lower integrity and the higher
// confidentiality; Bottom is its identity.
func TestLabelJoin(t *testing.T) {
	a := facts.Label{Integrity: "trusted", Confidentiality: "secret"}
	b := facts.Label{Integrity: "untrusted", Confidentiality: "public"}
	require.Equal(t, facts.Label{Integrity: "untrusted", Confidentiality: "secret"}, a.Join(b))
	require.Equal(t, a.Join(b), b.Join(a))
	require.Equal(t, a, facts.Bottom.Join(a))
	require.Equal(t, 3, facts.ConfidentialityRank("secret"))
	require.Equal(t, -1, facts.ConfidentialityRank("top"))
}
