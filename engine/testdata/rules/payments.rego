# METADATA
# title: Payment limits
# description: |
#   Per-call denials: a transfer above the approval limit is refused with a
#   message the model can act on.
package policycheck.rules.payments

approval_limit := 1000

# METADATA
# title: deny
# description: Transfers above the approval limit need a second approver.
deny contains {
	"reason": "transfer above the approval limit",
	"message": "Transfers above 1000 need a second approver: ask the user to approve it first.",
} if {
	input.call.tool == "transfer_funds"
	input.call.args.amount > approval_limit
}
