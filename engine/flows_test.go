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

func exfiltrationFixture(t *testing.T, opts ...engine.Option) (*engine.Engine, *facts.Registry, facts.History) {
	t.Helper()
	reg, err := loader.ReadRegistry("../examples/registry.yaml")
	require.NoError(t, err)
	raw, err := os.ReadFile("../examples/histories/exfiltration.json")
	require.NoError(t, err)
	h, err := loader.DecodeHistory("exfiltration.json", raw, loader.DefaultLimits())
	require.NoError(t, err)
	eng, err := engine.New(context.Background(), append([]engine.Option{engine.Registry(reg),
		engine.PolicyPaths("../examples/policies/exfiltration")}, opts...)...)
	require.NoError(t, err)
	return eng, reg, h
}

// TestFlowsInTheInputOnlyWhenRead: input.call.flows and
// input.facts.flow_index_truncated are built for a policy set that reads
// them, naming the secret the call copies and where it was returned, and
// left out otherwise; a decision is decided again from its logged input
// document with the same flows.
func TestFlowsInTheInputOnlyWhenRead(t *testing.T) {
	ctx := context.Background()
	eng, reg, h := exfiltrationFixture(t)
	plain, err := engine.New(ctx, engine.Registry(reg))
	require.NoError(t, err)
	assert.False(t, plain.FactOptions().Flows, "the shipped policies read no flows")
	doc, err := plain.Input(ctx, engine.Request{History: h})
	require.NoError(t, err)
	assert.NotContains(t, doc.(map[string]any)["facts"], "flow_index_truncated")
	for _, c := range doc.(map[string]any)["dispatch"].(map[string]any)["calls"].([]any) {
		assert.NotContains(t, c, "flows")
	}

	require.True(t, eng.FactOptions().Flows)
	d, err := eng.Decide(ctx, engine.Request{History: h})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"x1": "execute", "x2": "approval_required"}, verdicts(d))
	full, err := d.InputDocument()
	require.NoError(t, err)
	raw, err := json.Marshal(full)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, false, back["facts"].(map[string]any)["flow_index_truncated"])
	calls := back["dispatch"].(map[string]any)["calls"].([]any)
	assert.Equal(t, []any{}, calls[0].(map[string]any)["flows"])
	b, err := json.Marshal(calls[1].(map[string]any)["flows"])
	require.NoError(t, err)
	assert.JSONEq(t, `[{"path": "/to", "match": "contains", "token": null, "whole": false, "source":
		{"kind": "tool-return", "tool_call_id": "v1", "tool": "secret_op", "labels": ["secret"], "message": 4, "part": 0}}]`, string(b))

	assert.Equal(t, full, inputDecidedAgain(t, ctx, eng, any(back)))

	// A logged input whose flows are malformed is refused with its pointer.
	calls[1].(map[string]any)["flows"] = []any{map[string]any{"path": "/to", "match": "similar"}}
	_, _, _, err = engine.FactsFromInput(any(back))
	require.ErrorContains(t, err, "/dispatch/calls/1/flows/0/match")
}

// TestFlowsFromFactsOrHistory: facts without flows (a tracker asked for
// none) are completed from the history; without a history the decision
// fails closed, never decided as if no value flowed.
func TestFlowsFromFactsOrHistory(t *testing.T) {
	ctx := context.Background()
	eng, reg, h := exfiltrationFixture(t)
	f := facts.Derive(h, reg)
	d, err := eng.Decide(ctx, engine.Request{Facts: &f, History: h})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"x1": "execute", "x2": "approval_required"}, verdicts(d))
	assert.Nil(t, f.Dispatch.Calls[1].Flows, "the caller's facts are not written")
	d, err = eng.Decide(ctx, engine.Request{Facts: &f})
	require.NoError(t, err)
	require.NotEmpty(t, d.Errors)
	assert.Contains(t, d.Errors[0], "input.call.flows")
	for _, c := range d.Calls {
		assert.NotEqual(t, "execute", c.Verdict, "a call of a fail-closed decision")
	}
}

