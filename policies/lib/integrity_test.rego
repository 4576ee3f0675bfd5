# METADATA
# title: policycheck.lib integrity tests
# description: |
#   The stock label rules: a trusted action and a permitted flow, the
#   label of a value as the join of its sources', and the reasons naming
#   each source's message and part.
package policycheck.lib_integrity_test

import data.policycheck.lib

registry := {"tools": {
	"send_money": {"name": "send_money", "consequential": true, "clearance": "internal"},
	"read_inbox": {
		"name": "read_inbox", "consequential": false,
		"integrity": "untrusted", "confidentiality": "confidential",
	},
	"get_balance": {"name": "get_balance", "consequential": false, "integrity": "trusted", "confidentiality": "secret"},
	"post_public": {"name": "post_public", "consequential": true, "clearance": "public"},
	"plain": {"name": "plain"},
}}

src(tool, integrity, confidentiality, message) := {
	"kind": "tool-return", "tool": tool, "tool_call_id": sprintf("c%v", [message]),
	"labels": [], "message": message, "part": 0,
	"integrity": integrity, "confidentiality": confidentiality,
}

user_src := {"kind": "user-prompt", "message": 0, "part": 0, "labels": []}

window(untrusted, sources) := {"untrusted": untrusted, "confidentiality": "internal", "sources": sources}

inbox_window := window(true, [{
	"kind": "tool-return", "tool": "read_inbox", "tool_call_id": "c2", "message": 1, "part": 0,
	"summarised": true, "integrity": "untrusted", "confidentiality": "confidential",
}])

test_a_call_that_is_not_consequential_is_a_trusted_action if {
	lib.trusted_action({"tool": "plain"}) with data.policycheck.registry as registry
	lib.untrusted_action_reasons({"tool": "plain"}) == [] with data.policycheck.registry as registry
}

test_trusted_action_with_trusted_or_declassified_arguments if {
	call := {
		"tool": "send_money", "window": inbox_window,
		"args_integrity": {"/to": "trusted", "/amount": "declassified"},
	}
	lib.trusted_action(call) with data.policycheck.registry as registry
}

# The engine's args_integrity with --flow-tokens: the recipient is, as a
# whole, an IBAN the user wrote in the prompt's sentence (a whole token
# flow): trusted, and the call a trusted action though the window held
# the inbox; a recipient that merely holds the IBAN is untrusted.
test_trusted_action_with_a_whole_identifier_of_the_user if {
	call := {
		"tool": "send_money", "window": inbox_window,
		"args_integrity": {"/to": "trusted", "/amount": "declassified"},
		"flows": [{"path": "/to", "match": "token", "token": "iban", "whole": true, "source": user_src}],
	}
	lib.trusted_action(call) with data.policycheck.registry as registry
	lib.untrusted_action_reasons(call) == [] with data.policycheck.registry as registry
}

test_an_argument_holding_an_identifier_of_the_user_is_not_a_trusted_action if {
	call := {
		"tool": "send_money", "window": inbox_window,
		"args_integrity": {"/to": "untrusted", "/amount": "declassified"},
		"flows": [{"path": "/to", "match": "token", "token": "iban", "whole": false, "source": user_src}],
	}
	not lib.trusted_action(call) with data.policycheck.registry as registry
	count(lib.untrusted_action_reasons(call)) == 1 with data.policycheck.registry as registry
}

test_trusted_action_with_an_untrusted_argument_in_a_clean_window if {
	call := {"tool": "send_money", "window": window(false, []), "args_integrity": {"/to": "untrusted"}}
	lib.trusted_action(call) with data.policycheck.registry as registry
}

# A provider's own web search in the window (a builtin-tool-return
# source): the reason names it as the provider's, at the return itself.
test_a_provider_side_return_in_the_window_is_named_as_the_providers if {
	call := {
		"tool": "send_money",
		"window": window(true, [{
			"kind": "builtin-tool-return", "tool": "web_search", "count": 1, "tool_call_id": "w1", "message": 1, "part": 1,
			"summarised": false, "integrity": "untrusted", "confidentiality": "internal",
		}]),
		"args_integrity": {"/to": "untrusted"},
	}
	not lib.trusted_action(call) with data.policycheck.registry as registry
	lib.untrusted_action_reasons(call) == [concat("", [
		"argument /to of send_money is untrusted: no trusted source gave it, and the window held ",
		"the provider's web_search return (tool_call_id w1, at message 1, part 1)",
	])] with data.policycheck.registry as registry
}

