# METADATA
# title: policycheck.lib tests
# description: The filter helpers keep, drop and name tools by capability.
package policycheck.lib_test

import data.policycheck.lib

tools := [
	{"name": "get_time", "capability": null, "defer_loading": false},
	{"name": "secret_op", "capability": "vault", "defer_loading": true},
	{"name": "rotate_key", "capability": "vault", "defer_loading": true},
	{"name": "issue_refund", "capability": "refunds", "defer_loading": true},
]

test_names_lists_every_tool_name if {
	lib.names(tools) == {"get_time", "secret_op", "rotate_key", "issue_refund"}
}

test_names_of_no_tools_is_empty if {
	lib.names([]) == set()
}

test_own_tools_are_the_capability_tools if {
	lib.own_tools(tools, "vault") == {"secret_op", "rotate_key"}
}

test_own_tools_of_unknown_capability_is_empty if {
	lib.own_tools(tools, "nope") == set()
}

test_others_excludes_the_capability_tools if {
	lib.others(tools, "vault") == {"get_time", "issue_refund"}
}

test_keep_own[note] if {
	cases := {
		"keeps the allowed own tools and every other tool": {
			"allowed": {"secret_op"},
			"want": {"get_time", "issue_refund", "secret_op"},
		},
		"an empty allow list drops every own tool": {
			"allowed": set(),
			"want": {"get_time", "issue_refund"},
		},
		"allowed names of other capabilities add nothing": {
			"allowed": {"issue_refund", "nope"},
			"want": {"get_time", "issue_refund"},
		},
	}
	some note, tc in cases
	lib.keep_own(tools, "vault", tc.allowed) == tc.want
}

registry := {
	"names": {"get_time", "secret_op", "rotate_key", "issue_refund"},
	"owned_tools": {"vault": {"secret_op", "rotate_key"}, "refunds": {"issue_refund"}, "empty": set()},
}

test_registry_keep_own_is_keep_own_over_the_registry[note] if {
	cases := {
		"some own tools allowed": {"id": "vault", "allowed": {"secret_op"}},
		"no own tool allowed": {"id": "vault", "allowed": set()},
		"another capability's tools allowed": {"id": "vault", "allowed": {"issue_refund", "nope"}},
		"a capability that owns nothing": {"id": "empty", "allowed": set()},
		"a capability the registry lacks": {"id": "nope", "allowed": set()},
	}
	some note, tc in cases
	got := lib.registry_keep_own(tc.id, tc.allowed) with data.policycheck.registry as registry
	got == lib.keep_own(tools, tc.id, tc.allowed)
}

test_registry_keep_own_drops_the_own_tools_not_allowed if {
	got := lib.registry_keep_own("vault", {"secret_op"}) with data.policycheck.registry as registry
	got == {"get_time", "issue_refund", "secret_op"}
}

test_registry_keep_own_reads_a_json_registry if {
	reg := json.unmarshal(json.marshal(registry))
	got := lib.registry_keep_own("vault", ["secret_op"]) with data.policycheck.registry as reg
	got == lib.registry_keep_own("vault", {"secret_op"}) with data.policycheck.registry as registry
}

test_as_set_keeps_a_set_and_converts_an_array if {
	lib.as_set({"a"}) == {"a"}
	lib.as_set(["a", "b", "a"]) == {"a", "b"}
}

test_registry_keep_own_reads_each_list_as_json[note] if {
	json_registry := json.unmarshal(json.marshal(registry))
	cases := {
		"names": {"registry": object.union(registry, {"names": json_registry.names}), "allowed": {"secret_op"}},
		"owned tools": {
			"registry": object.union(registry, {"owned_tools": json_registry.owned_tools}),
			"allowed": {"secret_op"},
		},
		"allowed": {"registry": registry, "allowed": ["secret_op"]},
	}
	some note, tc in cases
	got := lib.registry_keep_own("vault", tc.allowed) with data.policycheck.registry as tc.registry
	got == {"get_time", "issue_refund", "secret_op"}
}
