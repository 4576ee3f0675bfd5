# METADATA
# title: Conformance runs, replayed
# description: |
#   Histories of the shared conformance corpus, recorded as fixtures
#   (recorded/conformance/<case>), replay through the shipped Rego alone to
#   the decisions the corpus expects (its `available` and `calls`).
package policy_test.conformance_test

import data.policy_test.fixture

# The corpus' expectations, case by case (../shared/conformance/cases).
cases := {
	"anchored_deferred_tool_anthropic_without_content": {
		"available": {"search_tools"},
		"verdicts": ["execute"],
	},
	"capability_tool_after_compaction_refused_until_reloaded": {
		"available": {"load_capability"},
		"verdicts": ["not_available_yet"],
	},
	"pre_compaction_discovered_tool_refused_until_rediscovered": {
		"available": {"search_tools"},
		"verdicts": ["not_available_yet"],
	},
	"search_discovery_and_capability_load_coexist": {
		"available": {"load_capability", "lookup_refund", "search_tools", "searchable_weather"},
		"verdicts": ["execute"],
	},
	"seed_same_response_load_then_call_refused": {
		"available": {"load_capability"},
		"verdicts": ["execute", "not_available_yet"],
	},
	"unknown_tool_lists_only_available_tools": {
		"available": {"load_capability", "untouched"},
		"verdicts": ["unknown_tool"],
	},
	"seed_processor_injected_load_applies_filter": {
		"available": {"load_capability"},
		"verdicts": ["unknown_tool"],
	},
	"seed_route2_control_honored_compaction": {
		"available": {"load_capability"},
		"verdicts": ["not_available_yet"],
	},
	"seed_route2_foreign_compaction_applies_filter": {
		"available": {"load_capability"},
		"verdicts": ["unknown_tool"],
	},
	"seed_route2_contentless_compaction_applies_filter": {
		"available": {"load_capability"},
		"verdicts": ["unknown_tool"],
	},
}

test_recorded_runs_replay_to_the_corpus_decisions[note] if {
	some note, want in cases
	d := fixture.replay_default(data.recorded.conformance[note])
	d.available == want.available
	fixture.verdicts(d) == want.verdicts
}

test_every_recorded_case_has_an_expectation if {
	every name, _ in data.recorded.conformance {
		name in object.keys(cases)
	}
}

test_a_recorded_filter_result_replays_without_the_filter if {
	# The vault filter of seed 000 is not loaded here: its result
	# (secret_op dropped) is part of the recorded input.
	f := data.recorded.conformance.seed_processor_injected_load_applies_filter
	"secret_op" in f.input.filters.dispatch.dropped
	d := fixture.replay_default(f)
	d.verdicts[0] == {"verdict": "unknown_tool", "rule": "unknown_tool", "reason": "", "by": [{"rule": "prepare_tools"}]}
}

test_the_anchored_evidence_is_in_the_recorded_input if {
	f := data.recorded.conformance.anchored_deferred_tool_anthropic_without_content
	d := fixture.replay_default(f)
	"hidden" in d.dispatch_available
	not "hidden" in d.available
}

# Seed 000, Route 2: a capability active at dispatch only through the
# serving provider's anchored evidence has its filter applied to the calls
# of that response (filters.dispatch), while the next request, where the
# capability is not active, is filtered without it (filters.next).
test_route2_dispatch_filters_decide_the_calls[note] if {
	some note in ["seed_route2_foreign_compaction_applies_filter", "seed_route2_contentless_compaction_applies_filter"]
	f := data.recorded.conformance[note]
	doc := fixture.input_doc(f.input)
	"vault" in doc.dispatch.evidence.loaded
	"vault" in doc.dispatch.active_capabilities
	not "vault" in doc.facts.active_capabilities
	"secret_op" in doc.filters.dispatch.dropped
	not "secret_op" in doc.filters.next.dropped

	d := fixture.replay_default(f)
	d.verdicts[0].verdict == "unknown_tool"
	not "secret_op" in d.dispatch_available
}

test_route2_next_request_filters_never_decide_the_calls[note] if {
	some note in ["seed_route2_foreign_compaction_applies_filter", "seed_route2_contentless_compaction_applies_filter"]
	f := data.recorded.conformance[note]

	# Without the dispatch-time result, the evidence makes the call execute
	# (the pre-#8071 fail-open) ...
	open_input := json.patch(f.input, [{"op": "replace", "path": "/filters/dispatch/dropped", "value": []}])
	fixture.verdicts(fixture.replay_default({"input": open_input, "registry": f.registry})) == ["execute"]

	# ... and a next-request result dropping the tool does not stand in
	# for it: the calls of this response are judged by dispatch filters.
	next_only := json.patch(open_input, [{"op": "replace", "path": "/filters/next/dropped", "value": ["secret_op"]}])
	fixture.verdicts(fixture.replay_default({"input": next_only, "registry": f.registry})) == ["execute"]
}
