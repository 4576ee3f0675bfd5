# METADATA
# title: Transfer limit
# description: |
#   An argument-aware call rule: transfer_funds above the limit is denied
#   unless the request's context carries an approval. The operator reads
#   `reason`; the model reads `message` and can act on it.
package policycheck.rules.transfers

# METADATA
# title: limit
# description: The largest amount transferred without an approval.
limit := 1000

# METADATA
# title: deny
# description: Denies a transfer above the limit without approval, and a transfer whose amount is not a number.
# entrypoint: true
deny contains {
	"reason": sprintf("transfer_funds of %v exceeds the limit of %v and the context carries no approval", [amount, limit]),
	"message": sprintf(
		"Transfers above %v need an approval. Ask the user to approve this transfer of %v, or transfer at most %v.",
		[limit, amount, limit],
	),
} if {
	input.call.tool == "transfer_funds"
	amount := input.call.args.amount
	is_number(amount)
	amount > limit
	not _approved
}

deny contains {
	"reason": "transfer_funds called without a numeric amount",
	"message": "transfer_funds needs a numeric `amount` argument.",
} if {
	input.call.tool == "transfer_funds"
	not is_number(object.get(input.call, ["args", "amount"], null))
}

_approved if input.context.approval == true
