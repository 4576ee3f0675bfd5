# METADATA
# title: The availability gate
# description: |
#   The one definition of "available" (spec §6 V2) as set algebra, and the
#   verdict of a call (spec §8). Advertisement, execution and explanations
#   all read these functions.
#
#   Performance: the engine hands every name list as a set and keeps the
#   registry's sets in data, so each rule is a handful of set operations
#   implemented in Go; no rule iterates the registry. Each rule and function
#   evaluation costs a few microseconds, so the rules are kept few and flat.
#   A JSON input document (opa eval -i, OPA's REST API, a recorded fixture)
#   and JSON registry data (policycheck registry) hold arrays instead of
#   sets: policycheck.availability.decision then evaluates these rules with
#   input_sets and registry_sets in their place, the documents the engine
#   would hand. With sets (the engine's case) nothing is converted.
package policycheck.lib.gate

_registry := data.policycheck.registry

# The name lists of the input document (docs/input.md), as paths: the
# fields of internal/contract.Input tagged rego:"set", outside arrays.
# BEGIN GENERATED input-set-paths (go generate ./internal/contract)
_input_set_paths := [
	["facts", "discovered"],
	["facts", "loaded"],
	["facts", "returned"],
	["facts", "active_capabilities"],
	["outgoing", "discovered"],
	["outgoing", "loaded"],
	["filters", "next", "dropped"],
	["filters", "dispatch", "dropped"],
	["dispatch", "loaded"],
	["dispatch", "evidence", "discovered"],
	["dispatch", "evidence", "loaded"],
	["dispatch", "active_capabilities"],
	["dispatch", "same_response", "revealed"],
	["dispatch", "same_response", "pending_loads"],
]

# END GENERATED input-set-paths

# The name lists of the registry data, as paths.
_registry_set_paths := [
	["names"],
	["always_available"],
	["search_gated"],
	["deferred_capabilities"],
	["always_on_capabilities"],
	["requires_approval"],
]

# The patch turning every name list of doc at paths that is an array into
# a set (empty when there is none).
_set_patch(doc, paths) := [{"op": "replace", "path": p, "value": {x | some x in v}} |
	some p in paths
	v := object.get(doc, p, null)
	is_array(v)
]

# The same for the name lists one level down, in an object of them.
_map_set_patch(doc, key) := [{"op": "replace", "path": [key, k], "value": {x | some x in v}} |
	some k, v in object.get(doc, key, {})
	is_array(v)
]

# METADATA
# title: input_sets
# description: The input document with every array name list turned into a set.
input_sets := json.patch(input, _set_patch(input, _input_set_paths))

# METADATA
# title: registry_sets
# description: data.policycheck.registry with every array name list turned into a set.
registry_sets := json.patch(data.policycheck.registry, array.flatten([
	_set_patch(data.policycheck.registry, _registry_set_paths),
	_map_set_patch(data.policycheck.registry, "capability_tools"),
	_map_set_patch(data.policycheck.registry, "owned_tools"),
]))

_framework := {"load_capability", "search_tools"}

# METADATA
# scope: document
# title: failed
# description: |
#   A capability filter failed: the decision fails closed.
default failed := false

failed if count(input.filters.errors) > 0

# METADATA
# scope: document
# title: log_only
# description: |
#   The operator rule packages (keys under policycheck.rules) marked
#   log-only in their METADATA (custom.policycheck.enforcement: log_only):
#   their hide and deny results are reported (would_hide, would_deny), not
#   enforced. The engine writes the set at load; empty when none is.
default log_only := set()

log_only := data.policycheck.log_only

# METADATA
# title: hidden
# description: Tools hidden for this request by enforced operator rules (policycheck.rules.*.hide).
hidden contains name if {
	some pkg
	hide := data.policycheck.rules[pkg].hide
	some name in hide
	not pkg in log_only
}

# METADATA
# title: would_hide
# description: |
#   Tools the log-only operator rules would hide for this request (not
#   enforced). Performance: the packages come first, so a policy set
#   without hide rules never evaluates log_only.
would_hide contains name if {
	some pkg
	hide := data.policycheck.rules[pkg].hide
	some name in hide
	pkg in log_only
}

