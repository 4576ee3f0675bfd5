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
	require.Equal(t, []argIntegrity{{"", argTrusted}}, argsIntegrityOf(reg, &call, facts.ArgsValue(call.Args), nil))
	// Under a key no schema names (send_money has none), even the user's
	// value and a boolean are the model's choice: untrusted.
	call = facts.Call{Tool: "send_money", Args: []byte(`{"to": "DE89370400440532013000", "memo": "x", "ok": true}`),
		Flows: []facts.Flow{{Path: "/to", Match: facts.FlowExact, Source: facts.FlowSource{Kind: facts.UserPrompt}}}}
	require.Equal(t, []argIntegrity{{"/memo", argUntrusted}, {"/ok", argUntrusted}, {"/to", argUntrusted}}, argsIntegrityOf(reg, &call, facts.ArgsValue(call.Args), nil))
}

// TestEchoedByItsCall: a tool return vouches for a value its call did not
// send; a value the call's arguments hold (spaces and case aside), a
// return without an id or whose call is not shown, vouch for nothing; a
// prompt has no call.
func TestEchoedByItsCall(t *testing.T) {
	id := func(s string) *string { return &s }
	calls := facts.NewSentValues([]facts.ToolCallRecord{{Tool: "lookup", ToolCallID: id("l1"), Message: 1, Part: 0, Args: []byte(`{"q": "gb33 bukb 2020 1555 5555 55"}`)}})
	src := facts.FlowSource{Kind: facts.ToolReturn, Tool: "lookup", ToolCallID: id("l1"), At: facts.Position{Message: 2}}
	require.True(t, echoedByTheAgent(&src, "GB33BUKB20201555555555", calls))
	require.False(t, echoedByTheAgent(&src, "DE89370400440532013000", calls))
	require.False(t, echoedByTheAgent(&src, true, calls))
	other := src
	other.ToolCallID = id("l9")
	require.True(t, echoedByTheAgent(&other, "DE89370400440532013000", calls), "its call is not shown")
	other.ToolCallID = nil
	require.True(t, echoedByTheAgent(&other, "DE89370400440532013000", calls), "no id")
	before := src
	before.At = facts.Position{Message: 0}
	require.True(t, echoedByTheAgent(&before, "DE89370400440532013000", calls), "a return before its call answers none")
	require.False(t, echoedByTheAgent(&facts.FlowSource{Kind: facts.UserPrompt}, "GB33BUKB20201555555555", calls))
}
