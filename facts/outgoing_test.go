package facts_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
)

// TestOutgoingKeepsRevealsWhoseCallIsFarBack: cleaning keeps a revealing
// return when a call with its id comes before it, however far back, and
// drops one whose call comes after it or never comes. The filler puts
// thousands of parts between a call and its return, more than Derive
// examines looking backwards from each return before it walks the whole
// history instead, so both ways of finding calls are exercised; the
// incremental Tracker must agree.
func TestOutgoingKeepsRevealsWhoseCallIsFarBack(t *testing.T) {
	call := func(id string) facts.Part {
		return facts.Part{Kind: facts.ToolCall, ToolName: "search_tools", ToolKind: facts.ToolKindSearch, ToolCallID: id, HasToolCallID: true}
	}
	ret := func(id string, reveals ...string) facts.Part {
		return facts.Part{Kind: facts.ToolReturn, ToolName: "search_tools", ToolKind: facts.ToolKindSearch, ToolCallID: id, HasToolCallID: true, Reveals: reveals}
	}
	filler := make([]facts.Part, 6000)
	for i := range filler {
		filler[i] = facts.Part{Kind: facts.UserPrompt}
	}
	h := facts.History{
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt}}},
		{Kind: facts.Response, Parts: []facts.Part{call("far")}},
		{Kind: facts.Request, Parts: filler},
		{Kind: facts.Request, Parts: []facts.Part{ret("far", "a"), ret("nocall", "b"), ret("late", "c")}},
		{Kind: facts.Response, Parts: []facts.Part{call("late"), call("near")}},
		{Kind: facts.Request, Parts: []facts.Part{ret("near", "d")}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.Text}}},
	}
	reg := caseRegistry(t, []byte(`{"capabilities": [], "tools": [
		{"name": "a", "defer_loading": true}, {"name": "b", "defer_loading": true},
		{"name": "c", "defer_loading": true}, {"name": "d", "defer_loading": true}]}`))
	f := facts.Derive(h, reg)
	require.Equal(t, []string{"a", "b", "c", "d"}, f.Discovered)
	require.Equal(t, []string{"a", "d"}, f.Outgoing.Discovered)

	tr := facts.NewTracker(reg)
	tr.Append(h...)
	require.Equal(t, f, tr.Facts())
}
