package engine

import (
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/trust"
)

// ApprovalsGiven returns the approvals the request carried, as the
// decision was made with them (after a signature check, package
// trust, where one ran: each with its Verification); nil when it
// carried none. Treat them as read-only.
func (d *Decision) ApprovalsGiven() facts.Approvals { return d.approvals }

// ExecutionDigest returns the trust.CallDigest of call i of the decision over
// its tool_call_id, its tool and the arguments it executes with: the
// approver's override_args where an applied approval replaced them, the
// call's own arguments otherwise. It is what an execution receipt signs
// (package trust); ok is false unless call i executes.
func (d *Decision) ExecutionDigest(i int) (digest string, ok bool) {
	if i < 0 || i >= len(d.Calls) || d.Calls[i].Verdict != Execute || d.facts == nil || d.facts.Dispatch == nil {
		return "", false
	}
	c := &d.Calls[i]
	args := d.facts.Dispatch.Calls[i].Args
	if b := at(d.binds, i); b != nil && c.Approval != nil && c.Approval.Applied && b.approval.OverrideArgs != nil {
		args = b.approval.OverrideArgs
	}
	return trust.CallDigest(c.ToolCallID, c.Tool, args), true
}
