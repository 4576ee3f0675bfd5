package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
)

// TestAcceptedRuleShapesAreEnforced: each deny and hide shape the
// contract accepts does what it says (none reads as "nothing to deny").
func TestAcceptedRuleShapesAreEnforced(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	h := mustHistory(t, wReq(wUser("hi")), wResp("", wCall("get_time", "c1", `{}`)))
	cases := []struct {
		note, rule string
		verdict    string
		message    string
		reason     string
	}{
		{"deny if", `deny if input.call.tool == "get_time"`, engine.Denied,
			"may not be called here", "policycheck.rules.x (rules/x.rego:3:1): policycheck.rules.x.deny is true"},
		{"deny := true", `deny := true`, engine.Denied, "may not be called here", "deny is true"},
		{"default false then true", "default deny := false\n\ndeny := true if input.call.tool == \"get_time\"", engine.Denied, "", "deny is true"},
		{"default false alone", "default deny := false", engine.Execute, "", ""},
		{"Conftest string", `deny contains msg if { input.call.tool == "get_time"; msg := "no clocks" }`, engine.Denied,
			"no clocks", "policycheck.rules.x (rules/x.rego:3:1): no clocks"},
		{"deny set value", `deny := {"no clocks"} if input.call.tool == "get_time"`, engine.Denied, "no clocks", "no clocks"},
		{"hide set value", `hide := {"get_time"}`, engine.UnknownTool, "Unknown tool name", "hidden"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			e := mustEngine(t, reg, engine.Modules(engine.Source{File: "rules/x.rego", Text: "package policycheck.rules.x\n\n" + tc.rule + "\n"}))
			d := mustDecide(t, e, h, nil)
			require.Empty(t, d.Errors)
			c := d.Calls[0]
			assert.Equal(t, tc.verdict, c.Verdict)
			assert.Contains(t, c.Message, tc.message)
			assert.Contains(t, strings.Join(c.Reasons, "\n"), tc.reason)
		})
	}
}

// TestRuleValuesOfRefusedTypeFailClosed: a value whose type only run time
// shows fails the decision closed, and the error names the operator's
// rule (package, file, row), never the shipped gate.
func TestRuleValuesOfRefusedTypeFailClosed(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	h := mustHistory(t, wReq(wUser("hi")), wResp("", wCall("get_time", "c1", `{"n": 42}`)))
	cases := []struct{ note, rule, want string }{
		{"deny element a number", "deny contains x if x := input.call.args.n",
			// docs/writing-filters.md shows this message.
			`operator rule policycheck.rules.x.deny (rules/x.rego:3:1) yielded 42, which is not a denial: ` +
				`an object {"reason": ..., "message": ...} of strings, a string, or a boolean deny: the decision fails closed`},
		{"deny value a string", "deny := json.unmarshal(`\"no\"`)",
			`policycheck.rules.x.deny (rules/x.rego:3:1) yielded "no"`},
		{"deny object with a number message", `deny contains {"reason": "r", "message": input.call.args.n}`,
			`yielded {"message":42,"reason":"r"}`},
		{"hide value a string", "hide := json.unmarshal(`\"get_time\"`)",
			`policycheck.rules.x.hide (rules/x.rego:3:1) yielded "get_time", which is not a set of tool names`},
		{"hide element a number", "hide contains x if x := json.unmarshal(`1`)",
			"policycheck.rules.x.hide (rules/x.rego:3:1) yielded [1]"},
		{"hide of a framework tool computed at run time", "hide contains x if x := concat(\"_\", [\"search\", \"tools\"])",
			`policycheck.rules.x.hide (rules/x.rego:3:1) yielded ["search_tools"], which is not a set of tool names (none of them load_capability or search_tools`},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			e := mustEngine(t, reg, engine.Modules(engine.Source{File: "rules/x.rego", Text: "package policycheck.rules.x\n\n" + tc.rule + "\n"}))
			d := mustDecide(t, e, h, nil)
			assertFailedClosed(t, reg, d)
			all := strings.Join(d.Errors, "\n")
			assert.Contains(t, all, tc.want)
			assert.NotContains(t, all, "gate.rego")
		})
	}
}

// TestRulesAReplacementNeverReadsAreRefused: a replacement availability
// policy that does not read data.policycheck.rules would ignore every
// deny and hide: such rules are refused at load, not silently dropped.
func TestRulesAReplacementNeverReadsAreRefused(t *testing.T) {
	reg := mustRegistry(t, opsRegistry)
	replacement := engine.Source{File: "operator/availability.rego", Text: `package policycheck.availability

decision := {"available": set(), "advertised": set(), "dispatch_available": set(), "verdicts": []}
`}
	rule := engine.Source{File: "rules/x.rego", Text: "package policycheck.rules.x\n\ndeny if input.call.tool == \"get_time\"\n"}
	_, err := engine.New(context.Background(), engine.Registry(reg), engine.WithoutDefaults(), engine.Modules(replacement, rule))
	var pe *engine.PolicyError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "rule_place", pe.Errors[0].Code)
	assert.Contains(t, err.Error(), "rules/x.rego:3:1: rule_place: policycheck.rules.x.deny is never read")

	// The shipped policies read it.
	_, err = engine.New(context.Background(), engine.Registry(reg), engine.Modules(rule))
	require.NoError(t, err)
}

