# METADATA
# title: policycheck library
# description: |
#   Helpers for operators writing capability filters and rules. Import the
#   package, not its rules: `import data.policycheck.lib`.
#   The registry is data: data.policycheck.registry holds `tools` (name ->
#   {name, capability, defer_loading, gate}), and sets `names`,
#   `always_available`, `search_gated`, `deferred_capabilities`,
#   `always_on_capabilities`, plus `capability_tools` (capability id -> set
#   of the tools a deferred capability owns) and `owned_tools` (the same
#   for every capability, deferred or always-on).
#
#   Cost: a helper that takes `tools` iterates it, about two microseconds
#   per tool; registry_keep_own is set algebra over the registry data, and
#   with 1,000 tools costs about a seventh of keep_own (BENCHMARKS.md,
#   "What a filter costs").
package policycheck.lib

# METADATA
# title: own_tools
# description: |
#   The names, among input.tools, of the tools owned by capability `id`.
#   A filter that governs only its own tools keeps the others:
#   `prepare_tools contains name if some name in lib.others(input.tools, "vault")`.
own_tools(tools, id) := {t.name | some t in tools; t.capability == id}

# METADATA
# title: others
# description: The names, among tools, of the tools not owned by capability `id`.
others(tools, id) := {t.name | some t in tools; t.capability != id}

# METADATA
# title: names
# description: The names of a list of tool objects (as in input.tools).
names(tools) := {t.name | some t in tools}

# METADATA
# title: keep_own
# description: |
#   Filter helper: every tool not owned by capability `id`, plus those of
#   its own tools named in `allowed`. A one-line permission gate:
#   `prepare_tools := lib.keep_own(input.tools, "vault", {"read_secret"})`.
keep_own(tools, id, allowed) := others(tools, id) | (own_tools(tools, id) & allowed)

# METADATA
# title: registry_keep_own
# description: |
#   keep_own over the whole registry, as set algebra on
#   data.policycheck.registry instead of a walk over input.tools: every
#   registry tool, less capability `id`'s own tools not named in
#   `allowed`. In a filter, where input.tools is the whole registry, it
#   equals keep_own(input.tools, id, allowed):
#   `prepare_tools := lib.registry_keep_own("vault", {"read_secret"})`.
#   Registry data holding arrays (JSON) and an array `allowed` give the
#   same result, at the cost of converting them each call.
registry_keep_own(id, allowed) := names - (own - allowed) if {
	names := data.policycheck.registry.names
	is_set(names)
	own := object.get(data.policycheck.registry.owned_tools, id, set())
	is_set(own)
	is_set(allowed)
} else := as_set(data.policycheck.registry.names) - (as_set(object.get(
	data.policycheck.registry.owned_tools,
	id,
	set(),
)) - as_set(allowed))

# METADATA
# title: as_set
# description: |
#   xs as a set: xs itself when it is one, else the set of its elements (a
#   JSON array, as in registry data printed by policycheck registry or an
#   opa test literal).
as_set(xs) := xs if is_set(xs)

else := {x | some x in xs}
