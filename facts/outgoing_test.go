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

// TestOutgoingDropsAReturnWithoutAnyCall: a revealing return whose id no
// call carries, so far from the start that looking backwards for its call
// runs out of budget, is still an orphan once the whole history has been
// walked.
func TestOutgoingDropsAReturnWithoutAnyCall(t *testing.T) {
	filler := make([]facts.Part, 6000)
	for i := range filler {
		filler[i] = facts.Part{Kind: facts.UserPrompt}
	}
	h := facts.History{
		{Kind: facts.Request, Parts: filler},
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.ToolReturn, ToolName: "search_tools", ToolKind: facts.ToolKindSearch,
			ToolCallID: "nocall", HasToolCallID: true, Reveals: []string{"b"}}}},
	}
	reg := caseRegistry(t, []byte(`{"capabilities": [], "tools": [{"name": "b", "defer_loading": true}]}`))
	f := facts.Derive(h, reg)
	require.Equal(t, []string{"b"}, f.Discovered)
	require.Equal(t, []string{}, f.Outgoing.Discovered)
	tr := facts.NewTracker(reg)
	tr.Append(h...)
	require.Equal(t, f, tr.Facts())
}

// TestPartKindNames: every part kind prints its wire name and parses
// back; anything else prints as a number and does not parse.
func TestPartKindNames(t *testing.T) {
	for k := facts.SystemPrompt; k <= facts.BuiltinToolReturn; k++ {
		back, ok := facts.ParsePartKind(k.String())
		require.True(t, ok, k.String())
		require.Equal(t, k, back)
	}
	require.Equal(t, "PartKind(0)", facts.PartKind(0).String())
	require.Equal(t, "PartKind(14)", facts.PartKind(14).String())
	_, ok := facts.ParsePartKind("PartKind(14)")
	require.False(t, ok)
	require.Equal(t, "request", facts.Request.String())
	require.Equal(t, "response", facts.Response.String())
	require.Equal(t, "MessageKind(3)", facts.MessageKind(3).String())
	require.Equal(t, "tool-search", facts.ToolKindSearch.String())
	require.Equal(t, "capability-load", facts.ToolKindLoad.String())
	require.Equal(t, "", facts.ToolKindNone.String())
}