# A return whose call the history does not hold (an unpaired-return
# source): the reason says so, at the return itself.
test_an_unpaired_return_in_the_window_is_named_as_such if {
	call := {
		"tool": "send_money",
		"window": window(true, [{
			"kind": "unpaired-return", "tool": "read_file", "count": 1, "tool_call_id": "f1", "message": 2, "part": 0,
			"summarised": false, "integrity": "untrusted", "confidentiality": "internal",
		}]),
		"args_integrity": {"/to": "untrusted"},
	}
	not lib.trusted_action(call) with data.policycheck.registry as registry
	lib.untrusted_action_reasons(call) == [concat("", [
		"argument /to of send_money is untrusted: no trusted source gave it, and the window held ",
		"a read_file return that answers no call (tool_call_id f1, at message 2, part 0)",
	])] with data.policycheck.registry as registry
}

test_untrusted_argument_and_untrusted_window_is_not_a_trusted_action if {
	call := {
		"tool": "send_money", "window": inbox_window,
		"args_integrity": {"/to": "untrusted", "/amount": "declassified"},
		"flows": [{"path": "/to", "match": "contains", "source": src("read_inbox", "untrusted", "confidential", 2)}],
	}
	not lib.trusted_action(call) with data.policycheck.registry as registry
	lib.untrusted_action_reasons(call) == [concat("", [
		"argument /to of send_money is untrusted: it carries a value from tool-return ",
		"(read_inbox untrusted, tool_call_id c2, message 2, part 0)",
	])] with data.policycheck.registry as registry
}

# A value found in many returns: its reason names the three latest and
# counts the rest (a hostile history can put one value in thousands).
test_an_untrusted_reason_names_the_three_latest_sources if {
	call := {
		"tool": "send_money", "window": inbox_window,
		"args_integrity": {"/to": "untrusted"},
		"flows": [{"path": "/to", "match": "token", "source": src("read_inbox", "untrusted", "confidential", m)} |
			some m in [2, 4, 6, 8, 10]
		],
	}
	lib.untrusted_action_reasons(call) == [concat("", [
		"argument /to of send_money is untrusted: it carries a value from tool-return ",
		"(read_inbox untrusted, tool_call_id c6, message 6, part 0); a value from tool-return ",
		"(read_inbox untrusted, tool_call_id c8, message 8, part 0); a value from tool-return ",
		"(read_inbox untrusted, tool_call_id c10, message 10, part 0); and 2 more",
	])] with data.policycheck.registry as registry
}

# Flows of several arguments in any order: each argument's reason names
# its own sources, in the order of its flows.
test_untrusted_reasons_of_interleaved_flows if {
	call := {
		"tool": "send_money", "window": inbox_window,
		"args_integrity": {"/to": "untrusted", "/memo": "untrusted"},
		"flows": [
			{"path": "/to", "match": "token", "source": src("read_inbox", "untrusted", "confidential", 2)},
			{"path": "/memo", "match": "token", "source": src("read_inbox", "untrusted", "confidential", 3)},
			{"path": "/to", "match": "token", "source": src("read_inbox", "untrusted", "confidential", 4)},
		],
	}
	lib.untrusted_action_reasons(call) == [
		concat("", [
			"argument /memo of send_money is untrusted: it carries a value from tool-return ",
			"(read_inbox untrusted, tool_call_id c3, message 3, part 0)",
		]),
		concat("", [
			"argument /to of send_money is untrusted: it carries a value from tool-return ",
			"(read_inbox untrusted, tool_call_id c2, message 2, part 0); a value from tool-return ",
			"(read_inbox untrusted, tool_call_id c4, message 4, part 0)",
		]),
	] with data.policycheck.registry as registry
}

