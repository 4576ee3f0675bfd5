# METADATA
# title: Group tool policy tests
# description: Allow, deny and capability scope by group; unknown groups see nothing.
package policycheck.rules.groups_test

import data.policycheck.rules.groups

registry := {
	"names": {"get_time", "get_order", "transfer_funds", "search_docs", "issue_refund", "secret_op", "rotate_key"},
	"tools": {
		"get_time": {"capability": null},
		"get_order": {"capability": null},
		"transfer_funds": {"capability": null},
		"search_docs": {"capability": "docs"},
		"issue_refund": {"capability": "refunds"},
		"secret_op": {"capability": "vault"},
		"rotate_key": {"capability": "vault"},
	},
}

test_hide[note] if {
	cases := {
		"admins see every tool": {"context": {"group": "admin"}, "want": set()},
		"support loses denied tools and the tools of capabilities out of scope": {
			"context": {"group": "support"},
			"want": {"transfer_funds", "secret_op", "rotate_key"},
		},
		"viewers see only their allow list": {
			"context": {"group": "viewer"},
			"want": {"transfer_funds", "issue_refund", "secret_op", "rotate_key"},
		},
		"an unknown group sees no tool": {"context": {"group": "intern"}, "want": registry.names},
		"no group sees no tool": {"context": {}, "want": registry.names},
	}
	some note, tc in cases
	groups.hide == tc.want with input as {"context": tc.context}
		with data.policycheck.registry as registry
}

test_deny_wins_over_allow if {
	table := {"g": {"allow": {"get_time", "transfer_funds"}, "deny": {"transfer_funds"}}}
	hidden := groups.hide with input as {"context": {"group": "g"}}
		with data.policycheck.registry as registry
		with groups.table as table
	"transfer_funds" in hidden
	not "get_time" in hidden
}

test_scope_never_hides_tools_without_capability if {
	table := {"g": {"capabilities": set()}}
	hidden := groups.hide with input as {"context": {"group": "g"}}
		with data.policycheck.registry as registry
		with groups.table as table
	hidden == {"search_docs", "issue_refund", "secret_op", "rotate_key"}
}

test_hidden_tools_leave_the_decision if {
	# Through the shipped gate: a support user's hidden transfer_funds is
	# an unknown tool.
	doc := {"context": {"group": "support"}, "filters": {"dispatch": {"dropped": set(), "errors": []}, "errors": []}}
	full_registry := object.union(registry, {"deferred_capabilities": set(), "search_gated": set()})
	v := data.policycheck.lib.gate.verdict({"tool": "transfer_funds", "tool_call_id": "t1", "args": {}})
		with input as doc
		with data.policycheck.registry as full_registry
	v.verdict == "unknown_tool"
}
