package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
	"github.com/policycheck/policycheck/loader"
)

// TestRunVouchesOnlyForItsExecutes: in a Run with verified evidence, a
// search counts when the run judged its call execute, and not when the
// run judged it otherwise (an operator rule denied it) even though the
// harness ran it and wrote its return; nor when a re-decision of the same
// step (after a reload that denies it) replaced the execute.
func TestRunVouchesOnlyForItsExecutes(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ReadRegistry("../examples/registry.yaml")
	require.NoError(t, err)
	denySearch := engine.Source{File: "rules/nosearch.rego", Text: `package policycheck.rules.nosearch

deny contains {"reason": "no searching", "message": "No searching."} if input.call.tool == "search_tools"
`}
	whole, err := loader.DecodeHistory("h.json", receiptcases.EvidenceHistory(false, "s1", receiptcases.SearchArgs, "s1", nil), loader.DefaultLimits())
	require.NoError(t, err)
	require.Len(t, whole, 4)

	step := func(t *testing.T, e *engine.Engine, redecide func(*engine.Run)) *engine.Decision {
		t.Helper()
		run := e.NewRun(engine.RunVerifiedEvidence(nil, "r"))
		_, err := run.Step(ctx, whole[:2], nil)
		require.NoError(t, err)
		if redecide != nil {
			redecide(run)
		}
		d, err := run.Step(ctx, whole[2:], nil)
		require.NoError(t, err)
		require.Len(t, d.Calls, 1)
		return d
	}
	open := mustEngine(t, reg)
	d := step(t, open, nil)
	assert.Equal(t, engine.Execute, d.Calls[0].Verdict, "the run judged the search execute: it counts")
	assert.Empty(t, d.UnverifiedEvidence)

	denied := mustEngine(t, reg, engine.Modules(denySearch))
	d = step(t, denied, nil)
	assert.Equal(t, engine.NotAvailableYet, d.Calls[0].Verdict, "the run denied the search: its return counts for nothing")
	require.Len(t, d.UnverifiedEvidence, 1)
	assert.Contains(t, d.UnverifiedEvidence[0].Why, `this run never judged the search call "s1"`)

	// The same step decided again by policies that deny the search: the
	// latest decision of the step is what the run judged.
	d = step(t, open, func(run *engine.Run) {
		run.Rebind(denied)
		_, err := run.Step(ctx, nil, nil)
		require.NoError(t, err)
	})
	assert.Equal(t, engine.NotAvailableYet, d.Calls[0].Verdict)
	require.Len(t, d.UnverifiedEvidence, 1)

	// Without verified evidence the run takes the return on the client's
	// word, as before.
	plain := denied.NewRun()
	_, err = plain.Step(ctx, whole[:2], nil)
	require.NoError(t, err)
	pd, err := plain.Step(ctx, whole[2:], nil)
	require.NoError(t, err)
	assert.Equal(t, engine.Execute, pd.Calls[0].Verdict)
	assert.Nil(t, pd.UnverifiedEvidence)
}
