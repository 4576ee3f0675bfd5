package engine_test

import (
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
)

// BenchmarkDecideApprovals is BenchmarkDecideCallRules with a
// require_approval rule for transfers above 1000 beside the deny rules:
// without approvals (two calls approval_required), and with each of them
// answered by a bound approval (approvals=bound).
func BenchmarkDecideApprovals(b *testing.B) {
	rule := engine.Source{File: "approve.rego", Text: `package policycheck.rules.approve

require_approval contains {"reason": "above 1000", "message": "Approve?"} if {
	input.call.tool == "transfer_funds"
	input.call.args.amount > 1000
	not input.call.approval.kind == "tool-approved"
}
`}
	b.Run("approvals=none", func(b *testing.B) { benchCallRules(b, "none", []engine.Source{rule}, nil) })
	b.Run("approvals=bound", func(b *testing.B) {
		benchCallRules(b, "none", []engine.Source{rule}, func(d *engine.Decision) engine.Request {
			a := facts.Approvals{}
			for _, c := range d.Calls {
				if c.Verdict == engine.ApprovalRequired {
					a[*c.ToolCallID] = facts.Approval{Kind: facts.ToolApproved, Digest: c.Digest, Approvers: []string{"ana"}}
				}
			}
			if len(a) != 2 {
				b.Fatalf("%d calls asked for approval, want 2", len(a))
			}
			return engine.Request{Approvals: a}
		})
	})
}
