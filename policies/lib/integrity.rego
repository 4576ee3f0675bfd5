# Integrity and confidentiality, part of package policycheck.lib (the
# package's METADATA is in lib.rego). The stock rules on the labels of a call's
# values (docs/registry.md, "Integrity and confidentiality"): a trusted
# action (a consequential call whose arguments the user, the system
# prompt or a trusted tool gave, or whose window held nothing untrusted)
# and a permitted flow (no value above the sink's clearance). They read
# input.call.args_integrity, input.call.window and input.call.flows,
# which the engine builds only for a policy set that reads them, and
# the registry's integrity, confidentiality, clearance and consequential
# fields (data.policycheck.registry.tools), with the registry's defaults
# for a tool that sets none.
package policycheck.lib

# The registry's defaults (facts.DefaultIntegrity and the others): an
# unlabelled tool's returns are untrusted and internal, its clearance
# internal.
_default_integrity := "untrusted"

_default_confidentiality := "internal"

_default_clearance := "internal"

_rank := {"public": 0, "internal": 1, "confidential": 2, "secret": 3}

_prompt_kinds := {"user-prompt", "system-prompt"}

# METADATA
# title: consequential
# description: |
#   The tool is marked consequential in the registry (its own
#   `consequential: true` or its capability's): a call of it acts on the
#   world.
consequential(tool) if data.policycheck.registry.tools[tool].consequential == true

# METADATA
# title: source_label
# description: |
#   The label of a flow's source ({"integrity", "confidentiality"}): a
#   user or system prompt part is trusted, unless it shares its request
#   with tool returns (`beside`: it may hold what they returned, and
#   carries their label as the engine wrote it, or the default untrusted);
#   a return has its tool's label as the engine wrote it on the source, or
#   the defaults (untrusted, internal) when the registry sets no flow
#   label.
source_label(src) := {
	"integrity": "trusted",
	"confidentiality": object.get(src, "confidentiality", _default_confidentiality),
} if {
	src.kind in _prompt_kinds
	count(object.get(src, "beside", [])) == 0
} else := {
	"integrity": object.get(src, "integrity", _default_integrity),
	"confidentiality": object.get(src, "confidentiality", _default_confidentiality),
}

# METADATA
# title: value_label
# description: |
#   The label of the value at JSON pointer `path` of the call's arguments:
#   the join of its sources' labels (the lowest integrity, the highest
#   confidentiality); trusted and public when no flow reaches it.
value_label(call, path) := {
	"integrity": _lowest_integrity(labels),
	"confidentiality": _highest_confidentiality(labels),
} if {
	labels := [source_label(f.source) | some f in object.get(call, "flows", []); f.path == path]
}

_lowest_integrity(labels) := "untrusted" if {
	some l in labels
	l.integrity == "untrusted"
} else := "trusted"

_highest_confidentiality(labels) := level if {
	top := max(array.concat([0], [_rank[l.confidentiality] | some l in labels]))
	some level, r in _rank
	r == top
}

# METADATA
# title: clearance
# description: |
#   The tool's clearance: the highest confidentiality a value may have to
#   go into its arguments (the registry's, internal by default).
clearance(tool) := object.get(data.policycheck.registry.tools, [tool, "clearance"], _default_clearance)

# METADATA
# title: trusted_action
# description: |
#   The call may act on the user's behalf: it is not consequential; or
#   each argument value is trusted (equal to what the user, the system
#   prompt or a trusted tool wrote) or declassified (the tool's schema
#   constrains it to few values); or the window the model saw before it
#   held nothing untrusted (a compaction summary written after an
#   untrusted return counts as untrusted). Fails closed: a consequential
#   call without input.call.args_integrity and input.call.window (an
#   input recorded without them) is not a trusted action.
trusted_action(call) if not consequential(call.tool)

# (A call that is not consequential is one by the rule above: the two
# below need not say it is. Without args_integrity, `every` has no domain
# and is not true.)
trusted_action(call) if {
	every level in call.args_integrity {
		level in {"trusted", "declassified"}
	}
}

trusted_action(call) if call.window.untrusted == false

# METADATA
# title: untrusted_action_reasons
# description: |
#   Why the call is not a trusted action, one reason per untrusted
#   argument value, naming where it came from (the source's tool,
#   tool_call_id, message and part) or, for a value no flow reaches, the
#   tools whose untrusted returns the window held (the three latest, and
#   how many more); empty for a trusted action.
untrusted_action_reasons(call) := [] if trusted_action(call)

# (Not a trusted action with args_integrity: some argument is untrusted.)
else := [_untrusted_reason(call, path) |
	some path, level in call.args_integrity
	level == "untrusted"
] if {
	call.args_integrity
} else := [sprintf("%v is consequential and what its arguments and window hold could not be checked", [call.tool])]

# The sources of the value's flows (in history order) in words: the
# three latest, and how many more. The sources are gathered first and
# then counted: a condition that enumerated the flows would compute the
# words once per flow.
_untrusted_reason(call, path) := sprintf("argument %v of %v is untrusted: it carries %v", [
	_pointer(path), call.tool,
	_and_more(concat("; ", [_source_words(s) | some s in latest.items]), latest.more),
]) if {
	srcs := _sources_of(object.get(call, "flows", []), path)
	count(srcs) > 0
	latest := _latest_three(srcs)
} else := sprintf("argument %v of %v is untrusted: no trusted source gave it, and the window held %v", [
	_pointer(path), call.tool,
	_and_more(concat("; ", [_window_words(s) | some s in latest.items]), latest.more),
]) if {
	# The window's sources: one per tool, in history order of their
	# latest return.
	latest := _latest_three(object.get(call, ["window", "sources"], []))
}

