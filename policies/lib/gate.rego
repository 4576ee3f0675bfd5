# METADATA
# title: The availability gate
# description: |
#   The one definition of "available" (spec §6 V2) as set algebra, and the
#   verdict of a call (spec §8). Advertisement, execution and explanations
#   all read these functions.
package policycheck.lib.gate

registry := data.policycheck.registry

framework := {"load_capability", "search_tools"}

# METADATA
# title: as_set
# description: |
#   x as a set. The engine hands sets, which pass through untouched (no
#   iteration); a JSON input document (opa eval -i, recorded fixtures) holds
#   arrays, which become sets, so the rules mean the same on either.
as_set(x) := x if is_set(x)

else := {e | some e in x}

names := as_set(registry.names)

always_available := as_set(registry.always_available)

search_gated := as_set(registry.search_gated)

deferred_capabilities := as_set(registry.deferred_capabilities)

always_on_capabilities := as_set(registry.always_on_capabilities)

# METADATA
# title: failed
# description: |
#   A capability filter failed: the decision fails closed.
default failed := false

failed if count(input.filters.errors) > 0

# METADATA
# title: hidden
# description: Tools hidden for this request by operator rules (policycheck.rules.*.hide).
hidden := {name | some name in data.policycheck.rules[_].hide}

# METADATA
# title: resolved
# description: |
#   The resolved tool set under a filter result: registry tools the filters
#   kept and no rule hid, plus the framework tools present.
resolved(filters) := ((names - as_set(filters.dropped)) - hidden) | present_framework(filters)

# METADATA
# title: present_framework
# description: |
#   load_capability is present while some capability is deferred;
#   search_tools while some search-gated tool survives filters and rules.
present_framework(filters) := {"load_capability" | count(deferred_capabilities) > 0} | {
"search_tools" |
	count((search_gated - as_set(filters.dropped)) - hidden) > 0
}

# METADATA
# title: available
# description: |
#   The tools available given discovered names and loaded capability ids
#   (spec §6 V2): always-on tools, revealed search-gated tools, and the
#   tools of loaded deferred capabilities, within the resolved set, plus the
#   framework tools present.
available(discovered, loaded, filters) := admitted | present_framework(filters) if {
	admitted := revealed(discovered, loaded) & resolved(filters)
}

# METADATA
# title: revealed
# description: The registry tools the gate admits before filters and rules.
revealed(discovered, loaded) := (always_available | searched) | loaded_tools(loaded) if {
	searched := search_gated & as_set(discovered)
}

# METADATA
# title: loaded_tools
# description: The tools of the loaded capabilities that are configured-deferred.
loaded_tools(loaded) := union({as_set(registry.capability_tools[id]) | some id in loaded})

# METADATA
# title: available_now
# description: |
#   The tools callable by the response being dispatched: the facts widened
#   by the serving provider's anchored evidence (spec §5), under the
#   filters of the dispatch-active capabilities (seed 000).
available_now := available(
	as_set(input.facts.discovered) | as_set(input.dispatch.evidence.discovered),
	as_set(input.dispatch.loaded) | as_set(input.dispatch.evidence.loaded),
	input.filters.dispatch,
)

# METADATA
# title: verdict
# description: |
#   The verdict of one call of the dispatched response: unknown_tool when
#   the name is not in the resolved set, not_available_yet when it is but
#   the gate refuses it, denied when an operator rule denies it, else
#   execute. A failed filter denies every call.
verdict(call) := {"verdict": "denied", "rule": "filter_error"} if {
	failed
} else := {"verdict": "unknown_tool", "rule": "unknown_tool"} if {
	not call_resolved(call)
} else := {"verdict": "not_available_yet", "rule": "gate", "form": unavailable_form(call.tool)} if {
	not call.tool in framework
	not call.tool in available_now
} else := {"verdict": "denied", "rule": "deny", "denials": denials(call)} if {
	count(denials(call)) > 0
} else := {"verdict": "execute", "rule": "gate"}

call_resolved(call) if call.tool in resolved(input.filters.dispatch)

# METADATA
# title: unavailable_form
# description: |
#   Which refusal the model gets (spec X5): the capability form when the
#   tool's owner is not active (plain active set: always-on plus loaded),
#   else the search form.
unavailable_form(tool) := {"form": "capability", "capability": cap} if {
	cap := registry.tools[tool].capability
	cap != null
	not cap in (always_on_capabilities | as_set(input.dispatch.loaded))
} else := {"form": "search"}

# METADATA
# title: denials
# description: The operator denials of one call, from every policycheck.rules package.
denials(call) := [d |
	some pkg
	ds := data.policycheck.rules[pkg].deny with input.call as call
	some x in ds
	d := {"package": pkg, "reason": object.get(x, "reason", ""), "message": object.get(x, "message", "")}
]
