# METADATA
# title: policycheck.availability tests
# description: |
#   The default policy's decision document: available, advertised,
#   dispatch_available and verdicts over the facts, and failing closed when
#   a filter failed.
package policycheck.availability_test

import data.policycheck.availability

# The registry of gate_test.rego, in short: get_time always-on, search_docs
# search-gated, secret_op of the deferred vault.
registry := {
	"tools": {
		"get_time": {"name": "get_time", "capability": null, "defer_loading": false, "gate": "none"},
		"search_docs": {"name": "search_docs", "capability": null, "defer_loading": true, "gate": "search"},
		"secret_op": {"name": "secret_op", "capability": "vault", "defer_loading": true, "gate": "capability"},
	},
	"names": {"get_time", "search_docs", "secret_op"},
	"always_available": {"get_time"},
	"search_gated": {"search_docs"},
	"deferred_capabilities": {"vault"},
	"always_on_capabilities": set(),
	"capability_tools": {"vault": {"secret_op"}},
}

no_filters := {"dropped": set(), "errors": []}

base := {
	"facts": {"discovered": set(), "loaded": set(), "returned": set(), "active_capabilities": set()},
	"outgoing": {"discovered": set(), "loaded": set()},
	"filters": {"next": no_filters, "dispatch": no_filters, "errors": []},
	"context": {},
	"dispatch": {
		"loaded": set(),
		"evidence": {"discovered": set(), "loaded": set()},
		"active_capabilities": set(),
		"calls": [],
	},
}

with_input(patch) := object.union(base, patch)

framework := {"load_capability", "search_tools"}

failing := {"filters": {"errors": [{"capability": "vault", "message": "boom"}]}}

