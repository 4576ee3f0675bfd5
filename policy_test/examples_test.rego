# METADATA
# title: Example runs, replayed
# description: |
#   The example histories (examples/histories) on the example registry,
#   recorded as fixtures (recorded/examples/<name>), replay through the
#   shipped Rego alone. Copy this file to pin your own policies to your
#   recorded runs.
package policy_test.examples_test

# The decision of the shipped policies alone (no operator rules, whatever
# else is loaded) over a fixture's recorded input and registry, read as
# recorded: JSON arrays, no conversion.
replay_default(f) := d if {
	d := data.policycheck.availability.decision with input as f.input
		with data.policycheck.registry as f.registry
		with data.policycheck.rules as {}
}

verdicts(d) := [v.verdict | some v in d.verdicts]

test_refund_executes_what_was_revealed_or_loaded if {
	d := replay_default(data.recorded.examples.refund)
	d.available == {
		"get_order", "get_time", "issue_refund", "load_capability",
		"search_docs", "search_tools", "transfer_funds",
	}
	d.advertised == d.available
	verdicts(d) == ["execute", "execute", "execute", "not_available_yet", "unknown_tool"]
	d.verdicts[3].form == {"form": "capability", "capability": "vault"}
}

test_a_compaction_hides_the_earlier_load if {
	d := replay_default(data.recorded.examples.after_compaction)
	not "issue_refund" in d.available
	verdicts(d) == ["not_available_yet", "execute"]
}

test_refund_after_lookup_executes if {
	d := replay_default(data.recorded.examples.refund_after_lookup)
	verdicts(d) == ["execute"]
}

test_vault_filter_results_are_recorded[note] if {
	cases := {
		"support": {"fixture": "vault_rotate_support", "verdicts": ["execute", "unknown_tool"]},
		"admin": {"fixture": "vault_rotate_admin", "verdicts": ["execute", "execute"]},
	}
	some note, tc in cases
	d := replay_default(data.recorded.examples[tc.fixture])
	verdicts(d) == tc.verdicts
}

test_fixtures_are_read_as_recorded if {
	# Stock JSON: arrays where the engine hands sets, read by the shipped
	# policies as they are.
	is_array(data.recorded.examples.refund.input.facts.discovered)
	is_array(data.recorded.examples.refund.registry.capability_tools.vault)
	d := replay_default(data.recorded.examples.refund)
	is_set(d.available)
}

test_a_history_without_dispatch_replays if {
	doc := json.remove(data.recorded.examples.refund.input, ["dispatch"])
	d := replay_default({"input": doc, "registry": data.recorded.examples.refund.registry})
	d.verdicts == []
}

test_replay_applies_the_operator_rules_in_effect if {
	# Without `with data.policycheck.rules`, the rules packages loaded
	# beside apply: the template for pinning your own rules to a run.
	f := data.recorded.examples.refund
	d := data.policycheck.availability.decision with input as f.input
		with data.policycheck.registry as f.registry
		with data.policycheck.rules as {"ops": {"hide": {"get_time"}}}
	not "get_time" in d.available
	"get_order" in d.available
}
