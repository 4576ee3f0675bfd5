// Package approvalcases holds the table of approval bindings that must
// never let a call through (issue 14's "done means"), as request
// documents: the CLI's tests run them through `policycheck eval
// --approvals` and the sidecar's through /v1/decide and the run endpoint,
// so that both entry points are held to the same table; trust's tests
// check each case's digests beside trust.CallDigest.
package approvalcases

import (
	"encoding/json"
	"fmt"

	"github.com/policycheck/policycheck/trust"
)

// Registry is the registry of every case (YAML): two always-on tools and
// a deferred capability's tool.
const Registry = `capabilities:
  - id: vault
    defer_loading: true
tools:
  - name: transfer_funds
  - name: pay_invoice
  - name: secret_op
    capability: vault
`

// PolicyFile and Policy are the operator rules of every case: every call
// needs an approval, and no approval lets a transfer above 50000 through.
const PolicyFile = "approval_cases.rego"

// Policy is the Rego source of PolicyFile.
const Policy = `# METADATA
# title: Approval cases
# description: Every call needs an approval; nothing above 50000 passes.
package policycheck.rules.approval_cases

# METADATA
# title: require_approval
# description: Every call needs an approval bound to it.
require_approval contains {"reason": sprintf("%s needs an approval", [input.call.tool]), "message": "Approve this call?"} if {
	not input.call.approval.kind == "tool-approved"
}

# METADATA
# title: deny
# description: Nothing above the hard limit, approved or not.
deny contains {"reason": "above the hard limit of 50000", "message": "Transfers above 50000 are never made."} if {
	input.call.args.amount > 50000
}
`

// Case is one request and what must become of the calls of its last
// response (all of them get the same verdict).
type Case struct {
	Name string
	// History is the pydantic-ai message history (JSON).
	History []byte
	// Approvals is DeferredToolResults.approvals with digests (JSON).
	Approvals []byte
	// Verdict is the verdict every call of the last response must get.
	Verdict string
	// Applied is whether the approval must apply.
	Applied bool
	// Why is part of the approval outcome's why (or of the call's
	// message, for a denial).
	Why string
	// Message is part of the call's message ("" for none).
	Message string
}

func call(id, tool string, args map[string]any) map[string]any {
	return map[string]any{"part_kind": "tool-call", "tool_name": tool, "tool_call_id": id, "args": args}
}

// History returns a history whose last response holds calls.
func History(calls ...map[string]any) []byte {
	return Later(nil, calls...)
}

// Later returns a history of a later step: a user prompt, a response
// holding earlier, a request holding an outcome of each of them (a
// tool-return, or a retry-prompt for a call whose tool is pay_invoice),
// and a last response holding calls. Without earlier it is History.
func Later(earlier []map[string]any, calls ...map[string]any) []byte {
	h := []any{map[string]any{"kind": "request", "parts": []any{map[string]any{"part_kind": "user-prompt", "content": "pay"}}}}
	if len(earlier) > 0 {
		parts, outcomes := make([]any, len(earlier)), make([]any, len(earlier))
		for i, c := range earlier {
			parts[i] = c
			outcomes[i] = map[string]any{"part_kind": "tool-return", "tool_name": c["tool_name"], "tool_call_id": c["tool_call_id"], "content": "done"}
			if c["tool_name"] == "pay_invoice" {
				outcomes[i] = map[string]any{"part_kind": "retry-prompt", "tool_name": c["tool_name"], "tool_call_id": c["tool_call_id"], "content": "try again"}
			}
		}
		h = append(h, map[string]any{"kind": "response", "parts": parts}, map[string]any{"kind": "request", "parts": outcomes})
	}
	parts := make([]any, len(calls))
	for i, c := range calls {
		parts[i] = c
	}
	h = append(h, map[string]any{"kind": "response", "parts": parts})
	b, err := json.Marshal(h)
	if err != nil {
		panic(err)
	}
	return b
}

// Digest is the digest the decision hands out for a call.
func Digest(id, tool string, args map[string]any) string {
	raw, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return trust.CallDigest(&id, tool, raw)
}