test_available_unions_always_on_discovered_and_loaded_tools if {
	doc := with_input({"facts": {"discovered": {"search_docs"}, "loaded": {"vault"}}})
	availability.available == {"get_time", "search_docs", "secret_op"} | framework with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

test_available_is_empty_when_a_filter_failed if {
	availability.available == set() with input as with_input(failing)
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

test_advertised_reads_the_outgoing_history if {
	# Cleaning dropped the evidence that revealed search_docs: it stays
	# available but is not advertised.
	doc := with_input({"facts": {"discovered": {"search_docs"}}})
	availability.advertised == {"get_time"} | framework with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	"search_docs" in availability.available with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

test_advertised_drops_a_load_cleaning_removed if {
	# The outgoing history lost the load of vault but kept search_docs'
	# reveal and holds one more: secret_op stays available, unadvertised.
	doc := with_input({
		"facts": {"discovered": {"search_docs"}, "loaded": {"vault"}},
		"outgoing": {"discovered": {"search_docs", "nope"}, "loaded": set()},
	})
	availability.advertised == {"get_time", "search_docs"} | framework with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	"secret_op" in availability.available with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

test_advertised_is_empty_when_cleaning_removed_evidence_and_a_filter_failed if {
	doc := object.union(with_input({"facts": {"discovered": {"search_docs"}}}), failing)
	availability.advertised == set() with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

test_advertised_is_a_subset_of_available if {
	# Outgoing evidence the next-request facts lack adds nothing.
	doc := with_input({"outgoing": {"loaded": {"vault"}}})
	availability.advertised == {"get_time"} | framework with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

test_advertised_is_empty_when_a_filter_failed if {
	availability.advertised == set() with input as with_input(failing)
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

test_dispatch_available_counts_anchored_evidence if {
	doc := with_input({"dispatch": {"evidence": {"discovered": {"search_docs"}}}})
	availability.dispatch_available == {"get_time", "search_docs"} | framework with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

test_dispatch_available_is_empty_when_a_filter_failed if {
	availability.dispatch_available == set() with input as with_input(failing)
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

test_verdicts_follow_the_calls_in_order if {
	calls := [
		{"tool": "secret_op", "tool_call_id": "c1", "args": {}},
		{"tool": "get_time", "tool_call_id": "c2", "args": {}},
		{"tool": "nope", "tool_call_id": "c3", "args": {}},
	]
	vs := availability.verdicts with input as with_input({"dispatch": {"calls": calls}})
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	[v.verdict | some v in vs] == ["not_available_yet", "execute", "unknown_tool"]
}

test_verdicts_are_empty_without_a_dispatched_response if {
	doc := json.remove(base, ["dispatch"])
	availability.verdicts == [] with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

test_decision_holds_every_entry_the_engine_reads if {
	doc := with_input({
		"facts": {"loaded": {"vault"}},
		"outgoing": {"loaded": {"vault"}},
		"dispatch": {"loaded": {"vault"}, "calls": [{"tool": "secret_op", "tool_call_id": "c1", "args": {}}]},
	})
	d := availability.decision with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
		with data.policycheck.rules as {"r": {"hide": {"get_time"}}}
	d == {
		"available": ({"secret_op"} | framework),
		"advertised": ({"secret_op"} | framework),
		"dispatch_available": ({"secret_op"} | framework),
		"verdicts": [{"verdict": "execute", "rule": "gate"}],
		"hidden": {"get_time"},
		"would_hide": set(),
		"rule_errors": set(),
	}
}

test_advertised_defaults_to_empty_without_outgoing_facts if {
	doc := json.remove(base, ["outgoing"])
	availability.advertised == set() with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
}

# A JSON input document (opa eval -i on policycheck facts --format input)
# and a JSON registry (policycheck registry) hold arrays where the engine
# hands sets: every entry of the decision is the same.
as_json(x) := json.unmarshal(json.marshal(x))

json_cases := {
	"loaded and revealed": with_input({
		"facts": {"discovered": {"search_docs"}, "loaded": {"vault"}},
		"outgoing": {"discovered": {"search_docs"}, "loaded": {"vault"}},
		"dispatch": {"loaded": {"vault"}, "calls": [
			{"tool": "secret_op", "tool_call_id": "c1", "args": {}},
			{"tool": "nope", "tool_call_id": "c2", "args": {}},
		]},
	}),
	"cleaned and anchored": with_input({
		"facts": {"discovered": {"search_docs"}, "loaded": {"vault"}},
		"outgoing": {"discovered": set(), "loaded": {"vault"}},
		"dispatch": {"evidence": {"discovered": {"search_docs"}, "loaded": set()}, "calls": [
			{"tool": "secret_op", "tool_call_id": "c1", "args": {}},
			{"tool": "search_docs", "tool_call_id": "c2", "args": {}},
		]},
	}),
	"filtered": with_input({
		"facts": {"loaded": {"vault"}},
		"filters": {"next": {"dropped": {"secret_op"}, "errors": []}, "dispatch": {"dropped": {"get_time"}, "errors": []}},
		"dispatch": {"loaded": {"vault"}, "calls": [{"tool": "get_time", "tool_call_id": "c1", "args": {}}]},
	}),
	"failed filter": object.union(
		with_input({"dispatch": {"calls": [{"tool": "get_time", "tool_call_id": "c1", "args": {}}]}}),
		failing,
	),
}

test_json_input_gives_the_same_decision[name] if {
	some name, doc in json_cases
	want := availability.decision with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	every d in [doc, as_json(doc)] {
		every reg in [registry, as_json(registry)] {
			got := availability.decision with input as d
				with data.policycheck.registry as reg
				with data.policycheck.rules as {}
			got == want
		}
	}
}

test_json_input_decides_what_sets_decide if {
	# The cases above are not trivially equal: the JSON decision of the
	# first is the engine's (pinned here, not just compared).
	d := availability.decision with input as as_json(json_cases["loaded and revealed"])
		with data.policycheck.registry as as_json(registry)
		with data.policycheck.rules as {}
	d.available == {"get_time", "search_docs", "secret_op"} | framework
	d.advertised == d.available
	[v.verdict | some v in d.verdicts] == ["execute", "unknown_tool"]
}

test_a_hand_written_input_may_mix_sets_and_arrays if {
	doc := with_input({
		"facts": {"discovered": {"search_docs"}, "loaded": ["vault"]},
		"filters": {"next": {"dropped": [], "errors": []}, "dispatch": {"dropped": [], "errors": []}},
		"dispatch": {"loaded": ["vault"], "calls": [{"tool": "secret_op", "tool_call_id": "c1", "args": {}}]},
	})
	d := availability.decision with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	d.available == {"get_time", "search_docs", "secret_op"} | framework
	[v.verdict | some v in d.verdicts] == ["execute"]
}

# Each name list the decision checks, alone as an array in a set document
# (a hand-written test's `[]`): the same decision.
test_one_array_name_list_gives_the_same_decision[path] if {
	# The case where an unconverted empty array under dispatch made the
	# unloaded vault's secret_op execute.
	doc := json_cases["cleaned and anchored"]
	want := availability.decision with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	some path in [
		["facts", "discovered"], ["facts", "loaded"], ["outgoing", "discovered"], ["outgoing", "loaded"],
		["filters", "next", "dropped"], ["filters", "dispatch", "dropped"], ["dispatch", "loaded"],
		["dispatch", "evidence", "discovered"], ["dispatch", "evidence", "loaded"],
	]
	mixed := json.patch(doc, [{"op": "replace", "path": path, "value": as_json(object.get(doc, path, null))}])
	got := availability.decision with input as mixed
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	got == want
}

test_one_array_registry_list_gives_the_same_decision[key] if {
	doc := json_cases["loaded and revealed"]
	want := availability.decision with input as doc
		with data.policycheck.registry as registry
		with data.policycheck.rules as {}
	some key in ["names", "search_gated", "always_available"]
	got := availability.decision with input as doc
		with data.policycheck.registry as json.patch(
			registry,
			[{"op": "replace", "path": [key], "value": as_json(registry[key])}],
		)
		with data.policycheck.rules as {}
	got == want
}