# METADATA
# title: present_framework
# description: |
#   The framework tools present when the filters and the rules removed
#   `removed`: load_capability while some capability is deferred,
#   search_tools while some search-gated tool survives.
present_framework(removed) := _framework if {
	count(_registry.deferred_capabilities) > 0
	count(_registry.search_gated) > count(_registry.search_gated & removed)
} else := {"load_capability"} if {
	count(_registry.deferred_capabilities) > 0
} else := {"search_tools"} if {
	count(_registry.search_gated) > count(_registry.search_gated & removed)
} else := set()

# METADATA
# title: available
# description: |
#   The tools available given discovered names and loaded capability ids
#   (spec §6 V2): always-on tools, revealed search-gated tools, and the
#   tools of loaded deferred capabilities (a load is the reveal; loads of
#   always-on or unregistered capabilities reveal nothing), less what the
#   filters dropped and the rules hid, plus the framework tools present.
#   Performance (measured on OPA v1.22): a set operation builds a new set
#   from its operands, and a difference or union() sorts them first (sets
#   held in data are sorted once, sets built per decision every time);
#   | and & with an empty operand return the other. Joining the parts as
#   a set of sets with one union() measured fastest, the registry-sized
#   set is subtracted from only when something was removed, and the
#   framework tools, never removed, join last.
available(discovered, loaded, filters) := union(parts) if {
	removed := filters.dropped | hidden
	count(removed) == 0
	gated := _registry.search_gated & discovered
	parts := {_registry.always_available, gated, present_framework(removed)} | loaded_tools(loaded)
} else := union({
	_registry.always_available - removed,
	union({_registry.search_gated & discovered} | loaded_tools(loaded)) - removed,
	present_framework(removed),
}) if {
	removed := filters.dropped | hidden
}

# METADATA
# title: loaded_tools
# description: |
#   The tool sets of the loaded deferred capabilities, one set per
#   capability (loads of always-on or unregistered capabilities reveal
#   nothing).
loaded_tools(loaded) := {_registry.capability_tools[id] | some id in loaded}

# METADATA
# title: available_now
# description: |
#   The tools callable by the response being dispatched: the facts widened
#   by the serving provider's anchored evidence (spec §5), under the
#   filters of the dispatch-active capabilities (seed 000).
#   Performance: a union with an empty set is its other operand, not a
#   copy, so without evidence nothing is copied here.
available_now := available(
	input.facts.discovered | input.dispatch.evidence.discovered,
	input.dispatch.loaded | input.dispatch.evidence.loaded,
	input.filters.dispatch,
)

# METADATA
# title: verdict
# description: |
#   The verdict of one call of the dispatched response: unknown_tool when
#   the name is not in the resolved set, not_available_yet when it is but
#   the gate refuses it, denied when an operator rule denies it or the
#   approval bound to it (input.call.approval) is a denial,
#   approval_required when an operator rule or the registry asks a person
#   to approve it first, else execute. A failed filter denies every call.
#   The gate wins over deny, deny over require_approval: an approval never
#   widens availability. After the gate and before any operator rule, a
#   call whose arguments fail its tool's parameters_json_schema (marked
#   invalid_args) gets invalid_args: no deny, require_approval or log-only
#   rule is evaluated on it; rules see the arguments it would execute with.
verdict(call) := {
	"verdict": "denied", "rule": "filter_error",
	"reason": "a capability filter failed: the decision fails closed",
} if {
	failed
} else := {
	"verdict": "unknown_tool", "rule": "unknown_tool",
	"reason": unknown_reason(call.tool), "by": removed_by(call.tool),
} if {
	not call_resolved(call)
} else := {
	"verdict": "not_available_yet", "rule": "gate",
	"form": unavailable_form(call.tool), "reason": unavailable_reason(call.tool),
} if {
	not call.tool in _framework
	not call.tool in available_now
} else := {
	"verdict": "invalid_args", "rule": "args",
	"reason": sprintf("the arguments of %q fail its parameters_json_schema", [call.tool]),
} if {
	call.invalid_args == true
} else := {"verdict": "denied", "rule": "deny", "denials": denials(call)} if {
	count(denials(call)) > 0
} else := {"verdict": "denied", "rule": "approval_denied"} if {
	call.approval.kind == "tool-denied"
} else := {"verdict": "approval_required", "rule": "require_approval", "requests": require_approvals(call)} if {
	approval_rules
	count(require_approvals(call)) > 0
} else := {"verdict": "execute", "rule": "gate", "would_deny": would_deny(call)} if {
	count(would_deny(call)) > 0
} else := {"verdict": "execute", "rule": "gate"}

