package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// budgetRules counts transfers with the shipped counting helpers.
const budgetRules = `package policycheck.rules.budget

import data.policycheck.lib

deny contains "fourth transfer" if {
	input.call.tool == "transfer_funds"
	lib.call_count(input.call) > 3
}

deny contains "over 10000" if {
	input.call.tool == "transfer_funds"
	lib.arg_sum(input.call, "amount") > 10000
}
`

func budgetFixture(t *testing.T) (*facts.Registry, facts.History) {
	t.Helper()
	reg, err := loader.ReadRegistry("../examples/registry.yaml")
	require.NoError(t, err)
	raw, err := os.ReadFile("../examples/histories/budget.json")
	require.NoError(t, err)
	h, err := loader.DecodeHistory("budget.json", raw, loader.DefaultLimits())
	require.NoError(t, err)
	return reg, h
}

func verdicts(d *engine.Decision) map[string]string {
	out := map[string]string{}
	for _, c := range d.Calls {
		out[*c.ToolCallID] = c.Verdict
	}
	return out
}

// TestToolCallsInTheInputOnlyWhenRead: input.facts.tool_calls is built
// for a policy set that reads it, with every call of the history, its
// outcome and its message's timestamp, and left out otherwise.
func TestToolCallsInTheInputOnlyWhenRead(t *testing.T) {
	ctx := context.Background()
	reg, h := budgetFixture(t)
	plain, err := engine.New(ctx, engine.Registry(reg))
	require.NoError(t, err)
	assert.False(t, plain.FactOptions().ToolCalls)
	doc, err := plain.Input(ctx, engine.Request{History: h})
	require.NoError(t, err)
	assert.NotContains(t, doc.(map[string]any)["facts"], "tool_calls")

	eng, err := engine.New(ctx, engine.Registry(reg), engine.Modules(engine.Source{File: "budget.rego", Text: budgetRules}))
	require.NoError(t, err)
	assert.True(t, eng.FactOptions().ToolCalls)
	doc, err = eng.Input(ctx, engine.Request{History: h})
	require.NoError(t, err)
	b, err := json.Marshal(doc.(map[string]any)["facts"].(map[string]any)["tool_calls"])
	require.NoError(t, err)
	args := func(to string, amount any) string {
		a, _ := json.Marshal(map[string]any{"from": "ops", "to": to, "amount": amount})
		return string(a)
	}
	want := `{"transfer_funds": [
		{"tool_call_id": "b1", "message": 1, "part": 0, "timestamp": "2026-03-02T10:00:05Z", "outcome": "returned", "args": ` + args("acme", 3000) + `},
		{"tool_call_id": "b2", "message": 3, "part": 0, "timestamp": "2026-03-02T10:00:10Z", "outcome": "retried", "args": ` + args("globex", "4000 EUR") + `},
		{"tool_call_id": "b3", "message": 5, "part": 0, "timestamp": "2026-03-02T10:00:15Z", "outcome": "returned", "args": ` + args("globex", 4000) + `},
		{"tool_call_id": "b4", "message": 7, "part": 0, "timestamp": "2026-03-02T10:00:20Z", "outcome": "pending", "args": ` + args("initech", 3500) + `},
		{"tool_call_id": "b5", "message": 7, "part": 1, "timestamp": "2026-03-02T10:00:20Z", "outcome": "pending", "args": ` + args("umbrella", 500) + `}]}`
	assert.JSONEq(t, want, string(b))

	d, err := eng.Decide(ctx, engine.Request{History: h})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"b4": "denied", "b5": "denied"}, verdicts(d))
	assert.NotNil(t, d.FactsUsed().ToolCalls, "the facts used carry the calls")

	// Decided again from its input document, as the decision log allows.
	full, err := d.InputDocument()
	require.NoError(t, err)
	raw, err := json.Marshal(full)
	require.NoError(t, err)
	var back any
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, full, inputDecidedAgain(t, ctx, eng, back))
}

// TestToolCallsFromFactsOrHistory: facts without the calls (a tracker
// asked for none) are completed from the history; without a history the
// decision fails closed, never decided as if there were no calls.
func TestToolCallsFromFactsOrHistory(t *testing.T) {
	ctx := context.Background()
	reg, h := budgetFixture(t)
	eng, err := engine.New(ctx, engine.Registry(reg), engine.Modules(engine.Source{File: "budget.rego", Text: budgetRules}))
	require.NoError(t, err)
	f := facts.Derive(h, reg)
	d, err := eng.Decide(ctx, engine.Request{Facts: &f, History: h})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"b4": "denied", "b5": "denied"}, verdicts(d))
	d, err = eng.Decide(ctx, engine.Request{Facts: &f})
	require.NoError(t, err)
	require.NotEmpty(t, d.Errors)
	assert.Contains(t, d.Errors[0], "input.facts.tool_calls")
	for _, c := range d.Calls {
		assert.NotEqual(t, "execute", c.Verdict, "a call of a fail-closed decision")
	}
	assert.Empty(t, d.Available)
}