// TestRunFindsFlows: a Run's steps (the tracker's incremental index)
// decide as Decide does on every prefix; the minimum length and the cap
// are the engine's options.
func TestRunFindsFlows(t *testing.T) {
	ctx := context.Background()
	for note, tc := range map[string]struct {
		opts []engine.Option
		want map[string]string
	}{
		"defaults": {nil, map[string]string{"x1": "execute", "x2": "approval_required"}},
		// The secret is 20 bytes: a longer minimum finds no flow.
		"a minimum longer than the secret":  {[]engine.Option{engine.FlowMinLength(21)}, map[string]string{"x1": "execute", "x2": "execute"}},
		"the minimum as long as the secret": {[]engine.Option{engine.FlowMinLength(20)}, map[string]string{"x1": "execute", "x2": "approval_required"}},
		// A truncated index: the policy fails closed on every transfer.
		"a tiny cap": {[]engine.Option{engine.FlowIndexCap(10)}, map[string]string{"x1": "approval_required", "x2": "approval_required"}},
	} {
		eng, _, h := exfiltrationFixture(t, tc.opts...)
		run := eng.NewRun()
		var last map[string]string
		for n := 1; n <= len(h); n++ {
			sd, err := run.Step(ctx, h[n-1:n], nil)
			require.NoError(t, err)
			d, err := eng.Decide(ctx, engine.Request{History: h[:n]})
			require.NoError(t, err)
			last = verdicts(sd)
			assert.Equal(t, verdicts(d), last, "%s: prefix of %d messages", note, n)
		}
		assert.Equal(t, tc.want, last, note)
	}
}

// TestFlowOptionsAreChecked: a minimum length or cap below 1 is refused.
func TestFlowOptionsAreChecked(t *testing.T) {
	reg, err := loader.ReadRegistry("../examples/registry.yaml")
	require.NoError(t, err)
	for _, o := range []engine.Option{engine.FlowMinLength(-1), engine.FlowIndexCap(-5)} {
		_, err := engine.New(context.Background(), engine.Registry(reg), o)
		require.ErrorContains(t, err, "must be at least 1")
	}
}

// TestFactOptionsFollowWhatPoliciesReadFlows: the engine builds flows for
// a policy set that may read them, whichever way it refers to them, and
// for no other. It errs on the side of reading: a rule that hands
// input.call as a whole to its own function, or reads the calls as a
// whole, may read them; handing it to a function of the shipped library
// that reads no flows (the budgets example's lib.call_count) does not.
func TestFactOptionsFollowWhatPoliciesReadFlows(t *testing.T) {
	ctx := context.Background()
	reg, _ := budgetFixture(t)
	cases := map[string]struct {
		text string
		want bool
	}{
		"input.call.flows": {`package policycheck.rules.x

deny contains "flow" if count(input.call.flows) > 0
`, true},
		"the dispatch's calls": {`package policycheck.rules.x

deny contains "flow" if {
	some c in input.dispatch.calls
	count(c.flows) > 0
}
`, true},
		"the truncation fact": {`package policycheck.rules.x

deny contains "truncated" if input.facts.flow_index_truncated
`, true},
		"through the library": {`package policycheck.rules.x

import data.policycheck.lib

deny contains "secret" if count(lib.flows_labelled(input.call, "secret")) > 0
`, true},
		"the call to a function of the library that reads no flows": {budgetRules, false},
		"the call to a function of the policy's own": {`package policycheck.rules.x

deny contains "flow" if odd(input.call)

odd(c) if count(c.flows) > 0
`, true},
		"the calls as a whole": {`package policycheck.rules.x

deny contains "many" if count(input.dispatch.calls) > 1
`, true},
		"other fields of the call": {`package policycheck.rules.x

deny contains "big" if {
	input.call.tool == "transfer_funds"
	input.call.args.amount > 10
	some c in input.dispatch.calls
	c.tool == "get_time"
}
`, false},
	}
	for note, tc := range cases {
		eng, err := engine.New(ctx, engine.Registry(reg), engine.Modules(engine.Source{File: "x.rego", Text: tc.text}))
		require.NoError(t, err, note)
		assert.Equal(t, tc.want, eng.FactOptions().Flows, note)
	}
}

