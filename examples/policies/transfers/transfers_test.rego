# METADATA
# title: Transfer limit tests
# description: Amount, approval and malformed arguments.
package policycheck.rules.transfers_test

import data.policycheck.rules.transfers

transfer(args) := {"tool": "transfer_funds", "tool_call_id": "t1", "args": args}

test_deny[note] if {
	cases := {
		"small transfers pass": {"call": transfer({"amount": 250}), "context": {}, "denied": false},
		"the limit itself passes": {"call": transfer({"amount": 1000}), "context": {}, "denied": false},
		"above the limit without approval is denied": {
			"call": transfer({"amount": 5000}), "context": {"approval": false},
			"denied": true,
		},
		"above the limit with approval passes": {
			"call": transfer({"amount": 5000}), "context": {"approval": true},
			"denied": false,
		},
		"an approval that is not true does not count": {
			"call": transfer({"amount": 5000}), "context": {"approval": "yes"},
			"denied": true,
		},
		"a missing amount is denied": {"call": transfer({}), "context": {}, "denied": true},
		"a string amount is denied": {"call": transfer({"amount": "5000"}), "context": {}, "denied": true},
		"arguments that are not an object are denied": {
			"call": {"tool": "transfer_funds", "tool_call_id": "t1", "args": null},
			"context": {}, "denied": true,
		},
		"other tools are never denied": {
			"call": {"tool": "get_time", "tool_call_id": "c1", "args": {"amount": 9999}},
			"context": {}, "denied": false,
		},
	}
	some note, tc in cases
	denied := count(transfers.deny) > 0 with input as {"call": tc.call, "context": tc.context}
	denied == tc.denied
}

test_denial_tells_the_model_what_to_do if {
	ds := transfers.deny with input as {"call": transfer({"amount": 5000}), "context": {}}
	some d in ds
	d.reason == "transfer_funds of 5000 exceeds the limit of 1000 and the context carries no approval"
	contains(d.message, "Ask the user to approve this transfer of 5000")
}
