package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
)

// TestFlowMatchingIsBoundedInADecision is issue 43, item 4: 300,000
// returned strings sharing their first 8 bytes and a 1 MB argument
// repeating that prefix held a core for 70 s under a 5 s deadline. The
// matching of a call's arguments is bounded (facts.FlowCallCompareBudget,
// FlowResponseCompareBudget; facts' TestFlowMatchingIsBounded counts what
// it compares): the decision, with no deadline, says the flows are
// incomplete, and the call, whose flows could not all be matched, is
// refused by the rule that requires complete flows. Without the bound
// the matching runs to its end, the flows are complete and the call
// executes. No clock is read: the test's own timeout is the only one.
func TestFlowMatchingIsBoundedInADecision(t *testing.T) {
	reg, err := facts.NewRegistry(nil, []facts.Tool{{Name: "fetch"}, {Name: "send"}})
	require.NoError(t, err)
	e, err := engine.New(context.Background(), engine.Registry(reg), engine.Modules(engine.Source{File: "guard.rego", Text: `package policycheck.rules.guard

import data.policycheck.lib

deny contains "the flows of this call cannot be relied on" if {
	input.call.tool == "send"
	not lib.flows_complete(input.call)
}
`}))
	require.NoError(t, err)

	const prefix = "sharedpx"
	var content bytes.Buffer
	content.WriteByte('[')
	for i := range 300_000 {
		if i > 0 {
			content.WriteByte(',')
		}
		fmt.Fprintf(&content, "%q", fmt.Sprintf("%s%07d", prefix, i))
	}
	content.WriteByte(']')
	arg := strings.Repeat(prefix, (1<<20)/len(prefix))
	h := facts.History{
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "fetch", ToolCallID: "f1", HasToolCallID: true, Args: []byte(`{}`)}}},
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.ToolReturn, ToolName: "fetch", ToolCallID: "f1", HasToolCallID: true, Content: content.Bytes()}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "send", ToolCallID: "s1", HasToolCallID: true,
			Args: []byte(`{"body": "` + arg + `"}`)}}},
	}

	ctx := context.Background()
	d, err := e.Decide(ctx, engine.Request{History: h})
	require.NoError(t, err)
	require.Len(t, d.Calls, 1)
	assert.Equal(t, engine.Denied, d.Calls[0].Verdict, "flows that could not all be matched never let the call through")
	assert.Contains(t, strings.Join(d.Calls[0].Reasons, "\n"), "the flows of this call cannot be relied on")
	doc, err := d.InputDocument()
	require.NoError(t, err)
	assert.Equal(t, true, doc.(map[string]any)["facts"].(map[string]any)["flow_index_truncated"], "the facts say the flows are incomplete")
}