# Past a few dozen flows they are grouped by argument once: the same
# reasons, for arguments whose flows are interleaved.
test_many_flows_are_grouped_by_argument if {
	flows := [f |
		some m in numbers.range(1, 70)
		path := ["/memo", "/to"][m % 2]
		f := {"path": path, "match": "token", "source": src("get_balance", "trusted", "secret", m)}
	]
	call := {
		"tool": "send_money", "window": inbox_window,
		"args_integrity": {"/to": "untrusted", "/memo": "untrusted"}, "flows": flows,
	}
	lib.untrusted_action_reasons(call) == [
		concat("", [
			"argument /memo of send_money is untrusted: it carries a value from tool-return ",
			"(get_balance trusted, tool_call_id c66, message 66, part 0); a value from tool-return ",
			"(get_balance trusted, tool_call_id c68, message 68, part 0); a value from tool-return ",
			"(get_balance trusted, tool_call_id c70, message 70, part 0); and 32 more",
		]),
		concat("", [
			"argument /to of send_money is untrusted: it carries a value from tool-return ",
			"(get_balance trusted, tool_call_id c65, message 65, part 0); a value from tool-return ",
			"(get_balance trusted, tool_call_id c67, message 67, part 0); a value from tool-return ",
			"(get_balance trusted, tool_call_id c69, message 69, part 0); and 32 more",
		]),
	] with data.policycheck.registry as registry
	lib.flow_violation_reasons(call) == [
		concat("", [
			"argument /memo of send_money carries a secret value from get_balance (tool_call_id c66, message 66, part 0); ",
			"a secret value from get_balance (tool_call_id c68, message 68, part 0); ",
			"a secret value from get_balance (tool_call_id c70, message 70, part 0); and 32 more, above its clearance internal",
		]),
		concat("", [
			"argument /to of send_money carries a secret value from get_balance (tool_call_id c65, message 65, part 0); ",
			"a secret value from get_balance (tool_call_id c67, message 67, part 0); ",
			"a secret value from get_balance (tool_call_id c69, message 69, part 0); and 32 more, above its clearance internal",
		]),
	] with data.policycheck.registry as registry
}

# One reason per argument above the clearance, however many flows carry
# it there: the three latest named, the rest counted; an argument within
# the clearance has none.
test_flow_violation_reasons_are_one_per_argument if {
	call := {"tool": "send_money", "flows": array.concat(
		[{"path": "/memo", "match": "contains", "source": src("get_balance", "trusted", "secret", m)} |
			some m in [3, 5, 7, 9]
		],
		[
			{"path": "/note", "match": "token", "source": src("read_inbox", "untrusted", "confidential", 4)},
			{"path": "/to", "match": "exact", "source": src("plain", "untrusted", "internal", 6)},
		],
	)}
	lib.flow_violation_reasons(call) == [
		concat("", [
			"argument /memo of send_money carries a secret value from get_balance (tool_call_id c5, message 5, part 0); ",
			"a secret value from get_balance (tool_call_id c7, message 7, part 0); ",
			"a secret value from get_balance (tool_call_id c9, message 9, part 0); and 1 more, above its clearance internal",
		]),
		concat("", [
			"argument /note of send_money carries a confidential value from read_inbox ",
			"(tool_call_id c4, message 4, part 0), above its clearance internal",
		]),
	] with data.policycheck.registry as registry
}

test_an_argument_no_flow_reaches_names_the_window if {
	call := {"tool": "send_money", "window": inbox_window, "args_integrity": {"/to": "untrusted"}, "flows": []}
	not lib.trusted_action(call) with data.policycheck.registry as registry
	lib.untrusted_action_reasons(call) == [concat("", [
		"argument /to of send_money is untrusted: no trusted source gave it, and the window held ",
		"read_inbox's return (tool_call_id c2, call at message 1, part 0, through a compaction summary)",
	])] with data.policycheck.registry as registry
}

test_a_consequential_call_without_its_labels_fails_closed if {
	not lib.trusted_action({"tool": "send_money"}) with data.policycheck.registry as registry
	lib.untrusted_action_reasons({"tool": "send_money"}) == [
		"send_money is consequential and what its arguments and window hold could not be checked",
	] with data.policycheck.registry as registry
}

test_source_label_trusts_prompt_parts_and_defaults_others if {
	lib.source_label(user_src) == {"integrity": "trusted", "confidentiality": "internal"}
	lib.source_label({"kind": "system-prompt", "message": 0, "part": 0}).integrity == "trusted"
	lib.source_label({"tool": "x", "message": 1, "part": 0}) == {"integrity": "untrusted", "confidentiality": "internal"}
	lib.source_label(src("get_balance", "trusted", "secret", 3)) == {"integrity": "trusted", "confidentiality": "secret"}
}

