# METADATA
# title: Refund ceiling tests
# description: Above, at and below the ceiling.
package policycheck.rules.refund_ceiling_test

import data.policycheck.rules.refund_ceiling

refund(amount) := {"tool": "issue_refund", "tool_call_id": "r1", "args": {"order_id": 7, "amount": amount}}

test_above_the_ceiling_is_denied if count(refund_ceiling.deny) == 1 with input.call as refund(42.5)

test_the_ceiling_itself_passes if count(refund_ceiling.deny) == 0 with input.call as refund(40)

test_other_tools_pass if {
	count(refund_ceiling.deny) == 0 with input.call as {"tool": "get_order", "tool_call_id": "g1", "args": {"amount": 99}}
}
