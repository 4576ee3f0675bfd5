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