func approvals(m map[string]any) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// Cases returns the table. The first case is the control: a bound
// approval executes, so the refusals of the others are the binding's.
func Cases() []Case {
	pay := map[string]any{"from": "ops", "to": "savings", "amount": 5000}
	more := map[string]any{"from": "ops", "to": "savings", "amount": 5001}
	approved := func(digest string, extra map[string]any) map[string]any {
		a := map[string]any{"kind": "tool-approved", "digest": digest, "approvers": []any{"ana"}}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	shown := Digest("t2", "transfer_funds", pay)
	const mismatch = "not what the approver was shown"
	return []Case{
		{Name: "a bound approval executes (control)",
			History:   History(call("t2", "transfer_funds", pay)),
			Approvals: approvals(map[string]any{"t2": approved(shown, nil)}),
			Verdict:   "execute", Applied: true, Why: "applied: approved by ana"},
		{Name: "an approval replayed onto a different tool_call_id",
			History:   History(call("t3", "transfer_funds", pay)),
			Approvals: approvals(map[string]any{"t3": approved(shown, nil)}),
			Verdict:   "approval_required", Why: mismatch},
		{Name: "the same id with another tool",
			History:   History(call("t2", "pay_invoice", pay)),
			Approvals: approvals(map[string]any{"t2": approved(shown, nil)}),
			Verdict:   "approval_required", Why: mismatch},
		{Name: "the same id with changed arguments",
			History:   History(call("t2", "transfer_funds", more)),
			Approvals: approvals(map[string]any{"t2": approved(shown, nil)}),
			Verdict:   "approval_required", Why: mismatch},
		{Name: "an approval for a call that is not available",
			History:   History(call("t2", "secret_op", pay)),
			Approvals: approvals(map[string]any{"t2": approved(Digest("t2", "secret_op", pay), nil)}),
			Verdict:   "not_available_yet", Why: "an approval never widens availability"},
		{Name: "an override that a deny rule forbids",
			History: History(call("t2", "transfer_funds", pay)),
			Approvals: approvals(map[string]any{"t2": approved(shown, map[string]any{
				"override_args": map[string]any{"from": "ops", "to": "savings", "amount": 60000}})}),
			Verdict: "denied", Why: "operator deny rules refuse", Message: "Transfers above 50000 are never made."},
		{Name: "an approval for an id no call has",
			History:   History(call("t2", "transfer_funds", pay)),
			Approvals: approvals(map[string]any{"t9": approved(shown, nil)}),
			Verdict:   "approval_required", Why: fmt.Sprintf("no call of the dispatched response has tool_call_id %q", "t9")},
		{Name: "two calls sharing the approved tool_call_id",
			History:   History(call("t2", "transfer_funds", pay), call("t2", "transfer_funds", pay)),
			Approvals: approvals(map[string]any{"t2": approved(shown, nil)}),
			Verdict:   "approval_required", Why: `duplicate tool_call_id "t2": calls 0 and 1`},
		{Name: "two calls sharing the approved tool_call_id, one with other arguments",
			History:   History(call("t2", "transfer_funds", more), call("t2", "transfer_funds", pay)),
			Approvals: approvals(map[string]any{"t2": approved(shown, nil)}),
			Verdict:   "approval_required", Why: `duplicate tool_call_id "t2": calls 0 and 1`},
		{Name: "a denial for a tool_call_id two calls share",
			History: History(call("t2", "transfer_funds", pay), call("t2", "transfer_funds", pay)),
			Approvals: approvals(map[string]any{"t2": map[string]any{"kind": "tool-denied", "digest": shown,
				"message": "Not this month.", "approvers": []any{"bo"}}}),
			Verdict: "approval_required", Why: `duplicate tool_call_id "t2": calls 0 and 1`},
		{Name: "an approval used again on a later step",
			History:   Later([]map[string]any{call("t2", "transfer_funds", pay)}, call("t2", "transfer_funds", pay)),
			Approvals: approvals(map[string]any{"t2": approved(shown, nil)}),
			Verdict:   "approval_required", Why: `already used: the history holds the outcome of a call with tool_call_id "t2" (message 2, part 0)`},
		{Name: "an approval used again after a retry prompt",
			History:   Later([]map[string]any{call("t2", "pay_invoice", pay)}, call("t2", "pay_invoice", pay)),
			Approvals: approvals(map[string]any{"t2": approved(Digest("t2", "pay_invoice", pay), nil)}),
			Verdict:   "approval_required", Why: `already used: the history holds the outcome of a call with tool_call_id "t2" (message 2, part 0)`},
		{Name: "an approver's denial",
			History: History(call("t2", "transfer_funds", pay)),
			Approvals: approvals(map[string]any{"t2": map[string]any{"kind": "tool-denied", "digest": shown,
				"message": "Not this month.", "approvers": []any{"bo"}}}),
			Verdict: "denied", Applied: true, Why: "applied: denied by bo", Message: "Not this month."},
	}
}
