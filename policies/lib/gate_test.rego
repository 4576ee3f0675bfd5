# METADATA
# title: policycheck.lib.gate tests
# description: |
#   The availability gate as set algebra: what the registry, the facts,
#   the filter results and the operator rules make available, and the
#   verdict of each call.
package policycheck.lib.gate_test

import data.policycheck.lib.gate

# A registry with one tool of every kind: always-on (get_time, and
# read_docs of the always-on docs capability), search-gated (search_docs),
# and capability-gated (the vault's secret_op and rotate_key, the refunds
# runbook's issue_refund).
registry := {
	"tools": {
		"get_time": {"name": "get_time", "capability": null, "defer_loading": false, "gate": "none"},
		"read_docs": {"name": "read_docs", "capability": "docs", "defer_loading": false, "gate": "none"},
		"search_docs": {"name": "search_docs", "capability": null, "defer_loading": true, "gate": "search"},
		"secret_op": {"name": "secret_op", "capability": "vault", "defer_loading": true, "gate": "capability"},
		"rotate_key": {"name": "rotate_key", "capability": "vault", "defer_loading": true, "gate": "capability"},
		"issue_refund": {"name": "issue_refund", "capability": "refunds", "defer_loading": true, "gate": "capability"},
	},
	"names": {"get_time", "read_docs", "search_docs", "secret_op", "rotate_key", "issue_refund"},
	"always_available": {"get_time", "read_docs"},
	"search_gated": {"search_docs"},
	"deferred_capabilities": {"vault", "refunds"},
	"always_on_capabilities": {"docs"},
	"capability_tools": {"vault": {"secret_op", "rotate_key"}, "refunds": {"issue_refund"}},
}

# A registry with no deferred capability and no search-gated tool.
flat_registry := {
	"tools": {"get_time": {"name": "get_time", "capability": null, "defer_loading": false, "gate": "none"}},
	"names": {"get_time"},
	"always_available": {"get_time"},
	"search_gated": set(),
	"deferred_capabilities": set(),
	"always_on_capabilities": set(),
	"capability_tools": {},
}

search_only_registry := {
	"tools": {"search_docs": {"name": "search_docs", "capability": null, "defer_loading": true, "gate": "search"}},
	"names": {"search_docs"},
	"always_available": set(),
	"search_gated": {"search_docs"},
	"deferred_capabilities": set(),
	"always_on_capabilities": set(),
	"capability_tools": {},
}

no_filters := {"dropped": set(), "errors": []}

base := {
	"facts": {"discovered": set(), "loaded": set(), "returned": set(), "active_capabilities": {"docs"}},
	"outgoing": {"discovered": set(), "loaded": set()},
	"filters": {"next": no_filters, "dispatch": no_filters, "errors": []},
	"context": {},
	"dispatch": {
		"loaded": set(),
		"evidence": {"discovered": set(), "loaded": set()},
		"active_capabilities": {"docs"},
		"calls": [],
	},
}

# with_input builds an input document: base, deep-merged with patch.
with_input(patch) := object.union(base, patch)

failing := {"filters": {"errors": [{"capability": "vault", "message": "boom"}]}}

call(tool) := {"tool": tool, "tool_call_id": "c1", "args": {}}

test_framework_names_the_two_framework_tools if {
	gate._framework == {"load_capability", "search_tools"}
}

test_registry_is_read_from_data if {
	gate._registry == registry with data.policycheck.registry as registry
}

test_not_failed_without_filter_errors if {
	not gate.failed with input as base
}

test_failed_when_a_filter_errors if {
	gate.failed with input as with_input(failing)
}

test_hidden_is_empty_without_rules if {
	gate.hidden == set() with data.policycheck.rules as {}
}

test_hidden_unions_every_rules_package if {
	rules := {"a": {"hide": {"get_time"}}, "b": {"hide": {"secret_op", "get_time"}}}
	gate.hidden == {"get_time", "secret_op"} with data.policycheck.rules as rules
}

