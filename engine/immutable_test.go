package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
	"github.com/policycheck/policycheck/trust"
)

// snapshotOf is everything a caller can read of d: its JSON, the fields
// the JSON leaves out, and the facts it was made on.
func snapshotOf(t testing.TB, d *engine.Decision) string {
	t.Helper()
	type call struct {
		Part             int
		Capability, Rule string
		FailClosed       bool
		By               []engine.Decider
		ExecDigest       string
		ExecDigestOK     bool
		RemovedBy        []string
	}
	extra := struct {
		Decision               *engine.Decision
		Calls                  []call
		Policy, Registry       string
		Step                   int
		Retries                []engine.Retry
		FailedClosed, Panicked bool
		Facts                  *facts.Facts
		Approvals              facts.Approvals
	}{Decision: d, Policy: d.PolicyRevision, Registry: d.RegistryRevision, Step: d.Step, Retries: d.Retries,
		FailedClosed: d.FailedClosed(), Panicked: d.Panicked(), Facts: d.FactsUsed(), Approvals: d.ApprovalsGiven()}
	for i, c := range d.Calls {
		digest, ok := d.ExecutionDigest(i)
		extra.Calls = append(extra.Calls, call{c.Part, c.Capability, c.Rule, c.FailClosed, c.DecidedByOperator(), digest, ok, d.Removed(c.Tool)})
	}
	raw, err := json.Marshal(extra)
	require.NoError(t, err)
	return string(raw)
}

// TestDecisionIsNeverChangedAfterReturn: a Decision is built in one place
// (the assemble stage) and never changed once returned, by Decide,
// Explain, Run.Step or Run.StepWith, with approvals applied and receipts
// signed (WithReceipts, which replaced the Stamp that wrote receipts into
// a returned decision). Everything that could reach a returned decision
// runs afterwards: more decisions on the same engine (the decision memo
// and the filter cache answer them), the run's next steps and a same-step
// rebuild (its facts views share storage with the run's tracker), the
// lazy reads of explanations, digests, serialisation; each decision is
// the value it was when it came back. StepWith's last word sees the
// decision it returns, final: receipts, step and retries included.
func TestDecisionIsNeverChangedAfterReturn(t *testing.T) {
	ctx := context.Background()
	reg, eng, req := receiptcases.Refund(t, "..")
	signer, err := trust.NewSigner(receiptcases.Key(1))
	require.NoError(t, err)
	plain, err := eng.Decide(ctx, req)
	require.NoError(t, err)
	approvals := facts.Approvals{}
	for _, c := range plain.Calls {
		if c.Digest != "" { // a deny rule that an approval may lift
			approvals[*c.ToolCallID] = facts.Approval{Kind: facts.ToolApproved, Digest: c.Digest, Approvers: []string{"ops"}}
		}
	}
	require.NotEmpty(t, approvals, "the refund example denies a call an approval may lift")

	var held []*engine.Decision
	var snaps []string
	hold := func(d *engine.Decision) {
		held = append(held, d)
		snaps = append(snaps, snapshotOf(t, d))
	}
	hold(plain)
	opts := []engine.DecideOption{engine.WithApprovals(approvals), engine.WithReceipts(signer, "")}
	d, err := eng.Decide(ctx, req, opts...)
	require.NoError(t, err)
	receipts, executes := 0, 0
	for _, c := range d.Calls {
		if c.Receipt != "" {
			receipts++
		}
		if c.Verdict == engine.Execute {
			executes++
		}
	}
	require.GreaterOrEqual(t, receipts, 2)
	require.Equal(t, executes, receipts, "every execute is signed as the decision is assembled")
	hold(d)
	x, err := eng.Explain(ctx, req, opts...)
	require.NoError(t, err)
	hold(x.Decision)

	run := eng.NewRun()
	runOpts := []engine.DecideOption{engine.WithApprovals(approvals), engine.WithReceipts(signer, "run-1")}
	for i := range req.History {
		var seen *engine.Decision
		var seenSnap string
		sd, err := run.StepWith(ctx, req.History[i:i+1], req.Context, func(d *engine.Decision) error {
			seen, seenSnap = d, snapshotOf(t, d)
			return nil
		}, runOpts...)
		require.NoError(t, err)
		require.Same(t, seen, sd, "StepWith's last word sees the decision it returns")
		require.Equal(t, seenSnap, snapshotOf(t, sd), "the decision changed between StepWith's last word and its return")
		hold(sd)
	}
	require.Positive(t, held[len(held)-1].Step)

	// Everything that could reach a returned decision, once more.
	_, err = run.Step(ctx, nil, req.Context, runOpts...) // a same-step rebuild
	require.NoError(t, err)
	_, err = run.Step(ctx, []facts.Message{{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt}}}}, req.Context)
	require.NoError(t, err)
	for range 2 {
		for _, o := range [][]engine.DecideOption{nil, opts} {
			again, err := eng.Decide(ctx, req, o...)
			require.NoError(t, err)
			_, err = again.InputDocument()
			require.NoError(t, err)
		}
	}
	for _, d := range held {
		for _, name := range reg.ToolNames() {
			d.Removed(name)
		}
		_, err := json.Marshal(d)
		require.NoError(t, err)
	}
	for i, d := range held {
		require.Equal(t, snaps[i], snapshotOf(t, d), "decision %d changed after it was returned", i)
	}
}
