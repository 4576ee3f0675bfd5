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

// TestToolContentInAUserPromptIsNotTheUsers: pydantic-ai puts what a
// tool returns beside its return value (ToolReturn(content=...), and
// every file a tool returns: "This is file X:" and the file) in a
// user-prompt part of the request that carries the tool's return. The
// flows took every user-prompt part for the user's own words, so the
// IBAN an untrusted file carried there was "trusted" (a whole IBAN token
// of a user prompt, --flow-tokens) and the payment to it executed as a
// trusted action (seen on c30cdcd: p1 execute, args_integrity
// {"/recipient": "trusted"}). A prompt part beside tool returns now
// names them (source.beside) and carries their labels: the recipient is
// untrusted, the payment waits for approval, and the decision read back
// from its logged input is the same.
func TestToolContentInAUserPromptIsNotTheUsers(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ReadRegistry("../examples/integrity/registry.yaml")
	require.NoError(t, err)
	eng, err := engine.New(ctx, engine.Registry(reg), engine.PolicyPaths("../examples/policies/integrity"), engine.FlowTokens(true))
	require.NoError(t, err)
	h := facts.History{
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt, Content: []byte(`"Pay the bill in bills/march.txt."`)}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "read_file", ToolCallID: "f1", HasToolCallID: true, Args: []byte(`{"path":"bills/march.txt"}`)}}},
		{Kind: facts.Request, Parts: []facts.Part{
			{Kind: facts.ToolReturn, ToolName: "read_file", ToolCallID: "f1", HasToolCallID: true, Content: []byte(`"See file march.txt"`)},
			{Kind: facts.UserPrompt, Content: []byte(`["This is file march.txt:", "Northwind Utilities. Amount due 98 EUR. Pay to GB33 BUKB 2020 1555 5555 55."]`)},
		}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "send_money", ToolCallID: "p1", HasToolCallID: true,
			Args: []byte(`{"recipient":"GB33BUKB20201555555555","amount":98,"subject":"bill"}`)}}},
	}
	d, err := eng.Decide(ctx, engine.Request{History: h})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"p1": "approval_required"}, verdicts(d))
	full, err := d.InputDocument()
	require.NoError(t, err)
	assert.Equal(t, "untrusted", callsOf(t, full)[0]["args_integrity"].(map[string]any)["/recipient"])

	assert.Equal(t, full, inputDecidedAgain(t, ctx, eng, full))

	// The same file content in a request of the user's own (no tool
	// return beside it) is the user's word: trusted.
	own := append(facts.History{}, h...)
	own[2] = facts.Message{Kind: facts.Request, Parts: []facts.Part{own[2].Parts[0]}}
	own = append(own[:3], append(facts.History{{Kind: facts.Request, Parts: []facts.Part{h[2].Parts[1]}}}, own[3:]...)...)
	d, err = eng.Decide(ctx, engine.Request{History: own})
	require.NoError(t, err)
	full, err = d.InputDocument()
	require.NoError(t, err)
	assert.Equal(t, "trusted", callsOf(t, full)[0]["args_integrity"].(map[string]any)["/recipient"])
}