test_present_framework[note] if {
	cases := {
		"both present with a deferred capability and a search-gated tool": {
			"registry": registry, "removed": set(),
			"want": {"load_capability", "search_tools"},
		},
		"search_tools absent when every search-gated tool is removed": {
			"registry": registry, "removed": {"search_docs"},
			"want": {"load_capability"},
		},
		"search_tools alone without deferred capabilities": {
			"registry": search_only_registry, "removed": set(),
			"want": {"search_tools"},
		},
		"neither without deferred capabilities or search-gated tools": {
			"registry": flat_registry, "removed": set(),
			"want": set(),
		},
	}
	some note, tc in cases
	gate.present_framework(tc.removed) == tc.want with data.policycheck.registry as tc.registry
}

test_search_tools_absent_when_rules_hide_every_search_gated_tool if {
	avail := gate.available({"search_docs"}, set(), no_filters) with data.policycheck.registry as registry
		with data.policycheck.rules as {"r": {"hide": {"search_docs"}}}
	not "search_tools" in avail
	"load_capability" in avail
}

test_revealed_registry_tools[note] if {
	cases := {
		"always-on tools are revealed with no evidence": {
			"discovered": set(), "loaded": set(),
			"want": {"get_time", "read_docs"},
		},
		"a discovered search-gated tool is revealed": {
			"discovered": {"search_docs"}, "loaded": set(),
			"want": {"get_time", "read_docs", "search_docs"},
		},
		"a discovered capability tool is not revealed without its load": {
			"discovered": {"secret_op"}, "loaded": set(),
			"want": {"get_time", "read_docs"},
		},
		"a load reveals every tool of the capability": {
			"discovered": set(), "loaded": {"vault"},
			"want": {"get_time", "read_docs", "secret_op", "rotate_key"},
		},
		"loads of always-on or unregistered capabilities reveal nothing": {
			"discovered": set(), "loaded": {"docs", "nope"},
			"want": {"get_time", "read_docs"},
		},
	}
	some note, tc in cases
	avail := gate.available(tc.discovered, tc.loaded, no_filters) with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	avail - gate._framework == tc.want
}

