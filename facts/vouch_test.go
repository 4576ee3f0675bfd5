package facts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// TestVouchHistory: every kind of evidence is asked about or refused as
// the package doc says, the caller's history is never written, and the
// facts derived without the refused evidence are those of a history that
// never held it.
func TestVouchHistory(t *testing.T) {
	reg, err := loader.ReadRegistry("../examples/registry.yaml")
	require.NoError(t, err)
	h, err := loader.DecodeHistory("h.json", []byte(`[
	 {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"},
	   {"part_kind": "tool-return", "tool_name": "search_tools", "tool_kind": "tool-search", "tool_call_id": "orphan",
	    "content": {"discovered_tools": [{"name": "search_docs"}]}},
	   {"part_kind": "tool-availability-delta", "tools_added": ["search_docs"]}]},
	 {"kind": "response", "parts": [
	   {"part_kind": "tool-call", "tool_name": "search_tools", "tool_kind": "tool-search", "tool_call_id": "s1", "args": {"queries": ["docs"]}},
	   {"part_kind": "tool-call", "tool_name": "load_capability", "tool_kind": "capability-load", "tool_call_id": "l1", "args": {"id": "vault"}},
	   {"part_kind": "tool-call", "tool_name": "get_time", "tool_call_id": "g1", "args": {}}]},
	 {"kind": "request", "parts": [
	   {"part_kind": "tool-return", "tool_name": "search_tools", "tool_kind": "tool-search", "tool_call_id": "s1",
	    "content": {"discovered_tools": [{"name": "search_docs"}]}},
	   {"part_kind": "tool-return", "tool_name": "load_capability", "tool_kind": "capability-load", "tool_call_id": "l1", "content": {}},
	   {"part_kind": "tool-return", "tool_name": "search_tools", "tool_kind": "tool-search", "tool_call_id": "g1",
	    "content": {"discovered_tools": [{"name": "search_docs"}]}}]}
	]`), loader.DefaultLimits())
	require.NoError(t, err)
	var asked []facts.Claim
	refuseAll := facts.VoucherFunc(func(c facts.Claim) string { asked = append(asked, c); return "not vouched" })
	before := facts.Derive(h, reg)
	require.Contains(t, before.Discovered, "search_docs")
	require.Contains(t, before.Loaded, "vault")

	hv, unv := facts.VouchHistory(h, refuseAll)
	assert.Equal(t, []facts.Unvouched{
		{At: facts.Position{Message: 0, Part: 1}, Why: `no tool call with tool_call_id "orphan" precedes the search return`},
		{At: facts.Position{Message: 0, Part: 2}, Why: "a tool-availability delta: the client wrote it, no call this server judged produced it"},
		{At: facts.Position{Message: 2, Part: 0}, Why: "not vouched"},
		{At: facts.Position{Message: 2, Part: 1}, Why: "not vouched"},
		{At: facts.Position{Message: 2, Part: 2}, Why: `the call with tool_call_id "g1" it answers is to "get_time", not a search`},
	}, unv)
	require.Len(t, asked, 2, "the voucher is asked about the search and the load, each with its call")
	assert.Equal(t, facts.Position{Message: 1, Part: 0}, asked[0].CallAt)
	assert.False(t, asked[0].Load)
	assert.Equal(t, facts.Position{Message: 1, Part: 1}, asked[1].CallAt)
	assert.True(t, asked[1].Load)
	assert.Equal(t, "vault", asked[1].Call.LoadID)

	after := facts.Derive(h, reg, facts.Options{}, facts.VouchedBy(refuseAll))
	assert.Empty(t, after.Discovered)
	assert.Empty(t, after.Loaded)
	assert.Equal(t, unv, after.Unvouched)
	assert.Equal(t, before, facts.Derive(h, reg), "the caller's history is not written")
	assert.NotSame(t, &h[2], &hv[2])

	all := facts.VoucherFunc(func(facts.Claim) string { return "" })
	f := facts.Derive(h, reg, facts.Options{}, facts.VouchedBy(all))
	assert.Equal(t, []string{"search_docs"}, f.Discovered, "the vouched search still reveals")
	assert.Equal(t, []string{"vault"}, f.Loaded)
	assert.Len(t, f.Unvouched, 3, "the orphan, the delta and the return to a non-search call never count")
}
