package facts_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
)

// TestAnsweredCalls: a call of the dispatched response whose tool_call_id
// an earlier tool-return or retry-prompt holds is answered, at the first
// such part, whatever the compaction window; a return without an id, a
// return for another id, or an id only earlier calls carry answers
// nothing. The incremental Tracker agrees with Derive.
func TestAnsweredCalls(t *testing.T) {
	call := func(id string) facts.Part {
		return facts.Part{Kind: facts.ToolCall, ToolName: "op", ToolCallID: id, HasToolCallID: true}
	}
	h := facts.History{
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt}}},
		{Kind: facts.Response, Parts: []facts.Part{call("t1"), call("t2"), call("t3"), call("t4")}},
		{Kind: facts.Request, Parts: []facts.Part{
			{Kind: facts.ToolReturn, ToolName: "op", ToolCallID: "t1", HasToolCallID: true},
			{Kind: facts.RetryPrompt, ToolName: "op", ToolCallID: "t2", HasToolCallID: true},
			{Kind: facts.ToolReturn, ToolName: "op"},
		}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.Compaction}}},
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.ToolReturn, ToolName: "op", ToolCallID: "t1", HasToolCallID: true}}},
		{Kind: facts.Response, Parts: []facts.Part{call("t1"), call("t2"), call("t3"), {Kind: facts.ToolCall, ToolName: "op"}}},
	}
	reg := caseRegistry(t, []byte(`{"capabilities": [], "tools": [{"name": "op"}]}`))
	f := facts.Derive(h, reg)
	require.NotNil(t, f.Dispatch)
	got := make([]*facts.Position, len(f.Dispatch.Calls))
	for i, c := range f.Dispatch.Calls {
		got[i] = c.Answered
	}
	require.Equal(t, []*facts.Position{{Message: 2, Part: 0}, {Message: 2, Part: 1}, nil, nil}, got)

	tr := facts.NewTracker(reg)
	tr.Append(h...)
	require.Equal(t, f, tr.Facts())
}
