# METADATA
# title: Recorded-run fixtures
# description: |
#   Replays a recorded run through the policies: a fixture is
#   {"input": <policycheck facts --format input>, "registry": <registry data>},
#   committed as recorded/<suite>/<name>/input/data.json and
#   recorded/<suite>/<name>/registry/data.json. JSON has no sets, so the
#   fixture stores them as sorted arrays; input_doc and registry turn them
#   back into the sets the engine hands to Rego.
package policy_test.fixture

_set(xs) := {x | some x in xs}

_sets(obj, keys) := {k: _set(obj[k]) | some k in keys}

# METADATA
# title: input_doc
# description: The input document of a fixture, with its sets restored.
input_doc(doc) := object.union(doc, object.union(
	{
		"facts": _sets(doc.facts, ["discovered", "loaded", "returned", "active_capabilities"]),
		"outgoing": _sets(doc.outgoing, ["discovered", "loaded"]),
		"filters": {
			"next": _sets(doc.filters.next, ["dropped"]),
			"dispatch": _sets(doc.filters.dispatch, ["dropped"]),
		},
	},
	_dispatch(doc),
))

_dispatch(doc) := {"dispatch": object.union(
	_sets(doc.dispatch, ["loaded", "active_capabilities"]),
	{
		"evidence": _sets(doc.dispatch.evidence, ["discovered", "loaded"]),
		"same_response": _sets(doc.dispatch.same_response, ["revealed", "pending_loads"]),
	},
)} if {
	doc.dispatch
} else := {}

# METADATA
# title: registry
# description: data.policycheck.registry of a fixture, with its sets restored.
registry(doc) := object.union(
	doc,
	object.union(
		_sets(doc, ["names", "always_available", "search_gated", "deferred_capabilities", "always_on_capabilities"]),
		{
			"capability_tools": {id: _set(tools) | some id, tools in doc.capability_tools},
			"owned_tools": {id: _set(tools) | some id, tools in object.get(doc, "owned_tools", {})},
		},
	),
)

# METADATA
# title: replay
# description: |
#   The decision of the policies loaded beside (the shipped default plus
#   any operator rules) over a fixture's recorded facts and filter results.
replay(fixture) := decision if {
	decision := data.policycheck.availability.decision with input as input_doc(fixture.input)
		with data.policycheck.registry as registry(fixture.registry)
}

# METADATA
# title: replay_default
# description: |
#   The same with no operator rules, whatever else is loaded: the shipped
#   default policy alone over the recorded facts and filter results.
replay_default(fixture) := decision if {
	decision := data.policycheck.availability.decision with input as input_doc(fixture.input)
		with data.policycheck.registry as registry(fixture.registry)
		with data.policycheck.rules as {}
}

# METADATA
# title: verdicts
# description: The verdict names of a decision, in call order.
verdicts(decision) := [v.verdict | some v in decision.verdicts]
