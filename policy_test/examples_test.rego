# METADATA
# title: Example runs, replayed
# description: |
#   The example histories (examples/histories) on the example registry,
#   recorded as fixtures (recorded/examples/<name>), replay through the
#   shipped Rego alone. Copy this file to pin your own policies to your
#   recorded runs.
package policy_test.examples_test

import data.policy_test.fixture

test_refund_executes_what_was_revealed_or_loaded if {
	d := fixture.replay_default(data.recorded.examples.refund)
	d.available == {
		"get_order", "get_time", "issue_refund", "load_capability",
		"search_docs", "search_tools", "transfer_funds",
	}
	d.advertised == d.available
	fixture.verdicts(d) == ["execute", "execute", "execute", "not_available_yet", "unknown_tool"]
	d.verdicts[3].form == {"form": "capability", "capability": "vault"}
}

test_a_compaction_hides_the_earlier_load if {
	d := fixture.replay_default(data.recorded.examples.after_compaction)
	not "issue_refund" in d.available
	fixture.verdicts(d) == ["not_available_yet", "execute"]
}

test_refund_after_lookup_executes if {
	d := fixture.replay_default(data.recorded.examples.refund_after_lookup)
	fixture.verdicts(d) == ["execute"]
}

test_vault_filter_results_are_recorded[note] if {
	cases := {
		"support": {"fixture": "vault_rotate_support", "verdicts": ["execute", "unknown_tool"]},
		"admin": {"fixture": "vault_rotate_admin", "verdicts": ["execute", "execute"]},
	}
	some note, tc in cases
	d := fixture.replay_default(data.recorded.examples[tc.fixture])
	fixture.verdicts(d) == tc.verdicts
}

test_fixture_sets_are_restored if {
	doc := fixture.input_doc(data.recorded.examples.refund.input)
	is_set(doc.facts.discovered)
	is_set(doc.dispatch.evidence.loaded)
	is_array(doc.dispatch.calls)
	reg := fixture.registry(data.recorded.examples.refund.registry)
	is_set(reg.capability_tools.vault)
	reg.capability_tools.vault == {"secret_op", "rotate_key"}
}

test_a_history_without_dispatch_replays if {
	doc := json.remove(data.recorded.examples.refund.input, ["dispatch"])
	d := fixture.replay_default({"input": doc, "registry": data.recorded.examples.refund.registry})
	d.verdicts == []
}

test_replay_applies_the_operator_rules_in_effect if {
	# replay, unlike replay_default, evaluates whatever rules packages are
	# loaded beside: the template for pinning your own rules to a run.
	d := fixture.replay(data.recorded.examples.refund) with data.policycheck.rules as {"ops": {"hide": {"get_time"}}}
	not "get_time" in d.available
	"get_order" in d.available
}