# The sources of the flows of the argument at path, in the order of the
# flows. A scan of the flows per argument costs arguments times flows,
# which a hostile history can make large (a hundred arguments each
# carrying a value quoted in a hundred returns); past a few dozen flows
# they are grouped by argument once (_sources_by_path), which costs more
# for a few.
_sources_of(flows, path) := object.get(_sources_by_path(flows), path, []) if count(flows) > 64

else := [f.source | some f in flows; f.path == path]

# The sources of flows by argument (JSON pointer), each argument's in
# the order of its flows: one sort and one pass, however many arguments
# and flows.
_sources_by_path(flows) := {pairs[s][0]: [flows[pairs[j][1]].source | some j in numbers.range(s, e)] |
	pairs := sort([[f.path, i] | some i, f in flows])
	starts := [i | some i, _ in pairs; _starts_group(pairs, i)]
	some k, s in starts
	e := _group_last(starts, k, count(pairs))
}

# Whether the sorted pairs start a new argument at i.
_starts_group(_, 0)

_starts_group(pairs, i) if pairs[i - 1][0] != pairs[i][0]

# The last index of the k-th group of n pairs that start at starts: the
# next group's start less one, or the last pair's.
_group_last(starts, k, n) := last if {
	last := starts[k + 1] - 1
} else := n - 1

# The last three of xs (in history order: the latest), and how many
# come before them.
_latest_three(xs) := {"items": array.slice(xs, count(xs) - 3, count(xs)), "more": count(xs) - 3} if count(xs) > 3

else := {"items": xs, "more": 0}

# words, and how many more there are when some.
_and_more(words, more) := words if more == 0

else := sprintf("%v; and %v more", [words, more])

_source_words(src) := sprintf("a value from %v beside %v's return (%v, message %v, part %v)", [
	src.kind, concat(", ", beside),
	label.integrity, src.message, src.part,
]) if {
	beside := object.get(src, "beside", [])
	count(beside) > 0
	label := source_label(src)
} else := sprintf("a value from %v (%v %v, tool_call_id %v, message %v, part %v)", [
	object.get(src, "kind", "tool-return"), object.get(src, "tool", null),
	label.integrity, object.get(src, "tool_call_id", null), src.message, src.part,
]) if {
	label := source_label(src)
}

_window_words(s) := sprintf("the provider's %v return (tool_call_id %v, at message %v, part %v%v)", [
	s.tool, s.tool_call_id, s.message, s.part,
	_summarised_words(s),
]) if {
	s.kind == "builtin-tool-return"
	object.get(s, "count", 1) == 1
} else := sprintf("the provider's %v %v returns (the latest tool_call_id %v, at message %v, part %v%v)", [
	s.count, s.tool, s.tool_call_id, s.message, s.part,
	_summarised_words(s),
]) if {
	s.kind == "builtin-tool-return"
} else := sprintf("a %v return that answers no call (tool_call_id %v, at message %v, part %v%v)", [
	s.tool, s.tool_call_id, s.message, s.part,
	_summarised_words(s),
]) if {
	s.kind == "unpaired-return"
	object.get(s, "count", 1) == 1
} else := sprintf("%v %v returns that answer no call (the latest tool_call_id %v, at message %v, part %v%v)", [
	s.count, s.tool, s.tool_call_id, s.message, s.part,
	_summarised_words(s),
]) if {
	s.kind == "unpaired-return"
} else := sprintf("%v's return (tool_call_id %v, call at message %v, part %v%v)", [
	s.tool, s.tool_call_id, s.message, s.part,
	_summarised_words(s),
]) if {
	object.get(s, "count", 1) == 1
} else := sprintf("%v's %v returns (the latest tool_call_id %v, call at message %v, part %v%v)", [
	s.tool, s.count, s.tool_call_id, s.message, s.part,
	_summarised_words(s),
])

_summarised_words(s) := ", through a compaction summary" if {
	s.summarised
	object.get(s, "count", 1) == 1
} else := ", some through a compaction summary" if s.summarised

else := ""

# METADATA
# title: permitted_flow
# description: |
#   No argument value of the call is above its tool's clearance: every
#   flow's source has a confidentiality at most the clearance. Fails
#   closed: the flows must be complete (lib.flows_complete).
permitted_flow(call) if {
	flows_complete(call)
	count(flow_violation_reasons(call)) == 0
}

# METADATA
# title: flow_violation_reasons
# description: |
#   One reason per argument of the call that carries a value above the
#   tool's clearance (in the order of their JSON pointers), naming it and
#   the clearance and, for each such flow, the source's level, tool,
#   tool_call_id, message and part: the three latest, and how many more.
flow_violation_reasons(call) := [reason |
	violations := _violations(call)
	some path in {f.path | some f in violations}
	latest := _latest_three(_sources_of(violations, path))
	reason := sprintf("argument %v of %v carries %v, above its clearance %v", [
		_pointer(path), call.tool,
		_and_more(concat("; ", [_violation_words(src) | some src in latest.items]), latest.more),
		clearance(call.tool),
	])
]

# The flows of the call whose source is above the tool's clearance, in
# order.
_violations(call) := [f |
	some f in object.get(call, "flows", [])
	_rank[source_label(f.source).confidentiality] > _rank[clearance(call.tool)]
]

_violation_words(src) := sprintf("a %v value from %v (tool_call_id %v, message %v, part %v)", [
	source_label(src).confidentiality, object.get(src, "tool", null),
	object.get(src, "tool_call_id", null), src.message, src.part,
])

_pointer(p) := "(the whole arguments)" if p == ""

else := p