# METADATA
# title: unknown_reason
# description: |
#   Why a called name is outside the resolved tool set, when it is not a
#   registry tool; a removed registry tool's reasons are removed_by.
unknown_reason(tool) := sprintf("%q is neither a registry tool nor a framework tool present in this run", [tool]) if {
	not tool in _registry.names
} else := ""

# METADATA
# title: removed_by
# description: |
#   What removed a registry tool from the dispatch: the capability
#   filters (the engine names which) and each rules package hiding it.
removed_by(tool) := array.concat(
	[{"rule": "prepare_tools"} | tool in input.filters.dispatch.dropped],
	[{"package": pkg, "rule": "hide"} | some pkg; tool in data.policycheck.rules[pkg].hide],
)

# METADATA
# title: unavailable_reason
# description: |
#   Why the gate refuses a resolved tool at dispatch: its owner is a
#   deferred capability not loaded, or it is search-gated and unrevealed,
#   in the window the serving provider sees.
unavailable_reason(tool) := sprintf(
	concat("", [
		"%q belongs to deferred capability %q, which is not loaded in the window the serving provider sees ",
		"(from message %v, part %v); a load in the same response does not count",
	]),
	[tool, _registry.tools[tool].capability, _window.message, _window.part],
) if {
	_registry.tools[tool].gate == "capability"
} else := sprintf(
	"%q is search-gated and was not revealed in the window the serving provider sees (from message %v, part %v)",
	[tool, _window.message, _window.part],
) if {
	_registry.tools[tool].gate == "search"
} else := sprintf("%q refused by the availability rule", [tool])

# The start of the window the serving provider sees (a unit test's input
# may hold none).
_window := object.get(input, ["dispatch", "window"], {"message": "?", "part": "?"})

# METADATA
# scope: document
# title: call_resolved
# description: |
#   The called name is in the resolved tool set of the dispatch: a registry
#   tool no filter dropped and no rule hid, or a framework tool present.
call_resolved(call) if {
	call.tool in _registry.names
	not call.tool in input.filters.dispatch.dropped
	not call.tool in hidden
}

call_resolved(call) if call.tool in present_framework(input.filters.dispatch.dropped | hidden)

# METADATA
# title: unavailable_form
# description: |
#   Which refusal the model gets (spec X5): the capability form when the
#   tool's owner is not active (plain active set: always-on plus loaded),
#   else the search form.
unavailable_form(tool) := {"form": "capability", "capability": cap} if {
	cap := _registry.tools[tool].capability
	cap != null
	not cap in _registry.always_on_capabilities
	not cap in input.dispatch.loaded
} else := {"form": "search"}

# METADATA
# title: denials
# description: |
#   The operator denials of one call, from every policycheck.rules package,
#   which see the decision's input with the call as input.call.
#   Performance: OPA v1.22 deep-copies the whole input for `with input.call
#   as …`, and takes the document as given for `with input as …`, so the
#   call joins a shallow merge of the input.
denials(call) := [d |
	call_input := input_with_call(call)
	some pkg
	ds := data.policycheck.rules[pkg].deny with input as call_input
	not pkg in log_only
	some d in denials_of(pkg, ds)
]

# METADATA
# title: would_deny
# description: |
#   The denials of one call by the log-only operator rule packages: what
#   they would deny, reported with an execute verdict, not enforced.
would_deny(call) := [d |
	some pkg in log_only
	ds := data.policycheck.rules[pkg].deny with input as input_with_call(call)
	some d in denials_of(pkg, ds)
]

# METADATA
# scope: document
# title: approval_rules
# description: |
#   Some policycheck.rules package may define require_approval, or the
#   registry asks approval for some tool: false only when the engine says
#   no package does (data.policycheck.rule_kinds, written when it compiles
#   the policy set) and the registry marks no tool, so that no call pays
#   for the per-call evaluation. Without that document, as under stock opa test, it is true
#   and every call is evaluated. Performance: a complete rule is evaluated
#   once per decision; a `not` in the verdict would cost every call.
default approval_rules := true

approval_rules := false if {
	kinds := data.policycheck.rule_kinds
	not "require_approval" in kinds
	count(object.get(_registry, "requires_approval", set())) == 0
}