test_value_label_is_the_join_of_its_sources if {
	call := {"tool": "send_money", "flows": [
		{"path": "/to", "match": "exact", "source": src("get_balance", "trusted", "secret", 3)},
		{"path": "/to", "match": "contains", "source": src("read_inbox", "untrusted", "confidential", 2)},
		{"path": "/memo", "match": "exact", "source": user_src},
	]}
	lib.value_label(call, "/to") == {"integrity": "untrusted", "confidentiality": "secret"}
	lib.value_label(call, "/memo") == {"integrity": "trusted", "confidentiality": "internal"}
	lib.value_label(call, "/none") == {"integrity": "trusted", "confidentiality": "public"}
}

test_clearance_defaults_to_internal if {
	lib.clearance("post_public") == "public" with data.policycheck.registry as registry
	lib.clearance("plain") == "internal" with data.policycheck.registry as registry
	lib.clearance("unknown") == "internal" with data.policycheck.registry as registry
}

test_permitted_flow_refuses_a_value_above_the_clearance if {
	call := {"tool": "send_money", "flows": [
		{"path": "/memo", "match": "contains", "source": src("get_balance", "trusted", "secret", 3)},
		{"path": "/to", "match": "exact", "source": src("plain", "untrusted", "internal", 4)},
	]}
	not lib.permitted_flow(call) with data.policycheck.registry as registry
		with input as {"facts": {"flow_index_truncated": false}}
	lib.flow_violation_reasons(call) == [concat("", [
		"argument /memo of send_money carries a secret value from get_balance ",
		"(tool_call_id c3, message 3, part 0), above its clearance internal",
	])] with data.policycheck.registry as registry
}

test_permitted_flow_within_the_clearance if {
	flow := {"path": "/to", "match": "exact", "source": src("plain", "untrusted", "internal", 4)}
	call := {"tool": "send_money", "flows": [flow]}
	lib.permitted_flow(call) with data.policycheck.registry as registry
		with input as {"facts": {"flow_index_truncated": false}}
}

test_permitted_flow_fails_closed_on_incomplete_flows if {
	call := {"tool": "send_money", "flows": []}
	not lib.permitted_flow(call) with data.policycheck.registry as registry
		with input as {"facts": {"flow_index_truncated": true}}
	not lib.permitted_flow({"tool": "send_money"}) with data.policycheck.registry as registry
		with input as {"facts": {"flow_index_truncated": false}}
}

test_consequential_reads_the_registry if {
	lib.consequential("send_money") with data.policycheck.registry as registry
	not lib.consequential("read_inbox") with data.policycheck.registry as registry
	not lib.consequential("unknown") with data.policycheck.registry as registry
}

test_reasons_name_a_window_return_seen_directly_and_the_whole_arguments if {
	w := window(true, [{
		"tool": "read_inbox", "tool_call_id": "c2", "message": 1, "part": 0,
		"summarised": false, "integrity": "untrusted", "confidentiality": "confidential",
	}])
	call := {"tool": "send_money", "window": w, "args_integrity": {"": "untrusted"}, "flows": []}
	lib.untrusted_action_reasons(call) == [concat("", [
		"argument (the whole arguments) of send_money is untrusted: no trusted source gave it, and the window held ",
		"read_inbox's return (tool_call_id c2, call at message 1, part 0)",
	])] with data.policycheck.registry as registry
}

test_a_call_that_is_not_consequential_has_no_reasons if {
	call := {"tool": "plain", "window": inbox_window, "args_integrity": {"/x": "untrusted"}}
	lib.untrusted_action_reasons(call) == [] with data.policycheck.registry as registry
}

test_a_flow_at_another_argument_is_not_the_source if {
	call := {
		"tool": "send_money", "window": inbox_window, "args_integrity": {"/to": "untrusted", "/memo": "trusted"},
		"flows": [{"path": "/memo", "match": "exact", "source": user_src}],
	}
	lib.untrusted_action_reasons(call) == [concat("", [
		"argument /to of send_money is untrusted: no trusted source gave it, and the window held ",
		"read_inbox's return (tool_call_id c2, call at message 1, part 0, through a compaction summary)",
	])] with data.policycheck.registry as registry
}

# A user-prompt part beside read_file's return (pydantic-ai puts a tool's
# files there): not the user's word, its label the engine's join.
test_a_prompt_beside_a_tool_return_is_not_the_users if {
	beside := object.union(user_src, {"beside": ["read_file"], "integrity": "untrusted", "confidentiality": "internal"})
	lib.source_label(beside) == {"integrity": "untrusted", "confidentiality": "internal"}
	lib.source_label(object.remove(beside, ["integrity", "confidentiality"])).integrity == "untrusted"
	lib.source_label(user_src).integrity == "trusted"
	call := {
		"tool": "send_money", "window": inbox_window,
		"args_integrity": {"/to": "untrusted"},
		"flows": [{"path": "/to", "match": "exact", "source": object.union(beside, {"message": 2, "part": 1})}],
	}
	lib.untrusted_action_reasons(call) == [concat("", [
		"argument /to of send_money is untrusted: it carries a value from user-prompt ",
		"beside read_file's return (untrusted, message 2, part 1)",
	])] with data.policycheck.registry as registry
}