// TestEngineReadsDecisionFromSets: a policy set that defines
// policycheck.availability.decision_from_sets is decided by it (the
// engine's documents hold sets), and one whose decision does not read it
// is refused at load rather than decided by a rule stock opa never sees.
func TestEngineReadsDecisionFromSets(t *testing.T) {
	ctx := context.Background()
	reg := mustRegistry(t, opsRegistry)
	h := mustHistory(t, wReq(wUser("hi")), wResp("", wCall("get_time", "c1", `{}`)))
	const fromSets = `decision_from_sets := {"available": {"get_time"}, "advertised": {"get_time"}, ` +
		`"dispatch_available": {"get_time"}, "verdicts": [{"verdict": "execute", "rule": "gate"} | some _ in input.dispatch.calls]}`
	policy := func(decision string) engine.Option {
		return engine.Modules(engine.Source{File: "avail.rego",
			Text: "package policycheck.availability\n\n" + decision + "\n\n" + fromSets + "\n"})
	}
	// decision is undefined for every document the engine hands: only
	// decision_from_sets can decide.
	e, err := engine.New(ctx, engine.Registry(reg), engine.WithoutDefaults(),
		policy("decision := decision_from_sets if input.never_set"))
	require.NoError(t, err)
	d := mustDecide(t, e, h, nil)
	require.Empty(t, d.Errors)
	assert.Equal(t, []string{"get_time"}, d.Available)
	require.Len(t, d.Calls, 1)
	assert.Equal(t, engine.Execute, d.Calls[0].Verdict)

	_, err = engine.New(ctx, engine.Registry(reg), engine.WithoutDefaults(),
		policy(`decision := {"available": set(), "advertised": set(), "dispatch_available": set(), "verdicts": []}`))
	var pe *engine.PolicyError
	require.ErrorAs(t, err, &pe)
	require.Len(t, pe.Errors, 1)
	assert.Equal(t, "avail.rego", pe.Errors[0].File)
	assert.Contains(t, pe.Errors[0].Message, "does not depend on it")
}

// TestPolicyResultOfWrongTypeFailsClosed: the policy's decision document
// is decoded once into typed values, and a key of a type the engine does
// not read (a value only run time shows: here, from input.context) fails
// the decision closed, naming the key, instead of reading as empty.
func TestPolicyResultOfWrongTypeFailsClosed(t *testing.T) {
	ctx := context.Background()
	reg := mustRegistry(t, opsRegistry)
	h := mustHistory(t, wReq(wUser("hi")), wResp("", wCall("get_time", "c1", `{}`)))
	const policy = `package policycheck.availability

decision := {
	"available": {"get_time"}, "advertised": {"get_time"}, "dispatch_available": {"get_time"},
	"verdicts": [object.union({"verdict": "execute", "rule": "gate"}, input.context.extra) | some _ in input.dispatch.calls],
	"hidden": input.context.hidden,
}
`
	e, err := engine.New(ctx, engine.Registry(reg), engine.WithoutDefaults(),
		engine.Modules(engine.Source{File: "avail.rego", Text: policy}))
	require.NoError(t, err)
	cases := []struct {
		note string
		ctx  map[string]any
		want string
	}{
		{"well typed", map[string]any{"extra": map[string]any{"reason": "ok"}, "hidden": []any{}}, ""},
		{"reason a number", map[string]any{"extra": map[string]any{"reason": 5}, "hidden": []any{}},
			"policy decision: verdict 0: reason must be a string"},
		{"verdict a list", map[string]any{"extra": map[string]any{"verdict": []any{"execute"}}, "hidden": []any{}},
			"policy decision: verdict 0: verdict must be a string"},
		{"by an object", map[string]any{"extra": map[string]any{"by": map[string]any{"rule": "hide"}}, "hidden": []any{}},
			"policy decision: verdict 0: by must be an array"},
		{"denials of strings", map[string]any{"extra": map[string]any{"denials": []any{"no"}}, "hidden": []any{}},
			"policy decision: verdict 0: denials: holds \"no\", not an object"},
		{"hidden a string", map[string]any{"extra": map[string]any{}, "hidden": "get_time"},
			"policy decision: hidden must be a set of tool names"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			d := mustDecide(t, e, h, tc.ctx)
			require.Len(t, d.Calls, 1)
			if tc.want == "" {
				require.Empty(t, d.Errors)
				assert.Equal(t, engine.Execute, d.Calls[0].Verdict)
				return
			}
			assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
			assert.True(t, d.Calls[0].FailClosed)
			assert.Empty(t, d.Available)
			assert.Contains(t, strings.Join(d.Errors, "\n"), tc.want)
		})
	}
}
