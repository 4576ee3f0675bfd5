# METADATA
# title: policycheck.lib flow tests
# description: The flow helpers select flows by their source's labels and say when flows can be relied on.
package policycheck.lib_flows_test

import data.policycheck.lib

flow(path, labels) := {
	"path": path, "match": "exact",
	"source": {"tool_call_id": "r1", "tool": "read", "labels": labels, "message": 2, "part": 0},
}

call := {"tool": "send", "flows": [flow("/to", ["secret"]), flow("/body", []), flow("/cc", ["external", "secret"])]}

test_flows_labelled_selects_by_label if {
	lib.flows_labelled(call, "secret") == [flow("/to", ["secret"]), flow("/cc", ["external", "secret"])]
	lib.flows_labelled(call, "external") == [flow("/cc", ["external", "secret"])]
	lib.flows_labelled(call, "public") == []
}

test_flows_labelled_without_flows_is_empty if {
	lib.flows_labelled({"tool": "send"}, "secret") == []
}

test_flows_complete_needs_flows_and_an_untruncated_index if {
	lib.flows_complete(call) with input as {"facts": {"flow_index_truncated": false}}
	not lib.flows_complete(call) with input as {"facts": {"flow_index_truncated": true}}
	not lib.flows_complete(call) with input as {"facts": {}}
	not lib.flows_complete({"tool": "send"}) with input as {"facts": {"flow_index_truncated": false}}
}