test_available[note] if {
	cases := {
		"revealed tools plus the framework tools": {
			"discovered": {"search_docs"}, "loaded": {"refunds"}, "filters": no_filters,
			"want": {"get_time", "read_docs", "search_docs", "issue_refund", "load_capability", "search_tools"},
		},
		"a filtered-out tool is not available even when loaded": {
			"discovered": set(), "loaded": {"vault"}, "filters": {"dropped": {"rotate_key"}, "errors": []},
			"want": {"get_time", "read_docs", "secret_op", "load_capability", "search_tools"},
		},
	}
	some note, tc in cases
	gate.available(tc.discovered, tc.loaded, tc.filters) == tc.want with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

test_available_excludes_hidden_tools if {
	not "get_time" in gate.available(set(), set(), no_filters) with data.policycheck.registry as registry
		with data.policycheck.rules as {"r": {"hide": {"get_time"}}}
}

test_available_now_counts_anchored_evidence if {
	doc := with_input({"dispatch": {"evidence": {"discovered": {"search_docs"}, "loaded": {"vault"}}}})
	want := {"get_time", "read_docs", "search_docs", "secret_op", "rotate_key", "load_capability", "search_tools"}
	gate.available_now == want with input as doc with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

test_available_now_reads_loads_before_the_response if {
	doc := with_input({"facts": {"loaded": {"vault"}}, "dispatch": {"loaded": {"refunds"}}})
	now := gate.available_now with input as doc with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	"issue_refund" in now
	not "secret_op" in now
}

test_verdict[note] if {
	cases := {
		"a revealed tool executes": {
			"patch": {"facts": {"discovered": {"search_docs"}}},
			"tool": "search_docs",
			"want": {"verdict": "execute", "rule": "gate"},
		},
		"a framework tool executes": {
			"patch": {},
			"tool": "load_capability",
			"want": {"verdict": "execute", "rule": "gate"},
		},
		"a name outside the resolved set is unknown": {
			"patch": {},
			"tool": "delete_everything",
			"want": {"verdict": "unknown_tool", "rule": "unknown_tool"},
		},
		"a filtered-out tool is unknown": {
			"patch": {"dispatch": {"loaded": {"vault"}}, "filters": {"dispatch": {"dropped": {"rotate_key"}}}},
			"tool": "rotate_key",
			"want": {"verdict": "unknown_tool", "rule": "unknown_tool"},
		},
		"an unloaded capability tool is not available yet, capability form": {
			"patch": {},
			"tool": "secret_op",
			"want": {
				"verdict": "not_available_yet", "rule": "gate",
				"form": {"form": "capability", "capability": "vault"},
			},
		},
		"an undiscovered search-gated tool is not available yet, search form": {
			"patch": {},
			"tool": "search_docs",
			"want": {"verdict": "not_available_yet", "rule": "gate", "form": {"form": "search"}},
		},
		"a failed filter denies every call": {
			"patch": failing,
			"tool": "get_time",
			"want": {"verdict": "denied", "rule": "filter_error"},
		},
	}
	some note, tc in cases
	v := gate.verdict(call(tc.tool)) with input as with_input(tc.patch)
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	object.remove(v, ["reason", "by"]) == tc.want
}

test_verdict_reason[note] if {
	window := {"dispatch": object.union(base.dispatch, {"window": {"message": 2, "part": 1}})}
	cases := {
		"a name outside the registry": {
			"patch": {}, "tool": "nope", "rules": {},
			"reason": `"nope" is neither a registry tool nor a framework tool present in this run`, "by": [],
		},
		"a tool dropped by a filter and hidden by a rule": {
			"patch": {"filters": {"dispatch": {"dropped": {"get_time"}}}}, "tool": "get_time",
			"rules": {"ops": {"hide": {"get_time"}}},
			"reason": "", "by": [{"rule": "prepare_tools"}, {"package": "ops", "rule": "hide"}],
		},
		"an unloaded capability's tool": {
			"patch": window, "tool": "secret_op", "rules": {},
			"reason": concat("", [
				`"secret_op" belongs to deferred capability "vault", which is not loaded in the window the serving `,
				"provider sees (from message 2, part 1); a load in the same response does not count",
			]),
		},
		"an unrevealed search-gated tool": {
			"patch": window, "tool": "search_docs", "rules": {},
			"reason": concat("", [
				`"search_docs" is search-gated and was not revealed in the window the serving provider sees `,
				"(from message 2, part 1)",
			]),
		},
		"a failed filter": {
			"patch": failing, "tool": "get_time", "rules": {},
			"reason": "a capability filter failed: the decision fails closed",
		},
	}
	some note, tc in cases
	v := gate.verdict(call(tc.tool)) with input as with_input(tc.patch)
		with data.policycheck.registry as registry
		with data.policycheck.rules as tc.rules
	v.reason == tc.reason
	got_by := object.get(v, "by", [])
	want_by := object.get(tc, "by", [])
	got_by == want_by
}

test_verdict_under_operator_rules[note] if {
	cases := {
		"a failed filter denies even a name outside the resolved set": {
			"patch": failing, "rules": {},
			"tool": "delete_everything",
			"want": {"verdict": "denied", "rule": "filter_error"},
		},
		"a hidden registry tool is unknown": {
			"patch": {}, "rules": {"r": {"hide": {"get_time"}}},
			"tool": "get_time",
			"want": {"verdict": "unknown_tool", "rule": "unknown_tool"},
		},
		"search_tools is unknown once rules hid every search-gated tool": {
			"patch": {}, "rules": {"r": {"hide": {"search_docs"}}},
			"tool": "search_tools",
			"want": {"verdict": "unknown_tool", "rule": "unknown_tool"},
		},
		"search_tools is unknown once filters and rules together removed every search-gated tool": {
			"patch": {"filters": {"dispatch": {"dropped": {"get_time"}}}}, "rules": {"r": {"hide": {"search_docs"}}},
			"tool": "search_tools",
			"want": {"verdict": "unknown_tool", "rule": "unknown_tool"},
		},
	}
	some note, tc in cases
	v := gate.verdict(call(tc.tool)) with input as with_input(tc.patch)
		with data.policycheck.registry as registry
		with data.policycheck.rules as tc.rules
	object.remove(v, ["reason", "by"]) == tc.want
}

test_failed_is_false_without_filter_errors if {
	gate.failed == false with input as base
}

test_call_resolved[note] if {
	cases := {
		"a registry tool kept by the dispatch filters": {"tool": "get_time", "dropped": set(), "want": true},
		"a framework tool present in the run": {"tool": "search_tools", "dropped": set(), "want": true},
		"a tool the dispatch filters dropped": {"tool": "get_time", "dropped": {"get_time"}, "want": false},
		"a name outside the registry": {"tool": "nope", "dropped": set(), "want": false},
	}
	some note, tc in cases
	_resolved(tc.tool, tc.dropped) == tc.want
}

_resolved(tool, dropped) if {
	gate.call_resolved(call(tool)) with input as with_input({"filters": {"dispatch": {"dropped": dropped}}})
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
} else := false

test_verdict_denied_by_an_operator_rule if {
	rules := {"money": {"deny": {{"reason": "over limit", "message": "Ask a human."}}}}
	v := gate.verdict(call("get_time")) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as rules
	v == {
		"verdict": "denied", "rule": "deny",
		"denials": [{"package": "money", "reason": "over limit", "message": "Ask a human."}],
	}
}

test_log_only_deny_is_reported_not_enforced if {
	rules := {"money": {"deny": {{"reason": "over limit", "message": "Ask a human."}}}}
	v := gate.verdict(call("get_time")) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as rules
		with data.policycheck.log_only as {"money"}
	v == {
		"verdict": "execute", "rule": "gate",
		"would_deny": [{"package": "money", "reason": "over limit", "message": "Ask a human."}],
	}
}

test_log_only_hide_is_reported_not_enforced if {
	rules := {"a": {"hide": {"get_time"}}, "b": {"hide": {"secret_op"}}}
	gate.hidden == {"secret_op"} with data.policycheck.rules as rules with data.policycheck.log_only as {"a"}
	gate.would_hide == {"get_time"} with data.policycheck.rules as rules with data.policycheck.log_only as {"a"}
}

test_enforced_deny_wins_over_a_log_only_one if {
	rules := {"money": {"deny": {{"reason": "r", "message": "m"}}}, "watch": {"deny": {{"reason": "w", "message": "w"}}}}
	v := gate.verdict(call("get_time")) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as rules
		with data.policycheck.log_only as {"watch"}
	v == {"verdict": "denied", "rule": "deny", "denials": [{"package": "money", "reason": "r", "message": "m"}]}
}

test_gate_refusal_wins_over_a_deny_rule if {
	rules := {"money": {"deny": {{"reason": "r", "message": "m"}}}}
	v := gate.verdict(call("secret_op")) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as rules
	v.verdict == "not_available_yet"
}

test_invalid_args_comes_before_every_operator_rule if {
	rules := {
		"money": {"deny": {{"reason": "r", "message": "m"}}, "require_approval": {{"reason": "a", "message": "a"}}},
		"watch": {"deny": {{"reason": "w", "message": "w"}}},
	}
	bad := object.union(call("get_time"), {"args": null, "invalid_args": true})
	v := gate.verdict(bad) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as rules
		with data.policycheck.log_only as {"watch"}
	v == {
		"verdict": "invalid_args", "rule": "args",
		"reason": "the arguments of \"get_time\" fail its parameters_json_schema",
	}
}

test_gate_refusal_wins_over_invalid_args if {
	bad := object.union(call("secret_op"), {"args": null, "invalid_args": true})
	v := gate.verdict(bad) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	v.verdict == "not_available_yet"
}

test_unavailable_form[note] if {
	cases := {
		"capability form while the owner is not loaded": {
			"loaded": set(), "tool": "issue_refund",
			"want": {"form": "capability", "capability": "refunds"},
		},
		"search form once the owner is loaded": {
			"loaded": {"refunds"}, "tool": "issue_refund",
			"want": {"form": "search"},
		},
		"search form for a tool without capability": {
			"loaded": set(), "tool": "search_docs",
			"want": {"form": "search"},
		},
		"search form for a tool of an always-on capability": {
			"loaded": set(), "tool": "read_docs",
			"want": {"form": "search"},
		},
	}
	some note, tc in cases
	gate.unavailable_form(tc.tool) == tc.want with input as with_input({"dispatch": {"loaded": tc.loaded}})
		with data.policycheck.registry as registry
}

test_denials_default_missing_fields_to_empty_strings if {
	rules := {"a": {"deny": {{"reason": "only a reason"}}}, "b": {"deny": set()}}
	gate.denials(call("get_time")) == [{"package": "a", "reason": "only a reason", "message": ""}]
		with data.policycheck.rules as rules
}

test_denials_of_each_accepted_shape[note] if {
	cases := {
		"a Conftest string is reason and message": {
			"deny": {"no refunds"},
			"want": [{"package": "a", "reason": "no refunds", "message": "no refunds"}],
		},
		"a boolean true denies, naming the package": {
			"deny": true,
			"want": [{"package": "a", "reason": "policycheck.rules.a.deny is true", "message": ""}],
		},
		"a boolean false denies nothing": {"deny": false, "want": []},
		"an empty set denies nothing": {"deny": set(), "want": []},
	}
	some note, tc in cases
	gate.denials(call("get_time")) == tc.want with data.policycheck.rules as {"a": {"deny": tc.deny}}
}

test_denials_flag_each_refused_value[note] if {
	cases := {
		"a number element": {"deny": {42}, "value": 42},
		"an object with another key": {"deny": {{"msg": "m"}}, "value": {"msg": "m"}},
		"an object with a number reason": {"deny": {{"reason": 1}}, "value": {"reason": 1}},
		"a string value": {"deny": "no", "value": "no"},
		"an array value": {"deny": ["no"], "value": ["no"]},
		"an object value": {"deny": {"get_time": true}, "value": {"get_time": true}},
	}
	some note, tc in cases
	gate.denials(call("get_time")) == [{"package": "a", "rule": "deny", "value": tc.value}]
		with data.policycheck.rules as {"a": {"deny": tc.deny}}
}

test_a_flagged_denial_still_denies if {
	v := gate.verdict(call("get_time")) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as {"a": {"deny": {42}}}
	v.verdict == "denied"
}

test_rule_errors_flag_a_hide_that_is_not_a_set_of_names[note] if {
	cases := {
		"a string": "get_time",
		"an array": ["get_time"],
		"an object": {"get_time": true},
		"a boolean": true,
		"a set holding a number": {"get_time", 1},
	}
	some note, h in cases
	gate.rule_errors == {{"package": "a", "rule": "hide", "value": h}} with data.policycheck.rules as {"a": {"hide": h}}
		with data.policycheck.registry as registry
}

test_rule_errors_flag_a_number_beside_or_instead_of_registry_names[note] if {
	# The registry-names fast path of names_set must not accept a number:
	# neither with every registry name beside it nor alone.
	cases := {
		"every registry name and a number": (registry.names | {1}),
		"a number alone": {1},
	}
	some note, h in cases
	gate.rule_errors == {{"package": "a", "rule": "hide", "value": h}} with data.policycheck.rules as {"a": {"hide": h}}
		with data.policycheck.registry as registry
}

test_rule_errors_flag_a_hide_of_a_framework_tool[note] if {
	# No rule can hide a framework tool: a hide naming one would be
	# silently ignored, so it fails the decision closed instead.
	cases := {
		"search_tools": {"search_tools"},
		"load_capability beside a registry tool": {"get_time", "load_capability"},
	}
	some note, h in cases
	gate.rule_errors == {{"package": "a", "rule": "hide", "value": h}} with data.policycheck.rules as {"a": {"hide": h}}
		with data.policycheck.registry as registry
}

test_rule_errors_accept_names_in_and_out_of_the_registry if {
	rules := {"a": {"hide": {"get_time"}}, "b": {"hide": {"not_a_tool"}}, "c": {"deny": true}}
	gate.rule_errors == set() with data.policycheck.rules as rules
		with data.policycheck.registry as registry
}

test_denials_see_the_call_as_input_call if {
	# gate_probe_test.rego's rules package denies the probe tool, naming
	# the tool_call_id it read from input.call.
	# Other rules packages loaded beside (an operator's) may deny too.
	ds := gate.denials({"tool": "gate_probe", "tool_call_id": "p1", "args": {}}) with input as base
	probe := [d | some d in ds; d.package == "gate_probe_test"]
	probe == [{"package": "gate_probe_test", "reason": "probe saw p1", "message": "probe"}]
}

test_denials_see_the_whole_input_beside_the_call if {
	doc := object.union(base, {"context": {"who": "ada"}, "facts": object.union(base.facts, {"discovered": {"a", "b"}})})
	ds := gate.denials({"tool": "gate_probe_input", "tool_call_id": "p2", "args": {}}) with input as doc
	probe := [d | some d in ds; d.package == "gate_probe_test"]
	probe == [{"package": "gate_probe_test", "reason": "probe saw ada and 2 discovered", "message": "probe"}]
}

# A JSON input document (opa eval -i, OPA's REST API) and a JSON registry
# (policycheck registry) hold arrays where the engine hands sets:
# input_sets and registry_sets are the documents the engine would hand.
as_json(x) := json.unmarshal(json.marshal(x))

json_case := with_input({
	"facts": {"discovered": {"search_docs"}, "loaded": {"vault"}},
	"filters": {"dispatch": {"dropped": {"rotate_key"}, "errors": []}},
	"dispatch": {
		"loaded": {"vault"},
		"evidence": {"discovered": set(), "loaded": {"refunds"}},
		"calls": [{"tool": "search_docs"}],
	},
})

test_input_sets_turns_every_array_name_list_into_a_set if {
	gate.input_sets == json_case with input as as_json(json_case)
	gate.input_sets == json_case with input as json_case
}

test_input_sets_converts_only_the_name_lists_present if {
	doc := {"facts": {"discovered": ["a", "a"]}, "dispatch": {"calls": [{"tool": "a"}]}}
	gate.input_sets == {"facts": {"discovered": {"a"}}, "dispatch": {"calls": [{"tool": "a"}]}} with input as doc
}

test_registry_sets_turns_every_array_name_list_into_a_set if {
	gate.registry_sets == registry with data.policycheck.registry as as_json(registry)
	gate.registry_sets == registry with data.policycheck.registry as registry
	reg := object.union(registry, {"owned_tools": {"docs": {"read_docs"}}})
	gate.registry_sets == reg with data.policycheck.registry as as_json(reg)
}

approval_call(approval) := object.union(
	{"tool": "get_time", "tool_call_id": "c1", "args": {"amount": 5}},
	approval,
)

test_verdict_approval_required_by_an_operator_rule if {
	rules := {"money": {"require_approval": {{"reason": "big", "message": "Approve?"}}}}
	v := gate.verdict(call("get_time")) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as rules
	v == {
		"verdict": "approval_required", "rule": "require_approval",
		"requests": [{"package": "money", "reason": "big", "message": "Approve?"}],
	}
}

test_verdict_order_gate_then_deny_then_approval[note] if {
	both := {"money": {
		"deny": {{"reason": "r", "message": "m"}},
		"require_approval": {{"reason": "a", "message": "b"}},
	}}
	ask := {"money": {"require_approval": {{"reason": "a", "message": "b"}}}}
	approved := {"approval": {"kind": "tool-approved", "approvers": ["ada"]}}
	denied := {"approval": {"kind": "tool-denied", "approvers": ["ada"], "message": "no"}}
	cases := {
		"the gate wins over both": {"rules": both, "call": call("secret_op"), "want": "not_available_yet"},
		"the gate wins over an approval": {
			"rules": {}, "call": object.union(call("secret_op"), approved),
			"want": "not_available_yet",
		},
		"deny wins over require_approval": {"rules": both, "call": call("get_time"), "want": "denied"},
		"deny wins over an approval": {
			"rules": both, "call": object.union(call("get_time"), approved),
			"want": "denied",
		},
		"an approver's denial denies": {"rules": ask, "call": object.union(call("get_time"), denied), "want": "denied"},
		"without an approval rule the call executes": {"rules": {}, "call": call("get_time"), "want": "execute"},
	}
	some note, tc in cases
	v := gate.verdict(tc.call) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as tc.rules
	v.verdict == tc.want
}

test_verdict_approval_denied_names_its_rule if {
	c := approval_call({"approval": {"kind": "tool-denied", "approvers": [], "message": "no"}})
	v := gate.verdict(c) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	v == {"verdict": "denied", "rule": "approval_denied"}
}

test_require_approvals_see_the_approval_and_the_arguments[note] if {
	# gate_probe_test.rego's require_approval asks until two approvers
	# answered, and names the amount it read.
	cases := {
		"no approval": {"approval": {}, "want": ["probe saw amount 5"]},
		"one approver is not enough": {
			"approval": {"approval": {"kind": "tool-approved", "approvers": ["ada"]}},
			"want": ["probe saw amount 5"],
		},
		"two approvers are": {
			"approval": {"approval": {"kind": "tool-approved", "approvers": ["ada", "bob"]}},
			"want": [],
		},
	}
	some note, tc in cases
	c := object.union({"tool": "gate_probe_approval", "tool_call_id": "p3", "args": {"amount": 5}}, tc.approval)
	rs := gate.require_approvals(c) with input as base
	[r.reason | some r in rs; r.package == "gate_probe_test"] == tc.want
}

test_require_approval_is_skipped_only_when_the_engine_says_no_package_defines_it[note] if {
	rules := {"money": {"require_approval": {{"reason": "big", "message": "Approve?"}}}}
	cases := {
		"the engine lists require_approval": {"kinds": {"deny", "require_approval"}, "want": "approval_required"},
		"the engine lists none": {"kinds": {"deny"}, "want": "execute"},
	}
	some note, tc in cases
	v := gate.verdict(call("get_time")) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as rules
		with data.policycheck.rule_kinds as tc.kinds
	v.verdict == tc.want
}

# The registry of the tests with get_time marked requires_approval.
approval_registry := object.union(registry, {"requires_approval": {"get_time"}})

test_verdict_approval_required_by_the_registry if {
	v := gate.verdict(call("get_time")) with input as base
		with data.policycheck.registry as approval_registry
		with data.policycheck.rules as {}
		with data.policycheck.rule_kinds as set()
	v == {
		"verdict": "approval_required", "rule": "require_approval",
		"requests": [{"package": "", "reason": "the registry marks \"get_time\" requires_approval", "message": ""}],
	}
}

test_registry_approval_composes_with_the_rules[note] if {
	deny := {"money": {"deny": {{"reason": "r", "message": "m"}}}}
	ask := {"money": {"require_approval": {{"reason": "a", "message": "b"}}}}
	approved := {"approval": {"kind": "tool-approved", "approvers": ["ada"]}}
	denied := {"approval": {"kind": "tool-denied", "approvers": ["ada"], "message": "no"}}
	cases := {
		"a deny wins": {"rules": deny, "kinds": {"deny"}, "call": call("get_time"), "want": "denied"},
		"a bound approval executes": {
			"rules": {}, "kinds": set(), "call": object.union(call("get_time"), approved),
			"want": "execute",
		},
		"an approver's denial denies": {
			"rules": {}, "kinds": set(), "call": object.union(call("get_time"), denied),
			"want": "denied",
		},
		"a rule still asks with the approval bound": {
			"rules": ask, "kinds": {"require_approval"}, "call": object.union(call("get_time"), approved),
			"want": "approval_required",
		},
		"an unmarked tool executes": {"rules": {}, "kinds": set(), "call": call("read_docs"), "want": "execute"},
	}
	some note, tc in cases
	v := gate.verdict(tc.call) with input as base
		with data.policycheck.registry as approval_registry
		with data.policycheck.rules as tc.rules
		with data.policycheck.rule_kinds as tc.kinds
	v.verdict == tc.want
}

test_registry_approvals_ask_until_approved[note] if {
	cases := {
		"no approval": {"approval": {}, "want": 1},
		"approved": {"approval": {"approval": {"kind": "tool-approved", "approvers": ["ada"]}}, "want": 0},
		"another kind": {"approval": {"approval": {"kind": "tool-denied", "approvers": ["ada"]}}, "want": 1},
	}
	some note, tc in cases
	c := object.union(call("get_time"), tc.approval)
	rs := gate.registry_approvals(c) with data.policycheck.registry as approval_registry
	count(rs) == tc.want
}

test_registry_approvals_read_json_data if {
	v := gate.verdict(call("get_time")) with input as base
		with data.policycheck.registry as as_json(approval_registry)
		with data.policycheck.rules as {}
	v.verdict == "approval_required"
}

test_requests_of_flag_values_the_contract_refuses[note] if {
	cases := {
		"an object": {"rs": {{"reason": "r", "message": "m"}}, "want": [{"package": "p", "reason": "r", "message": "m"}]},
		"a string": {"rs": {"ask"}, "want": [{"package": "p", "rule": "require_approval", "value": "ask"}]},
		"a number reason": {
			"rs": {{"reason": 1}},
			"want": [{"package": "p", "rule": "require_approval", "value": {"reason": 1}}],
		},
		"not a set": {"rs": true, "want": [{"package": "p", "rule": "require_approval", "value": true}]},
	}
	some note, tc in cases
	gate.requests_of("p", tc.rs) == tc.want
}

test_operator_denial_is_reported_over_an_approvers_denial if {
	# Both deny the call; the operator's denial names its package and
	# reasons, which the approver's denial does not carry.
	rules := {"money": {"deny": {{"reason": "over limit", "message": "Ask a human."}}}}
	c := approval_call({"approval": {"kind": "tool-denied", "approvers": ["ada"], "message": "no"}})
	v := gate.verdict(c) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as rules
	v == {
		"verdict": "denied", "rule": "deny",
		"denials": [{"package": "money", "reason": "over limit", "message": "Ask a human."}],
	}
}

test_log_only_deny_does_not_waive_a_required_approval if {
	rules := {
		"watch": {"deny": {{"reason": "w", "message": "w"}}},
		"money": {"require_approval": {{"reason": "big", "message": "Approve?"}}},
	}
	v := gate.verdict(call("get_time")) with input as base
		with data.policycheck.registry as registry
		with data.policycheck.rules as rules
		with data.policycheck.log_only as {"watch"}
	v == {
		"verdict": "approval_required", "rule": "require_approval",
		"requests": [{"package": "money", "reason": "big", "message": "Approve?"}],
	}
}

test_gate_refusal_of_a_tool_of_no_known_gate_gives_the_generic_reason if {
	# Registry data (hand-written, as under opa eval) naming a tool of gate
	# "none" that is not always available: the gate still refuses it, and
	# the reason claims neither a capability nor a search gate.
	odd := object.union(flat_registry, {"always_available": set()})
	v := gate.verdict(call("get_time")) with input as base
		with data.policycheck.registry as odd
		with data.policycheck.rules as {}
	v.verdict == "not_available_yet"
	v.reason == `"get_time" refused by the availability rule`
}
