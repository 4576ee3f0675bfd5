# METADATA
# title: Evaluation floor (a benchmark fixture, not a policy)
# description: |
#   The cheapest decision document that holds the shipped policy's
#   available set for the benchmark inputs: one rule, written inline, with
#   no operator rules, no framework-tool conditions, no advertisement
#   cleaning, no dispatch set and no verdicts. BenchmarkDecideFloor times
#   it beside the shipped policy, to show what share of a decision is the
#   evaluator's own cost rather than the policy's structure.
# entrypoint: true
package policycheck.availability

import data.policycheck.registry

# METADATA
# title: decision
# description: The available set, inline; everything else empty.
decision := {
	"available": available,
	"advertised": available,
	"dispatch_available": set(),
	"verdicts": [],
	"hidden": set(),
} if {
	removed := input.filters.next.dropped
	loaded := {registry.capability_tools[id] | some id in input.facts.loaded}
	revealed := {registry.search_gated & input.facts.discovered} | loaded
	available := union({
		registry.always_available - removed,
		union(revealed) - removed,
		{"load_capability", "search_tools"},
	})
}
