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
	"message": sprintf("Approve a transfer of %v from %v to %v?", [amount, _arg("from"), _arg("to")]),
} if {
	input.call.tool == "transfer_funds"
	amount := input.call.args.amount
	is_number(amount)
	amount > limit
	needed := _needed(amount)
	count(_approvers) < needed
}

# METADATA
# title: deny
# description: |
#   Denies a transfer above the hard limit whatever the approval says, an
#   approver's override that changes who pays or who is paid, and a
#   transfer whose amount is not a number.
# entrypoint: true
deny contains {
	"reason": sprintf("transfer_funds of %v exceeds the hard limit of %v", [amount, hard_limit]),
	"message": sprintf("Transfers above %v are never made by an agent. Transfer at most %v.", [hard_limit, hard_limit]),
} if {
	input.call.tool == "transfer_funds"
	amount := input.call.args.amount
	is_number(amount)
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

deny contains {
	"reason": "transfer_funds called without a numeric amount",
	"message": "transfer_funds needs a numeric `amount` argument.",
} if {
	input.call.tool == "transfer_funds"
	not is_number(object.get(input.call, ["args", "amount"], null))
}

# The named approvers of the approval bound to the call: an approval that
# names no one counts as none.
default _approvers := set()

_approvers := {a | some a in input.call.approval.approvers} if {
	input.call.approval.kind == "tool-approved"
}

_needed(amount) := 2 if amount > two_approver_limit

else := 1

_arg(key) := object.get(input.call.args, key, "?")
