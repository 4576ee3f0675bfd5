package facts_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
)

// TestReturnsByToolAlone: a derivation asked for the per-tool summary
// without the calls (what input.call.window needs) pairs returns with
// calls itself and agrees with the summary folded from the call log on
// every pairing rule: a return answers every call waiting with its id, a
// second return for an answered id counts for nothing, a return for an
// id no call had is unpaired (a retry prompt naming no tool is the
// framework's words, with an id or without), a return without an id is
// unpaired, a provider-side return counts unless it has a tool_kind, and
// a call the next call with the same id follows is answered by the one
// return after both.
func TestReturnsByToolAlone(t *testing.T) {
	call := func(tool, id string) facts.Part {
		return facts.Part{Kind: facts.ToolCall, ToolName: tool, ToolCallID: id, HasToolCallID: true}
	}
	ret := func(kind facts.PartKind, tool, id string) facts.Part {
		return facts.Part{Kind: kind, ToolName: tool, ToolCallID: id, HasToolCallID: id != ""}
	}
	h := facts.History{
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt}}},
		{Kind: facts.Response, Parts: []facts.Part{call("op", "t1"), call("op", "t2"), call("other", "t2"), {Kind: facts.ToolCall, ToolName: "op"}}},
		{Kind: facts.Request, Parts: []facts.Part{
			ret(facts.ToolReturn, "op", "t1"),
			ret(facts.ToolReturn, "op", "t1"), // answered already
			ret(facts.RetryPrompt, "other", "t2"),
			ret(facts.RetryPrompt, "", "nobody"), // the framework's words
			ret(facts.RetryPrompt, "", ""),       // the framework's words
			ret(facts.RetryPrompt, "ghost", "nobody"),
			ret(facts.ToolReturn, "ghost", ""),
		}},
		{Kind: facts.Response, Parts: []facts.Part{
			ret(facts.BuiltinToolReturn, "web_search", "w1"),
			{Kind: facts.BuiltinToolReturn, ToolName: "tool_search", ToolKind: facts.ToolKindSearch},
			call("op", "t1"),
		}},
		{Kind: facts.Request, Parts: []facts.Part{ret(facts.ToolReturn, "op", "t1"), ret(facts.ToolReturn, "op", "t1")}},
		{Kind: facts.Response, Parts: []facts.Part{call("op", "t9")}},
	}
	reg := caseRegistry(t, []byte(`{"capabilities": [], "tools": [{"name": "op"}, {"name": "other"}]}`))
	alone := facts.Derive(h, reg, facts.Options{ReturnsByTool: true}).ReturnsByTool
	withCalls := facts.Derive(h, reg, facts.Options{ReturnsByTool: true, ToolCalls: true}).ReturnsByTool
	require.Equal(t, withCalls, alone)
	require.Equal(t, facts.ReturnsByToolOf(facts.ToolCalls(h), facts.BuiltinReturns(h), facts.UnpairedReturns(h)), alone)

	type entry struct {
		kind     facts.PartKind
		tool     string
		unpaired bool
		count    int
		id       string
	}
	var got []entry
	for _, r := range alone {
		id := ""
		if r.ToolCallID != nil {
			id = *r.ToolCallID
		}
		got = append(got, entry{r.Kind, r.Tool, r.Unpaired, r.Count, id})
	}
	require.Equal(t, []entry{
		{facts.ToolReturn, "other", false, 1, "t2"},
		{facts.ToolReturn, "ghost", true, 2, ""},
		{facts.BuiltinToolReturn, "web_search", false, 1, "w1"},
		{facts.ToolReturn, "op", false, 3, "t1"},
	}, got)

	// The summary's ids are its own: a caller writing over the history
	// afterwards changes nothing in it.
	h[2].Parts[2].ToolCallID = "changed"
	h[3].Parts[0].ToolCallID = "changed"
	require.Equal(t, "t2", *alone[0].ToolCallID)
	require.Equal(t, "w1", *alone[2].ToolCallID)
}