// TestFlowsFromPromptsAndTokens: a value copied from the user's prompt
// (a list of strings: each one counts)
// flows from a "user-prompt" source (tool and tool_call_id null, no
// labels), and with engine.FlowTokens an IBAN cut out of a returned
// string and re-spaced flows by token ("iban"); the logged input
// document is read back to the same decision.
func TestFlowsFromPromptsAndTokens(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ReadRegistry("../examples/registry.yaml")
	require.NoError(t, err)
	id := func(s string) (string, bool) { return s, true }
	ret, hasRet := id("v1")
	call, hasCall := id("x1")
	h := facts.History{
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt, Content: []byte(`["pay the invoice from", "ops-payroll-2026"]`)}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "secret_op", ToolCallID: ret, HasToolCallID: hasRet, Args: []byte(`{"name":"k"}`)}}},
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.ToolReturn, ToolName: "secret_op", ToolCallID: ret, HasToolCallID: hasRet,
			Content: []byte(`"Invoice 7731. Pay to GB29 NWBK 6016 1331 9268 19 by Friday."`)}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "transfer_funds", ToolCallID: call, HasToolCallID: hasCall,
			Args: []byte(`{"from":"ops-payroll-2026","to":"GB29NWBK60161331926819"}`)}}},
	}
	flowsOf := func(opts ...engine.Option) string {
		eng, err := engine.New(ctx, append([]engine.Option{engine.Registry(reg), engine.PolicyPaths("../examples/policies/exfiltration")}, opts...)...)
		require.NoError(t, err)
		d, err := eng.Decide(ctx, engine.Request{History: h})
		require.NoError(t, err)
		full, err := d.InputDocument()
		require.NoError(t, err)
		raw, err := json.Marshal(full)
		require.NoError(t, err)
		var back map[string]any
		require.NoError(t, json.Unmarshal(raw, &back))
		f, ctxDoc, approvals, err := engine.FactsFromInput(any(back))
		require.NoError(t, err)
		again, err := eng.Decide(ctx, engine.Request{Facts: f, Context: ctxDoc, Approvals: approvals})
		require.NoError(t, err)
		assert.Equal(t, verdicts(d), verdicts(again))
		b, err := json.Marshal(back["dispatch"].(map[string]any)["calls"].([]any)[0].(map[string]any)["flows"])
		require.NoError(t, err)
		return string(b)
	}
	eng, err := engine.New(ctx, engine.Registry(reg), engine.PolicyPaths("../examples/policies/exfiltration"), engine.FlowTokens(true))
	require.NoError(t, err)
	x, err := eng.Explain(ctx, engine.Request{History: h})
	require.NoError(t, err)
	require.Len(t, x.Calls, 1)
	assert.Contains(t, x.Calls[0].Why, `argument "/from" holds a value of the user-prompt at message 0, part 0`)
	assert.Contains(t, x.Calls[0].Why, `argument "/to" is, as a whole, a token (iban) of a string returned by "secret_op" (tool_call_id "v1", labels "secret") at message 2, part 0`)
	prompt := `{"path": "/from", "match": "exact", "token": null, "whole": true,
		"source": {"kind": "user-prompt", "tool_call_id": null, "tool": null, "labels": [], "message": 0, "part": 0}}`
	assert.JSONEq(t, `[`+prompt+`]`, flowsOf())
	assert.JSONEq(t, `[`+prompt+`, {"path": "/to", "match": "token", "token": "iban", "whole": true,
		"source": {"kind": "tool-return", "tool_call_id": "v1", "tool": "secret_op", "labels": ["secret"], "message": 2, "part": 0}}]`,
		flowsOf(engine.FlowTokens(true)))
}
