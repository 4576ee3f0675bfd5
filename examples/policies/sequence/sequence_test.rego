# METADATA
# title: Sequence rule tests
# description: issue_refund only after get_order returned successfully.
package policycheck.rules.sequence_test

import data.policycheck.rules.sequence

refund := {"tool": "issue_refund", "tool_call_id": "c2", "args": {"order_id": 7}}

test_deny[note] if {
	cases := {
		"a refund before any lookup is denied": {"call": refund, "returned": set(), "denied": true},
		"a refund after a successful lookup passes": {"call": refund, "returned": {"get_order"}, "denied": false},
		"other returns do not count": {"call": refund, "returned": {"load_capability"}, "denied": true},
		"tools without a prerequisite pass": {
			"call": {"tool": "get_order", "tool_call_id": "c1", "args": {}},
			"returned": set(), "denied": false,
		},
	}
	some note, tc in cases
	denied := count(sequence.deny) > 0 with input as {"call": tc.call, "facts": {"returned": tc.returned}}
	denied == tc.denied
}

test_denial_names_the_prerequisite if {
	ds := sequence.deny with input as {"call": refund, "facts": {"returned": set()}}
	ds == {{
		"reason": "issue_refund requires a successful get_order in the post-compaction window",
		"message": "Call get_order first and check its result, then call issue_refund again.",
	}}
}