# One window source per tool: a tool whose returns the model saw several
# times is named once, with how many and the latest call; some of them
# through a compaction summary.
test_a_window_source_of_several_returns_names_the_latest if {
	w := window(true, [
		{
			"kind": "builtin-tool-return", "tool": "web_search", "count": 2, "tool_call_id": "w2",
			"message": 3, "part": 1, "summarised": false, "integrity": "untrusted", "confidentiality": "internal",
		},
		{
			"kind": "tool-return", "tool": "read_inbox", "count": 4, "tool_call_id": "c9", "message": 5, "part": 0,
			"summarised": true, "integrity": "untrusted", "confidentiality": "confidential",
		},
	])
	call := {"tool": "send_money", "window": w, "args_integrity": {"/to": "untrusted"}, "flows": []}
	lib.untrusted_action_reasons(call) == [concat("", [
		"argument /to of send_money is untrusted: no trusted source gave it, and the window held ",
		"the provider's 2 web_search returns (the latest tool_call_id w2, at message 3, part 1); ",
		"read_inbox's 4 returns (the latest tool_call_id c9, call at message 5, part 0, some through a compaction summary)",
	])] with data.policycheck.registry as registry
}

# A reason names at most the three latest window sources, and how many
# more there are.
test_a_reason_names_the_three_latest_window_sources if {
	w := window(true, [{
		"kind": "tool-return", "tool": tool, "count": 1, "tool_call_id": id, "message": i, "part": 0,
		"summarised": false, "integrity": "untrusted", "confidentiality": "internal",
	} |
		some i, tool in ["t0", "t1", "t2", "t3", "t4"]
		id := sprintf("c%d", [i])
	])
	call := {"tool": "send_money", "window": w, "args_integrity": {"/to": "untrusted"}, "flows": []}
	lib.untrusted_action_reasons(call) == [concat("", [
		"argument /to of send_money is untrusted: no trusted source gave it, and the window held ",
		"t2's return (tool_call_id c2, call at message 2, part 0); ",
		"t3's return (tool_call_id c3, call at message 3, part 0); ",
		"t4's return (tool_call_id c4, call at message 4, part 0); and 2 more",
	])] with data.policycheck.registry as registry
}

# Several returns of one tool that answer no call: one source, counted.
test_several_unpaired_returns_of_a_tool_are_counted if {
	w := window(true, [{
		"kind": "unpaired-return", "tool": "read_file", "count": 2, "tool_call_id": "f2",
		"message": 4, "part": 0, "summarised": false, "integrity": "untrusted", "confidentiality": "internal",
	}])
	call := {"tool": "send_money", "window": w, "args_integrity": {"/to": "untrusted"}, "flows": []}
	lib.untrusted_action_reasons(call) == [concat("", [
		"argument /to of send_money is untrusted: no trusted source gave it, and the window held ",
		"2 read_file returns that answer no call (the latest tool_call_id f2, at message 4, part 0)",
	])] with data.policycheck.registry as registry
}

# Exactly three window sources are all named, with no "and 0 more".
test_a_reason_names_three_window_sources_and_no_more if {
	w := window(true, [{
		"kind": "tool-return", "tool": tool, "count": 1, "tool_call_id": id, "message": i, "part": 0,
		"summarised": false, "integrity": "untrusted", "confidentiality": "internal",
	} |
		some i, tool in ["t0", "t1", "t2"]
		id := sprintf("c%d", [i])
	])
	call := {"tool": "send_money", "window": w, "args_integrity": {"/to": "untrusted"}, "flows": []}
	lib.untrusted_action_reasons(call) == [concat("", [
		"argument /to of send_money is untrusted: no trusted source gave it, and the window held ",
		"t0's return (tool_call_id c0, call at message 0, part 0); ",
		"t1's return (tool_call_id c1, call at message 1, part 0); ",
		"t2's return (tool_call_id c2, call at message 2, part 0)",
	])] with data.policycheck.registry as registry
}
