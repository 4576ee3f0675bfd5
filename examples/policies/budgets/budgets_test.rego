# METADATA
# title: Transfer budget tests
# description: |
#   The count and amount budgets over a run's calls, retried calls left
#   out, calls of one response counted in order, and the fail-closed
#   cases. The verdicts on examples/histories/budget.json are pinned
#   through eval (examples/examples_test.go).
package policycheck.rules.budgets_test

import data.policycheck.rules.budgets

# record(id, message, part, outcome, amount) is an entry of
# input.facts.tool_calls.transfer_funds.
record(id, message, part, outcome, amount) := {
	"tool_call_id": id, "message": message, "part": part,
	"timestamp": "2026-03-02T10:00:00Z", "outcome": outcome,
	"args": {"from": "ops", "to": "supplier", "amount": amount},
}

# run(records, part) is the input of a deny rule judging the dispatched
# call at `part` of message 9 among records.
run(records, part) := {
	"facts": {"tool_calls": {"transfer_funds": records}},
	"call": {
		"tool": "transfer_funds", "part": part,
		"args": [r.args | some r in records; r.message == 9; r.part == part][0],
	},
}

earlier := [
	record("t1", 1, 0, "returned", 3000),
	record("t2", 3, 0, "retried", 9000),
	record("t3", 5, 0, "returned", 4000),
]

reasons(doc) := r if {
	ds := budgets.deny with input as doc
	r := {d.reason | some d in ds}
}

test_a_transfer_within_both_budgets_is_allowed if {
	count(reasons(run(array.concat(earlier, [record("t4", 9, 0, "pending", 2000)]), 0))) == 0
}

test_a_retried_call_is_not_counted if {
	# t2 (retried) would make t4 the fourth call and bring the sum to 18,000.
	count(reasons(run(array.concat(earlier, [record("t4", 9, 0, "pending", 3000)]), 0))) == 0
}

test_the_fourth_transfer_is_denied if {
	records := array.concat(earlier, [record("t4", 9, 0, "pending", 1000), record("t5", 9, 1, "pending", 1)])
	count(reasons(run(records, 0))) == 0
	reasons(run(records, 1)) == {"transfer_funds call 4 of this run exceeds the budget of 3 calls per run"}
}

test_a_transfer_past_the_amount_budget_is_denied if {
	records := array.concat(earlier, [record("t4", 9, 0, "pending", 3500)])
	reasons(run(records, 0)) == {"transfer_funds would bring this run's transfers to 10500, above the budget of 10000"}
}

test_the_amount_budget_itself_is_allowed if {
	count(reasons(run(array.concat(earlier, [record("t4", 9, 0, "pending", 3000)]), 0))) == 0
}

test_a_later_call_of_the_same_response_is_not_counted_for_an_earlier_one if {
	records := array.concat(earlier, [record("t4", 9, 0, "pending", 500), record("t5", 9, 1, "pending", 5000)])
	count(reasons(run(records, 0))) == 0
	"transfer_funds would bring this run's transfers to 12500, above the budget of 10000" in reasons(run(records, 1))
}

test_a_non_numeric_amount_is_denied if {
	reasons(run([record("t1", 9, 0, "pending", "lots")], 0)) == {"transfer_funds called without a numeric amount"}
}

test_without_tool_calls_every_transfer_is_denied if {
	doc := {"facts": {}, "call": {"tool": "transfer_funds", "part": 0, "args": {"amount": 1}}}
	reasons(doc) == {"the input holds no facts.tool_calls: the transfer budget cannot be checked"}
}

test_other_tools_are_not_budgeted if {
	doc := {"facts": {"tool_calls": {}}, "call": {"tool": "get_time", "part": 0, "args": {}}}
	count(reasons(doc)) == 0
}

test_a_negative_amount_does_not_offset_the_sum if {
	# t4 (-9000, invalid_args by the registry's schema, yet pending in
	# the response) would bring t5's sum to 4,000 instead of 13,000.
	records := [
		record("t1", 1, 0, "returned", 3000),
		record("t4", 9, 0, "pending", -9000),
		record("t5", 9, 1, "pending", 10000),
	]
	want := "a transfer_funds call of this run has a negative amount, which would offset the amount budget"
	reasons(run(records, 1)) == {want}
}
