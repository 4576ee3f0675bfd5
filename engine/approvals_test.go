package engine_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/loader"
)

// TestRequireApprovalValueRefusedAtRunTime: a require_approval element of
// a shape the contract cannot see at load (its type hidden behind
// json.unmarshal) fails the decision closed, naming the rule. The empty
// array is the element the gate's every-check accepts vacuously: only its
// is_object check keeps it from object.get, whose type error the engine's
// strict builtin errors would report instead of the rule (a mutant that
// stock opa test, evaluating non-strict, cannot tell apart).
func TestRequireApprovalValueRefusedAtRunTime(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ParseRegistry("tools.yaml", []byte("tools:\n  - name: get_time\n"))
	require.NoError(t, err)
	for name, element := range map[string]string{"a string": `"please"`, "an empty array": `[]`} {
		t.Run(name, func(t *testing.T) {
			e, err := engine.New(ctx, engine.Registry(reg), engine.Modules(engine.Source{File: "ask.rego", Text: `package policycheck.rules.ask

require_approval contains x if {
	input.call.tool == "get_time"
	x := json.unmarshal(` + strconv.Quote(element) + `)
}
`}))
			require.NoError(t, err)
			d := mustDecide(t, e, mustHistory(t, wReq(wUser("time?")), wResp("", wCall("get_time", "c1", `{}`))), nil)
			require.Len(t, d.Calls, 1)
			assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
			require.NotEmpty(t, d.Errors)
			assert.Contains(t, d.Errors[0], "policycheck.rules.ask.require_approval (ask.rego:")
			assert.Contains(t, d.Errors[0], "an approval request")
		})
	}
}

// TestRequireApprovalRefusedAtLoad: a require_approval of a shape the gate
// does not read never loads.
func TestRequireApprovalRefusedAtLoad(t *testing.T) {
	reg, err := loader.ParseRegistry("tools.yaml", []byte("tools:\n  - name: get_time\n"))
	require.NoError(t, err)
	_, err = engine.New(context.Background(), engine.Registry(reg), engine.Modules(engine.Source{File: "ask.rego",
		Text: "package policycheck.rules.ask\n\nrequire_approval if input.call.tool == \"get_time\"\n"}))
	var pe *engine.PolicyError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "rule_shape", pe.Errors[0].Code)
	assert.Equal(t, "ask.rego", pe.Errors[0].File)
}
