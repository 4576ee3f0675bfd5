# METADATA
# title: Transfer budgets
# description: |
#   Budgets over a whole run, read from input.facts.tool_calls through the
#   counting helpers of policycheck.lib: at most 3 transfer_funds calls per
#   run, and their amounts sum to at most 10,000. A call the framework sent
#   back with a retry-prompt did not execute and is not counted; the calls
#   of the response being dispatched are, up to and including the call
#   judged, so of two transfers in one response the later one sees the
#   earlier. Without input.facts.tool_calls (an input recorded without
#   it) every transfer is denied: the budget cannot be checked.
package policycheck.rules.budgets

import data.policycheck.lib

# METADATA
# title: max_transfers
# description: The most transfer_funds calls one run may make.
max_transfers := 3

# METADATA
# title: max_total
# description: The most the amounts of one run's transfers may add up to.
max_total := 10000

# METADATA
# title: deny
# description: |
#   Denies a transfer past the count budget or the amount budget, one
#   whose amount is not a number, and every transfer when the calls of the
#   run are not in the input.
# entrypoint: true
deny contains {
	"reason": sprintf("transfer_funds call %v of this run exceeds the budget of %v calls per run", [n, max_transfers]),
	"message": sprintf("This run has made its %v transfers. Ask the user to start a new run.", [max_transfers]),
} if {
	input.call.tool == "transfer_funds"
	n := lib.call_count(input.call)
	n > max_transfers
}

deny contains {
	"reason": sprintf("transfer_funds would bring this run's transfers to %v, above the budget of %v", [total, max_total]),
	"message": sprintf(
		"The transfers of a run may add up to at most %v; this one would bring them to %v.",
		[max_total, total],
	),
} if {
	input.call.tool == "transfer_funds"
	total := lib.arg_sum(input.call, "amount")
	total > max_total
}

deny contains {
	"reason": "transfer_funds called without a numeric amount",
	"message": "transfer_funds needs a numeric `amount` argument.",
} if {
	input.call.tool == "transfer_funds"
	not is_number(object.get(input.call, ["args", "amount"], null))
}

deny contains {
	"reason": "a transfer_funds call of this run has a negative amount, which would offset the amount budget",
	"message": "Transfers cannot be checked against the budget while this run holds a transfer with a negative amount.",
} if {
	# The registry's schema makes a negative amount invalid_args, but the
	# call still counts for the others in its response (it is pending
	# there, as the calls the sum reads are): refuse to sum past it.
	input.call.tool == "transfer_funds"
	some c in lib.calls_upto(input.call)
	amount := object.get(c.args, "amount", 0)
	is_number(amount)
	amount < 0
}

deny contains {
	"reason": "the input holds no facts.tool_calls: the transfer budget cannot be checked",
	"message": "Transfers are unavailable: the budget cannot be checked.",
} if {
	input.call.tool == "transfer_funds"
	not input.facts.tool_calls
}
