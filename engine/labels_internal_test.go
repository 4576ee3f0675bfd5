package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
)

// TestSourceLabelOfPrompts: a user or system prompt part is trusted and
// internal whatever the registry says; a return has its tool's label,
// the defaults for a tool the registry does not have.
func TestSourceLabelOfPrompts(t *testing.T) {
	reg, err := facts.NewRegistry(nil, []facts.Tool{{Name: "read_mail", FlowLabels: facts.FlowLabels{Confidentiality: "secret"}}})
	require.NoError(t, err)
	trusted := facts.Label{Integrity: "trusted", Confidentiality: "internal"}
	require.Equal(t, trusted, sourceLabel(reg, &facts.FlowSource{Kind: facts.UserPrompt}))
	require.Equal(t, trusted, sourceLabel(reg, &facts.FlowSource{Kind: facts.SystemPrompt}))
	require.Equal(t, facts.Label{Integrity: "untrusted", Confidentiality: "secret"},
		sourceLabel(reg, &facts.FlowSource{Kind: facts.ToolReturn, Tool: "read_mail"}))
	require.Equal(t, facts.Label{Integrity: "untrusted", Confidentiality: "internal"},
		sourceLabel(reg, &facts.FlowSource{Kind: facts.BuiltinToolReturn, Tool: "web_search"}))
	// A value equal to what the user wrote is trusted (args_integrity),
	// at the top level of the arguments.
	call := facts.Call{Tool: "send_money", Args: []byte(`"DE89370400440532013000"`),
		Flows: []facts.Flow{{Path: "", Match: facts.FlowExact, Source: facts.FlowSource{Kind: facts.UserPrompt}}}}
	require.Equal(t, []argIntegrity{{"", argTrusted}}, argsIntegrityOf(reg, &call))
	// Under a key no schema names (send_money has none), even the user's
	// value and a boolean are the model's choice: untrusted.
	call = facts.Call{Tool: "send_money", Args: []byte(`{"to": "DE89370400440532013000", "memo": "x", "ok": true}`),
		Flows: []facts.Flow{{Path: "/to", Match: facts.FlowExact, Source: facts.FlowSource{Kind: facts.UserPrompt}}}}
	require.Equal(t, []argIntegrity{{"/memo", argUntrusted}, {"/ok", argUntrusted}, {"/to", argUntrusted}}, argsIntegrityOf(reg, &call))
}
