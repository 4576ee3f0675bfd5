package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// TestAnUnpairedReturnTaintsTheWindow: a tool return the model was
// shown counts in input.call.window even when no call of the history
// carries its tool_call_id (a history processor that kept the last
// messages cut the call and kept its return; a provider that rewrote the
// id). The window counted only the calls paired with an outcome, so the
// injected IBAN of an unpaired read_file return left the window clean and
// the payment to it executed as a trusted action. Seen failing on main
// (c30cdcd): p1 execute, window {"untrusted": false}.
func TestAnUnpairedReturnTaintsTheWindow(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ReadRegistry("../examples/integrity/registry.yaml")
	require.NoError(t, err)
	eng, err := engine.New(ctx, engine.Registry(reg), engine.PolicyPaths("../examples/policies/integrity"))
	require.NoError(t, err)
	h := facts.History{
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt, Content: []byte(`"Pay the bill in bills/march.txt."`)}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "get_contacts", ToolCallID: "k1", HasToolCallID: true, Args: []byte(`{}`)}}},
		{Kind: facts.Request, Parts: []facts.Part{
			{Kind: facts.ToolReturn, ToolName: "get_contacts", ToolCallID: "k1", HasToolCallID: true, Content: []byte(`[]`)},
			{Kind: facts.ToolReturn, ToolName: "read_file", ToolCallID: "f1", HasToolCallID: true,
				Content: []byte(`"Northwind bill, 98 EUR, to GB33BUKB20201555555555."`)},
		}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "send_money", ToolCallID: "p1", HasToolCallID: true,
			Args: []byte(`{"recipient":"GB33BUKB20201555555555","amount":98,"subject":"bill"}`)}}},
	}
	d, err := eng.Decide(ctx, engine.Request{History: h})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"p1": "approval_required"}, verdicts(d))
	full, err := d.InputDocument()
	require.NoError(t, err)
	assert.Equal(t, true, callsOf(t, full)[0]["window"].(map[string]any)["untrusted"])

	// Decided again from its logged input, and through a Run: the same.
	f, ctxDoc, approvals, err := engine.FactsFromInput(full)
	require.NoError(t, err)
	again, err := eng.Decide(ctx, engine.Request{Facts: f, Context: ctxDoc, Approvals: approvals})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"p1": "approval_required"}, verdicts(again))
	sd, err := eng.NewRun().Step(ctx, h, nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"p1": "approval_required"}, verdicts(sd))
}
