package facts_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
)

// TestTraceHistory: the trace names every reveal with the form it came
// in, every complete load pair and every compaction, wherever the windows
// start; parts that reveal nothing, untyped loads and unpaired ones are
// not in it.
func TestTraceHistory(t *testing.T) {
	h := facts.History{
		{Kind: facts.Request, Parts: []facts.Part{
			{Kind: facts.ToolAvailabilityDelta, Reveals: []string{"a"}},
			{Kind: facts.ToolReturn, ToolName: "search_tools", ToolKind: facts.ToolKindSearch, ToolCallID: "s1", HasToolCallID: true, Reveals: []string{"b"}},
			{Kind: facts.ToolReturn, ToolName: "search_tools", ToolCallID: "s2", HasToolCallID: true, Reveals: []string{"c"}},
			{Kind: facts.ToolReturn, ToolName: "get_time", ToolCallID: "t1", HasToolCallID: true},
		}},
		{Kind: facts.Response, Parts: []facts.Part{
			{Kind: facts.BuiltinToolReturn, ToolName: "tool_search", ToolKind: facts.ToolKindSearch, Reveals: []string{"a"}},
			{Kind: facts.Compaction},
			{Kind: facts.ToolCall, ToolName: "load_capability", ToolKind: facts.ToolKindLoad, ToolCallID: "l1", HasToolCallID: true, LoadID: "c1", HasLoadID: true},
			{Kind: facts.ToolCall, ToolName: "load_capability", ToolKind: facts.ToolKindLoad, ToolCallID: "l2", HasToolCallID: true},
			{Kind: facts.ToolCall, ToolName: "load_capability", ToolCallID: "l3", HasToolCallID: true, LoadID: "c3", HasLoadID: true},
			{Kind: facts.ToolCall, ToolName: "load_capability", ToolKind: facts.ToolKindLoad, LoadID: "c4", HasLoadID: true},
		}},
		{Kind: facts.Request, Parts: []facts.Part{
			{Kind: facts.ToolReturn, ToolName: "load_capability", ToolKind: facts.ToolKindLoad, ToolCallID: "l1", HasToolCallID: true},
			{Kind: facts.ToolReturn, ToolName: "load_capability", ToolKind: facts.ToolKindLoad, ToolCallID: "l2", HasToolCallID: true},
			{Kind: facts.ToolReturn, ToolName: "load_capability", ToolKind: facts.ToolKindLoad, ToolCallID: "l3", HasToolCallID: true},
			{Kind: facts.ToolReturn, ToolName: "load_capability", ToolKind: facts.ToolKindLoad},
			{Kind: facts.RetryPrompt, ToolName: "load_capability", ToolCallID: "l1", HasToolCallID: true},
		}},
	}
	p := func(m, part int) facts.Position { return facts.Position{Message: m, Part: part} }
	tr := facts.TraceHistory(h)
	require.Equal(t, map[string][]facts.Reveal{
		"a": {{At: p(0, 0), Kind: facts.RevealDelta}, {At: p(1, 0), Kind: facts.RevealNativeSearch}},
		"b": {{At: p(0, 1), Kind: facts.RevealSearchReturn}},
		"c": {{At: p(0, 2), Kind: facts.RevealLegacy}},
	}, tr.Reveals)
	require.Equal(t, map[string][]facts.Load{"c1": {{Call: p(1, 2), Return: p(2, 0)}}}, tr.Loads)
	require.Equal(t, []facts.Position{p(1, 1)}, tr.Compactions)
}
