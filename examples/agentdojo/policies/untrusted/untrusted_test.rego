# METADATA
# title: Untrusted flows tests
# description: |
#   A consequential call carrying an untrusted source's value asks, until
#   approved; a call carrying only other values, or of a tool that is not
#   consequential, does not; flows that cannot be relied on ask. The
#   verdicts on the AgentDojo-style runs are pinned by
#   TestAgentDojoEvaluation (examples/agentdojo_test.go).
package policycheck.rules.untrusted_test

import data.policycheck.rules.untrusted

registry := {"tools": {
	"send_money": {"name": "send_money", "labels": ["consequential", "external"]},
	"read_file": {"name": "read_file", "labels": ["untrusted"]},
	"get_balance": {"name": "get_balance", "labels": ["secret"]},
}}

flow(tool, labels) := {
	"path": "/recipient", "match": "exact",
	"source": {"tool_call_id": "r1", "tool": tool, "labels": labels, "message": 2, "part": 0},
}

doc(tool, flows, truncated) := {
	"facts": {"flow_index_truncated": truncated},
	"call": {"tool": tool, "tool_call_id": "c1", "args": {}, "flows": flows},
}

asks(d) if {
	count(untrusted.require_approval) > 0 with input as d with data.policycheck.registry as registry
}

test_an_untrusted_value_in_a_consequential_call_asks if {
	asks(doc("send_money", [flow("read_file", ["untrusted"])], false))
}

test_an_approved_call_does_not_ask if {
	d := object.union(doc("send_money", [flow("read_file", ["untrusted"])], false), {"call": {"approval": {"kind": "tool-approved"}}})
	not asks(d)
}

test_other_sources_do_not_ask if {
	not asks(doc("send_money", [flow("get_balance", ["secret"])], false))
}

test_a_tool_that_is_not_consequential_does_not_ask if {
	not asks(doc("read_file", [flow("read_file", ["untrusted"])], false))
}

test_flows_that_cannot_be_relied_on_ask if {
	asks(doc("send_money", [], true))
}
