# METADATA
# title: Labels tests
# description: |
#   The labels mode asks before a consequential call carrying an untrusted
#   source's value and denies one carrying a value above its clearance;
#   a trusted source's value, or a call that is not consequential, passes.
package policycheck.rules.labels_test

import data.policycheck.rules.labels

registry := {"tools": {
	"send_money": {"name": "send_money", "consequential": true, "clearance": "internal"},
	"post_webpage": {"name": "post_webpage", "consequential": true, "clearance": "public"},
	"get_iban": {"name": "get_iban", "consequential": false},
}}

flow(path, tool, integrity, confidentiality) := {"path": path, "match": "exact", "source": {
	"kind": "tool-return", "tool": tool, "tool_call_id": "c1", "labels": [], "message": 2, "part": 0,
	"integrity": integrity, "confidentiality": confidentiality,
}}

decide(call) := {"deny": d, "ask": a} if {
	d := labels.deny with input as {"call": call, "facts": {"flow_index_truncated": false}}
		with data.policycheck.registry as registry
	a := labels.require_approval with input as {"call": call, "facts": {"flow_index_truncated": false}}
		with data.policycheck.registry as registry
}

test_an_untrusted_value_in_a_consequential_call_asks if {
	d := decide({"tool": "send_money", "flows": [flow("/recipient", "read_file", "untrusted", "internal")]})
	count(d.ask) == 1
	count(d.deny) == 0
}

test_a_trusted_value_passes if {
	d := decide({"tool": "send_money", "flows": [flow("/recipient", "get_iban", "trusted", "internal")]})
	count(d.ask) == 0
	count(d.deny) == 0
}

test_a_call_that_is_not_consequential_passes if {
	d := decide({"tool": "get_iban", "flows": [flow("/x", "read_file", "untrusted", "internal")]})
	count(d.ask) == 0
}

test_a_value_above_the_clearance_is_denied if {
	d := decide({"tool": "post_webpage", "flows": [flow("/content", "read_inbox", "trusted", "confidential")]})
	count(d.deny) == 1
}