// TestRunCountsToolCalls: a Run's steps (the incremental tracker) decide
// as Decide does on every prefix.
func TestRunCountsToolCalls(t *testing.T) {
	ctx := context.Background()
	reg, h := budgetFixture(t)
	eng, err := engine.New(ctx, engine.Registry(reg), engine.Modules(engine.Source{File: "budget.rego", Text: budgetRules}))
	require.NoError(t, err)
	run := eng.NewRun()
	var last map[string]string
	for n := 1; n <= len(h); n++ {
		sd, err := run.Step(ctx, h[n-1:n], nil)
		require.NoError(t, err)
		d, err := eng.Decide(ctx, engine.Request{History: h[:n]})
		require.NoError(t, err)
		last = verdicts(sd)
		assert.Equal(t, verdicts(d), last, "prefix of %d messages", n)
	}
	assert.Equal(t, map[string]string{"b4": "denied", "b5": "denied"}, last)
}

// TestFactOptionsFollowWhatPoliciesRead: the engine builds the calls for a
// policy set that may read them, whichever way it refers to them, and
// for no other.
func TestFactOptionsFollowWhatPoliciesRead(t *testing.T) {
	ctx := context.Background()
	reg, _ := budgetFixture(t)
	cases := map[string]struct {
		text string
		want bool
	}{
		"a direct reference": {`package policycheck.rules.x

deny contains "many" if count(input.facts.tool_calls.transfer_funds) > 3
`, true},
		"through a helper of the library": {budgetRules, true},
		"through object.get": {`package policycheck.rules.x

deny contains "many" if count(object.get(input, ["facts", "tool_calls", "get_time"], [])) > 3
`, true},
		"the facts as a whole": {`package policycheck.rules.x

deny contains "odd" if count(input.facts) > 100
`, true},
		"a key computed at run time": {`package policycheck.rules.x

deny contains k if {
	some k in ["facts"]
	input[k].window.message > 1000
}
`, true},
		"through a variable": {`package policycheck.rules.x

deny contains "many" if {
	f := input.facts
	count(f.tool_calls) > 3
}
`, true},
		"other facts only": {`package policycheck.rules.x

deny contains "no lookup" if {
	input.call.tool == "issue_refund"
	not "get_order" in input.facts.returned
	object.get(input, ["facts", "loaded"], set()) != {"x"}
}
`, false},
	}
	for note, tc := range cases {
		eng, err := engine.New(ctx, engine.Registry(reg), engine.Modules(engine.Source{File: "x.rego", Text: tc.text}))
		require.NoError(t, err, note)
		assert.Equal(t, tc.want, eng.FactOptions().ToolCalls, note)
	}
}

// TestCallCountWithinReadsEveryTimestampForm: the window helper reads RFC
// 3339 strings and Unix seconds, and counts a timestamp it cannot read as
// recent, without a built-in error under the engine's strict evaluation
// (which would fail the decision closed). It kills the mutants of
// policies/lib/calls.rego's _ns that opa test, evaluating non-strict,
// cannot tell apart (policies/mutation_test.go).
func TestCallCountWithinReadsEveryTimestampForm(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ReadRegistry("../examples/registry.yaml")
	require.NoError(t, err)
	call := func(id string) string {
		return `{"tool_name": "get_time", "args": {}, "tool_call_id": "` + id + `", "part_kind": "tool-call"}`
	}
	ret := func(id string) string {
		return `{"tool_name": "get_time", "content": "10:00", "tool_call_id": "` + id + `", "part_kind": "tool-return"}`
	}
	raw := `[
		{"kind": "request", "timestamp": 1772445600, "parts": [{"content": "time?", "part_kind": "user-prompt"}]},
		{"kind": "response", "timestamp": "2026-03-02 10:00:05", "parts": [` + call("g1") + `]},
		{"kind": "request", "parts": [` + ret("g1") + `]},
		{"kind": "response", "timestamp": "2026-03-02T10:05:00Z", "parts": [` + call("g2") + `]},
		{"kind": "request", "parts": [` + ret("g2") + `]},
		{"kind": "response", "timestamp": 1772445960, "parts": [` + call("g3") + `]}
	]`
	h, err := loader.DecodeHistory("times.json", []byte(raw), loader.DefaultLimits())
	require.NoError(t, err)
	eng, err := engine.New(ctx, engine.Registry(reg), engine.Modules(engine.Source{File: "rate.rego", Text: `package policycheck.rules.rate

import data.policycheck.lib

deny contains sprintf("%d recent", [n]) if {
	input.call.tool == "get_time"
	n := lib.call_count_within(input.call, time.parse_duration_ns("30s"))
}
`}))
	require.NoError(t, err)
	d, err := eng.Decide(ctx, engine.Request{History: h})
	require.NoError(t, err)
	require.Empty(t, d.Errors)
	require.Len(t, d.Calls, 1)
	// g3 itself and g1, whose naive timestamp cannot be read; g2 is a
	// minute old.
	assert.Contains(t, d.Calls[0].Reasons[0], "2 recent")
}
