# METADATA
# title: Exfiltration tests
# description: |
#   Which calls need an approval: an external tool's call carrying a
#   secret source's value, until an approval is bound; never a call of an
#   internal tool or one carrying only other values; every external call
#   when the flows cannot be relied on. The verdicts on
#   examples/histories/exfiltration.json are pinned through eval
#   (examples/examples_test.go).
package policycheck.rules.exfiltration_test

import data.policycheck.rules.exfiltration

registry := {"tools": {
	"transfer_funds": {"name": "transfer_funds", "labels": ["external"]},
	"secret_op": {"name": "secret_op", "labels": ["secret"]},
	"get_order": {"name": "get_order", "labels": []},
}}

flow(path, tool, labels) := {
	"path": path, "match": "contains",
	"source": {"tool_call_id": "v1", "tool": tool, "labels": labels, "message": 4, "part": 0},
}

truncated_reason := concat("", [
	"the flows of this transfer_funds call cannot be relied on ",
	"(missing, or the index of returns was truncated)",
])

secret_flow := flow("/to", "secret_op", ["secret"])

call(tool, flows) := {"tool": tool, "tool_call_id": "x2", "args": {"to": "globex ref sk-live"}, "flows": flows}

doc(c) := {"facts": {"flow_index_truncated": false}, "call": c}

reasons(d) := {r.reason | some r in rs} if {
	rs := exfiltration.require_approval with input as d with data.policycheck.registry as registry
}

test_a_secret_value_into_an_external_tool_asks_for_approval if {
	reasons(doc(call("transfer_funds", [secret_flow]))) == {concat("", [
		"argument /to of transfer_funds carries a value returned by secret-labelled secret_op ",
		"(tool_call_id v1, message 4, part 0)",
	])}
}

test_each_secret_flow_is_named if {
	count(reasons(doc(call("transfer_funds", [secret_flow, flow("", "secret_op", ["secret"])])))) == 2
}

test_an_approved_call_passes if {
	c := object.union(call("transfer_funds", [secret_flow]), {"approval": {"kind": "tool-approved", "approvers": ["ana"]}})
	count(reasons(doc(c))) == 0
}

test_values_from_other_sources_pass if {
	count(reasons(doc(call("transfer_funds", [flow("/to", "get_order", [])])))) == 0
	count(reasons(doc(call("transfer_funds", [])))) == 0
}

test_an_internal_tool_may_carry_secrets if {
	count(reasons(doc(call("get_order", [secret_flow])))) == 0
}

test_an_unknown_tool_is_not_external if {
	count(reasons(doc(call("send_fax", [secret_flow])))) == 0
}

test_without_flows_an_external_call_asks_for_approval if {
	reasons(doc({"tool": "transfer_funds", "args": {}})) == {truncated_reason}
}

test_a_truncated_index_asks_for_approval if {
	d := {"facts": {"flow_index_truncated": true}, "call": call("transfer_funds", [])}
	reasons(d) == {truncated_reason}
}

test_a_truncated_index_is_approved_too if {
	c := object.union(call("transfer_funds", []), {"approval": {"kind": "tool-approved"}})
	count(reasons({"facts": {"flow_index_truncated": true}, "call": c})) == 0
}
