# METADATA
# title: Transfer approvals
# description: |
#   Argument-aware call rules with call-bound approvals: transfer_funds
#   above the limit needs a person's yes (require_approval), above the
#   second limit two different people's, and nothing lets an agent move
#   more than the hard limit (deny). An approval reaches these rules as
#   input.call.approval only when the engine bound it to this very call:
#   its tool_call_id, tool and arguments are what the approver was shown.
#   The rules see the arguments the call would execute with (an
#   approver's override_args), so an override is judged again.
#
#   The rules rely on transfer_funds's parameters_json_schema in the
#   registry (examples/registry.yaml): a call whose arguments lack from,
#   to or a numeric amount gets invalid_args and never reaches them, so
#   they read input.call.args.amount, .from and .to directly.
#   `policycheck check --registry` reports such a read against a registry
#   whose schema does not require the field.
package policycheck.rules.transfers

# METADATA
# title: limit
# description: The largest amount transferred without an approval.
limit := 1000

# METADATA
# title: two_approver_limit
# description: Above this amount a transfer needs two different approvers.
two_approver_limit := 10000

# METADATA
# title: hard_limit
# description: Above this amount no approval lets an agent transfer.
hard_limit := 50000

# METADATA
# title: require_approval
# description: |
#   Asks a person to approve a transfer above the limit, and a second
#   person above the two-approver limit, until the approval bound to the
#   call names enough different approvers.
# entrypoint: true
require_approval contains {
	"reason": sprintf(
		"transfer_funds of %v exceeds the limit of %v and needs %v approver(s); the bound approval names %v",
		[amount, limit, needed, count(_approvers)],
	),
	"message": sprintf("Approve a transfer of %v from %v to %v?", [amount, input.call.args.from, input.call.args.to]),
} if {
	input.call.tool == "transfer_funds"
	amount := input.call.args.amount
	amount > limit
	needed := _needed(amount)
	count(_approvers) < needed
}

# METADATA
# title: deny
# description: |
#   Denies a transfer above the hard limit whatever the approval says, and
#   an approver's override that changes who pays or who is paid.
# entrypoint: true
deny contains {
	"reason": sprintf("transfer_funds of %v exceeds the hard limit of %v", [amount, hard_limit]),
	"message": sprintf("Transfers above %v are never made by an agent. Transfer at most %v.", [hard_limit, hard_limit]),
} if {
	input.call.tool == "transfer_funds"
	amount := input.call.args.amount
	amount > hard_limit
}

deny contains {
	"reason": sprintf("the approver's override changes %q of transfer_funds", [key]),
	"message": sprintf("The approval changed %v of this transfer, which it may not do. Ask the user again.", [key]),
} if {
	input.call.tool == "transfer_funds"
	some key in ["from", "to"]
	object.get(input.call.approval.override_args, key, null) != object.get(input.call.approval.call_args, key, null)
}

# The named approvers of the approval bound to the call: an approval that
# names no one counts as none.
default _approvers := set()

_approvers := {a | some a in input.call.approval.approvers} if {
	input.call.approval.kind == "tool-approved"
}

_needed(amount) := 2 if amount > two_approver_limit

else := 1