# METADATA
# title: require_approvals
# description: |
#   The approval requests for one call, from every policycheck.rules
#   package's require_approval, which sees the decision's input with the
#   call as input.call (as deny does), the approval bound to it, if any,
#   as input.call.approval: an element present means the call still needs
#   a person's yes.
require_approvals(call) := array.concat(registry_approvals(call), [r |
	call_input := input_with_call(call)
	some pkg
	rs := data.policycheck.rules[pkg].require_approval with input as call_input
	some r in requests_of(pkg, rs)
])

# METADATA
# title: registry_approvals
# description: |
#   The registry's approval request for one call, with the package "": its
#   tool is in data.policycheck.registry.requires_approval (marked
#   requires_approval, or owned by a capability marked so) and no approval
#   of kind tool-approved is bound to it. Empty otherwise.
registry_approvals(call) := [{
	"package": "",
	"reason": sprintf("the registry marks %q requires_approval", [call.tool]),
	"message": "",
}] if {
	call.tool in object.get(_registry, "requires_approval", set())
	not _approved(call)
} else := []

_approved(call) if call.approval.kind == "tool-approved"

# METADATA
# title: requests_of
# description: |
#   The approval requests that the value rs of package pkg's
#   require_approval rule makes, by the operator contract
#   (internal/contract): a set's elements, each a {"reason", "message"}
#   object of strings. Anything else, and any other element, is a request
#   carrying the offending `value`: the engine then fails the decision
#   closed, naming the rule.
requests_of(pkg, rs) := [approval_request(pkg, x) | some x in rs] if {
	is_set(rs)
} else := [{"package": pkg, "rule": "require_approval", "value": rs}]

# METADATA
# title: approval_request
# description: One element x of package pkg's require_approval set, as a request.
approval_request(pkg, x) := {
	"package": pkg,
	"reason": object.get(x, "reason", ""),
	"message": object.get(x, "message", ""),
} if {
	is_object(x)
	every k, v in x {
		k in {"reason", "message"}
		is_string(v)
	}
} else := {"package": pkg, "rule": "require_approval", "value": x}

# METADATA
# title: denials_of
# description: |
#   The denials that the value ds of package pkg's deny rule makes, by the
#   operator contract (internal/contract): a set's elements, each a
#   {"reason", "message"} object or a string that is both; true, one
#   denial with a reason naming the package; false, none. Anything else,
#   and any other element, is a denial carrying the offending `value`: the
#   engine then fails the decision closed, naming the rule.
denials_of(pkg, ds) := [denial(pkg, x) | some x in ds] if {
	is_set(ds)
} else := [{"package": pkg, "reason": sprintf("policycheck.rules.%s.deny is true", [pkg]), "message": ""}] if {
	ds == true
} else := [] if {
	ds == false
} else := [{"package": pkg, "rule": "deny", "value": ds}]

# METADATA
# title: denial
# description: One element x of package pkg's deny set, as a denial.
denial(pkg, x) := {"package": pkg, "reason": x, "message": x} if {
	is_string(x)
} else := {"package": pkg, "reason": object.get(x, "reason", ""), "message": object.get(x, "message", "")} if {
	is_object(x)
	every k, v in x {
		k in {"reason", "message"}
		is_string(v)
	}
} else := {"package": pkg, "rule": "deny", "value": x}

# METADATA
# title: rule_errors
# description: |
#   The hide rules whose value is not a set of tool names (a type the
#   contract could not see at load), or names a framework tool, which no
#   rule can hide (the engine presents load_capability while a capability
#   is deferred, search_tools while a search-gated tool survives): each
#   fails the decision closed, and the engine names the rule. (A deny
#   value's errors ride on its denials.)
rule_errors contains {"package": pkg, "rule": "hide", "value": h} if {
	some pkg
	h := data.policycheck.rules[pkg].hide
	not names_set(h)
}

# METADATA
# title: names_set
# description: |
#   s is a set of strings, none a framework tool. Performance: a set of
#   registry names (the usual case, and never a framework tool: the
#   registry reserves their names) is told by one intersection, in Go;
#   only another is walked.
names_set(s) if {
	is_set(s)
	count(s & _registry.names) == count(s)
} else if {
	is_set(s)
	every x in s {
		is_string(x)
		not x in _framework
	}
}

# METADATA
# title: input_with_call
# description: |
#   The input the deny rules see for one call: the decision's input with
#   the call as input.call (just the call when there is no input object,
#   as in a unit test that sets none).
input_with_call(call) := object.union(input, {"call": call}) if {
	is_object(input)
} else := {"call": call}
