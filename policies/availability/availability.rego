# METADATA
# title: Tool availability — the default policy
# description: |
#   Load, then reveal, then call (spec/semantics.md §6–§8), over the facts
#   that policycheck derives from the message history (design.md "Facts").
#
#   * An always-on tool (not deferred, no deferred owner) is available.
#   * A search-gated tool (deferred, no deferred owner) is available once
#     revealed: discovered in the post-compaction window.
#   * A tool of a configured-deferred capability is available once that
#     capability is loaded: the load is the reveal. A reveal without a load
#     does not count, and neither does a stale load of a capability since
#     reconfigured as always-on.
#   * Capability filters (`prepare_tools`) and operator `hide` rules remove
#     tools: a removed tool is neither available nor advertised, and a call
#     to it is an unknown tool.
#   * The framework tools are available when present: load_capability while
#     some capability is deferred, search_tools while some search-gated tool
#     remains.
#   * A filter that failed fails the whole decision closed.
#
#   Sets in, sets out: the rules are set algebra over the facts, never a
#   loop over every tool.
# entrypoint: true
package policycheck.availability

import data.policycheck.lib.gate

# METADATA
# title: decision
# description: |
#   Everything the engine reads, in one document, for any input: the
#   documents the engine hands, whose name lists are sets, and a JSON
#   document (opa eval -i on policycheck facts --format input, OPA's REST
#   API, an opa test literal, registry data printed by policycheck
#   registry), whose name lists are arrays: the rules then see them as
#   sets (gate.input_sets, gate.registry_sets).
#   Which branch answers is a cost, never a behaviour: the else branch
#   converts every name list, and a list that is already a set converts
#   to itself. The checks tell sets apart list by list (an opa test
#   literal may mix sets and arrays): every list the rules apply set
#   operations to is checked, because an array there can make | or &
#   with an empty operand return it unchanged and a call execute that the
#   set document refuses. (registry.names is only tested for membership,
#   which reads arrays too.)
# entrypoint: true
decision := decision_from_sets if {
	is_set(input.facts.discovered)
	is_set(input.facts.loaded)
	is_set(input.outgoing.discovered)
	is_set(input.outgoing.loaded)
	is_set(input.filters.next.dropped)
	is_set(input.filters.dispatch.dropped)
	is_set(object.get(input, ["dispatch", "loaded"], set()))
	is_set(object.get(input, ["dispatch", "evidence", "discovered"], set()))
	is_set(object.get(input, ["dispatch", "evidence", "loaded"], set()))
	is_set(data.policycheck.registry.search_gated)
	is_set(data.policycheck.registry.always_available)
} else := d if {
	d := decision_from_sets with input as gate.input_sets with data.policycheck.registry as gate.registry_sets
}

# METADATA
# title: decision_from_sets
# description: |
#   The decision for documents whose name lists are sets, as the engine
#   hands them: the engine reads this rule, which decision is for such
#   documents (the operator contract refuses a policy set whose decision
#   does not read it). Performance: the checks and the else chain cost
#   the engine 36 allocations and about 20% of an evaluated decision
#   (DecideFromFacts, 100 messages, filter results cached, on OPA v1.22:
#   BENCHMARKS.md), so its path carries neither.
# entrypoint: true
decision_from_sets := {
	"available": available,
	"advertised": advertised,
	"dispatch_available": dispatch_available,
	"verdicts": verdicts,
	"hidden": gate.hidden,
	"would_hide": gate.would_hide,
	"rule_errors": gate.rule_errors,
}

# METADATA
# scope: document
# title: available
# description: The tools callable on the next request (no anchored evidence).
default available := set()

available := gate.available(input.facts.discovered, input.facts.loaded, input.filters.next) if not gate.failed

# METADATA
# scope: document
# title: advertised
# description: |
#   The tools whose schemas go to the model on the next request: the same
#   rule over the cleaned outgoing history (spec §7), kept within
#   available. Each gated tool has one kind of evidence (a reveal for a
#   search-gated tool, its owner's load for a capability tool) and the
#   gate is monotone in it, so that is the rule over the evidence both
#   forms of the history hold; and when the outgoing history keeps every
#   reveal and load of the facts (cleaning removed nothing that counted),
#   advertised is available.
#   Performance: OPA sorts both operands of a set difference, and the
#   discovered set can hold most of the registry, so "kept everything" is
#   told by counting an intersection, computed once (kept_discovered).
default advertised := set()

advertised := available if {
	count(kept_discovered) == count(input.facts.discovered)
	count(kept_loaded) == count(input.facts.loaded)
} else := gate.available(kept_discovered, kept_loaded, input.filters.next) if {
	not gate.failed
}

# METADATA
# title: kept_discovered
# description: The discovered names whose reveal the outgoing history keeps.
kept_discovered := input.facts.discovered & input.outgoing.discovered

# METADATA
# title: kept_loaded
# description: The loaded capabilities whose load the outgoing history keeps.
kept_loaded := input.facts.loaded & input.outgoing.loaded

# METADATA
# scope: document
# title: dispatch_available
# description: |
#   The tools callable by the response being dispatched: the facts widened
#   by the serving provider's anchored evidence (spec §5), under the
#   filters of the dispatch-active capabilities (seed 000).
default dispatch_available := set()

dispatch_available := gate.available_now if not gate.failed

# METADATA
# scope: document
# title: verdicts
# description: One verdict per tool call of the dispatched response, in order.
default verdicts := []

verdicts := [gate.verdict(call) | some call in input.dispatch.calls]
