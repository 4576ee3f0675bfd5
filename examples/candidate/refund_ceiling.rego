# METADATA
# title: Refund ceiling
# description: |
#   A candidate rule, replayed against recorded runs before it is merged
#   (docs/replay.md): refunds above 40 need a supervisor.
package policycheck.rules.refund_ceiling

# METADATA
# title: ceiling
# description: The largest refund issued without a supervisor.
ceiling := 40

# METADATA
# title: deny
# description: Denies issue_refund above the ceiling.
# entrypoint: true
deny contains {
	"reason": sprintf("issue_refund of %v exceeds the ceiling of %v", [amount, ceiling]),
	"message": sprintf(
		"Refunds above %v need a supervisor: ask the user to escalate this refund of %v.",
		[ceiling, amount],
	),
} if {
	input.call.tool == "issue_refund"
	amount := input.call.args.amount
	is_number(amount)
	amount > ceiling
}
