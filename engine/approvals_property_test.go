package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/racetest"
	"github.com/policycheck/policycheck/trust"
)

// approvalRules asks an approval for every registry tool call (framework
// calls run as before), satisfied by any bound approval.
var approvalRules = engine.Source{File: "rules/approve.rego", Text: `package policycheck.rules.approve

require_approval contains {"reason": "every call needs an approval", "message": "Approve?"} if {
	not input.call.tool in {"load_capability", "search_tools"}
	not input.call.approval.kind == "tool-approved"
}
`}

// forgedApprovals answers each call of the response at random: with the
// digest the call really has, or one of another id, another tool or other
// arguments; approved or denied; and adds approvals for ids no call has.
// It returns the approvals and, per id, whether its digest is the call's.
func forgedApprovals(r *rand.Rand, calls []facts.Call) facts.Approvals {
	out := facts.Approvals{}
	for _, c := range calls {
		if c.ToolCallID == nil || r.IntN(5) == 0 {
			continue
		}
		id := *c.ToolCallID
		digest := trust.CallDigest(c.ToolCallID, c.Tool, c.Args)
		switch r.IntN(5) {
		case 1: // approved for another id
			other := id + "x"
			digest = trust.CallDigest(&other, c.Tool, c.Args)
		case 2: // for another tool
			digest = trust.CallDigest(c.ToolCallID, c.Tool+"_other", c.Args)
		case 3: // for other arguments
			digest = trust.CallDigest(c.ToolCallID, c.Tool, []byte(`{"changed": true}`))
		}
		a := facts.Approval{Kind: facts.ToolApproved, Digest: digest, Approvers: []string{"p"}}
		if r.IntN(4) == 0 {
			a = facts.Approval{Kind: facts.ToolDenied, Digest: digest, Message: "no"}
		}
		if r.IntN(4) == 0 && a.Kind == facts.ToolApproved {
			a.OverrideArgs = []byte(`{"override": 1}`)
		}
		out[id] = a
	}
	for i := range r.IntN(3) {
		out[fmt.Sprintf("nobody-%d", i)] = facts.Approval{Kind: facts.ToolApproved, Digest: trust.CallDigest(nil, "x", nil)}
	}
	return out
}

// TestApprovalsNeverBypassTheBinding decides generated histories with
// forged and genuine approvals. A call executes on the strength of an
// approval only when its tool_call_id, tool and argument digest all match;
// a call the availability gate refuses stays refused whatever the
// approval; a bound denial denies; and an approval that did not apply
// says why.
func TestApprovalsNeverBypassTheBinding(t *testing.T) {
	ctx := context.Background()
	seeds := racetest.Size(24, 6) // one goroutine: in full without -race (scripts/test.sh)
	if testing.Short() {
		seeds = 6
	}
	// seen counts what the generated requests reached, so the property
	// cannot hold vacuously.
	seen := map[string]int{}
	for _, pc := range propertyCases(t, seeds) {
		e, err := engine.New(ctx, append(pc.opts, engine.Modules(approvalRules))...)
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(uint64(pc.seed), 0x61707072))
		for _, req := range pc.requests {
			if req.tracked.Dispatch == nil {
				continue
			}
			calls := req.tracked.Dispatch.Calls
			base, err := e.Decide(ctx, engine.Request{History: req.history, Context: req.context})
			require.NoError(t, err)
			approvals := forgedApprovals(r, calls)
			d, err := e.Decide(ctx, engine.Request{History: req.history, Context: req.context, Approvals: approvals})
			require.NoError(t, err)
			require.Len(t, d.Calls, len(calls))
			assert.Len(t, d.Approvals, len(approvals), req.name)
			for i, c := range d.Calls {
				before := base.Calls[i].Verdict
				call := calls[i]
				var a facts.Approval
				var has bool
				if call.ToolCallID != nil {
					a, has = approvals[*call.ToolCallID]
				}
				// An approval authorises one call occurrence: not a call
				// whose id another call of the response shares, nor one
				// repeating an id the history already holds an outcome for.
				unique := call.ToolCallID != nil && sharing(calls, *call.ToolCallID) == 1 && call.Answered == nil
				bound := has && unique && a.Digest == trust.CallDigest(call.ToolCallID, call.Tool, call.Args)
				where := fmt.Sprintf("%s call %d (%s): %s -> %s", req.name, i, c.Tool, before, c.Verdict)
				if before == engine.NotAvailableYet || before == engine.UnknownTool {
					assert.Equal(t, before, c.Verdict, "an approval never widens availability: %s", where)
				}
				if c.Verdict == engine.Execute && before != engine.Execute {
					assert.True(t, bound && a.Kind == facts.ToolApproved, "executed without a bound approval: %s", where)
					assert.True(t, c.Approval != nil && c.Approval.Applied, where)
				}
				if before == engine.ApprovalRequired {
					switch {
					case bound && a.Kind == facts.ToolApproved:
						assert.Equal(t, engine.Execute, c.Verdict, where)
					case bound:
						assert.Equal(t, engine.Denied, c.Verdict, where)
						assert.Equal(t, "no", c.Message, where)
					default:
						assert.Equal(t, engine.ApprovalRequired, c.Verdict, where)
						assert.NotEmpty(t, c.Digest, where)
					}
				}
				if has && c.Approval != nil && !c.Approval.Applied {
					assert.Contains(t, c.Approval.Why, "not applied", where)
				}
				switch {
				case before == engine.ApprovalRequired && bound && a.Kind == facts.ToolApproved:
					seen["executed on a bound approval"]++
				case before == engine.ApprovalRequired && has && !unique:
					seen["approval for a repeated id ignored"]++
				case before == engine.ApprovalRequired && has && !bound:
					seen["forged approval ignored"]++
				case (before == engine.NotAvailableYet || before == engine.UnknownTool) && bound && a.Kind == facts.ToolApproved:
					seen["bound approval for a refused call"]++
				case before == engine.Denied && has:
					seen["approval for a denied call"]++
				}
			}
		}
	}
	t.Logf("reached: %v", seen)
	for _, what := range []string{"executed on a bound approval", "forged approval ignored", "approval for a repeated id ignored", "bound approval for a refused call", "approval for a denied call"} {
		assert.Positive(t, seen[what], "the generated requests never reached %q", what)
	}
}

// sharing counts the calls with tool_call_id id.
func sharing(calls []facts.Call, id string) int {
	n := 0
	for _, c := range calls {
		if c.ToolCallID != nil && *c.ToolCallID == id {
			n++
		}
	}
	return n
}
