# METADATA
# title: Integrity tests
# description: |
#   Which calls the integrity example stops: a consequential call with an
#   untrusted argument in an untrusted window asks, until approved; a call
#   that carries a value above its clearance is denied, approved or not; a
#   trusted action executes; a consequential call whose flows cannot be
#   relied on asks. The verdicts on examples/integrity/histories/*.json
#   are pinned through eval (examples/integrity_test.go).
package policycheck.rules.integrity_test

import data.policycheck.rules.integrity

registry := {"tools": {
	"send_money": {"name": "send_money", "consequential": true, "clearance": "internal"},
	"post_review": {"name": "post_review", "consequential": true, "clearance": "public"},
	"read_file": {"name": "read_file", "consequential": false, "integrity": "untrusted", "confidentiality": "internal"},
}}

file_flow := {"path": "/recipient", "match": "exact", "source": {
	"kind": "tool-return", "tool": "read_file", "tool_call_id": "f1", "labels": [], "message": 2, "part": 0,
	"integrity": "untrusted", "confidentiality": "internal",
}}

untrusted_window := {"untrusted": true, "confidentiality": "internal", "sources": [{
	"tool": "read_file", "tool_call_id": "f1", "message": 1, "part": 0,
	"summarised": false, "integrity": "untrusted", "confidentiality": "internal",
}]}

pay(args_integrity, flows) := {
	"tool": "send_money", "args": {}, "window": untrusted_window,
	"args_integrity": args_integrity, "flows": flows,
}

facts := {"flow_index_truncated": false}

test_an_untrusted_consequential_call_asks if {
	call := pay({"/recipient": "untrusted", "/amount": "declassified"}, [file_flow])
	some r in integrity.require_approval with input as {"call": call, "facts": facts}
		with data.policycheck.registry as registry
	r.reason == concat("", [
		"argument /recipient of send_money is untrusted: it carries a value from tool-return ",
		"(read_file untrusted, tool_call_id f1, message 2, part 0)",
	])
	count(integrity.deny) == 0 with input as {"call": call, "facts": facts}
		with data.policycheck.registry as registry
}

test_an_approved_call_does_not_ask if {
	call := object.union(pay({"/recipient": "untrusted"}, [file_flow]), {"approval": {"kind": "tool-approved"}})
	count(integrity.require_approval) == 0 with input as {"call": call, "facts": facts}
		with data.policycheck.registry as registry
}

test_a_trusted_action_executes if {
	call := pay({"/recipient": "trusted", "/amount": "declassified"}, [])
	count(integrity.require_approval) == 0 with input as {"call": call, "facts": facts}
		with data.policycheck.registry as registry
	count(integrity.deny) == 0 with input as {"call": call, "facts": facts}
		with data.policycheck.registry as registry
}

test_a_value_above_the_clearance_is_denied if {
	flow := {"path": "/text", "match": "contains", "source": {
		"kind": "tool-return", "tool": "get_statement", "tool_call_id": "s1", "labels": [], "message": 2, "part": 2,
		"integrity": "trusted", "confidentiality": "secret",
	}}
	call := {
		"tool": "post_review", "args": {}, "window": untrusted_window,
		"args_integrity": {"/text": "untrusted"}, "flows": [flow], "approval": {"kind": "tool-approved"},
	}
	some d in integrity.deny with input as {"call": call, "facts": facts}
		with data.policycheck.registry as registry
	d.reason == concat("", [
		"argument /text of post_review carries a secret value from get_statement ",
		"(tool_call_id s1, message 2, part 2), above its clearance public",
	])
}

test_incomplete_flows_ask if {
	call := pay({"/recipient": "trusted"}, [])
	some r in integrity.require_approval with input as {"call": call, "facts": {"flow_index_truncated": true}}
		with data.policycheck.registry as registry
	startswith(r.reason, "the flows of this send_money call cannot be relied on")
}

# A sink that is not consequential but cleared for less than the window
# held (a public mailer after a secret statement was read) cannot rely on
# a missing flow either: with the index truncated (an injected page can
# fill it), the secret would go out unseen. It asks; with a window within
# its clearance, or complete flows, it does not.
mail(window) := {
	"tool": "send_newsletter", "args": {}, "window": window,
	"args_integrity": {"/text": "untrusted"}, "flows": [],
}

newsletter := {"name": "send_newsletter", "clearance": "public"}

mail_registry := object.union(registry, {"tools": {"send_newsletter": newsletter}})

truncated := {"flow_index_truncated": true}

test_incomplete_flows_into_a_sink_below_the_window_ask if {
	secret_window := object.union(untrusted_window, {"confidentiality": "secret"})
	some r in integrity.require_approval with input as {"call": mail(secret_window), "facts": truncated}
		with data.policycheck.registry as mail_registry
	startswith(r.reason, "the flows of this send_newsletter call cannot be relied on")

	# Without a window (an input recorded without one): the same.
	no_window := object.remove(mail(secret_window), ["window"])
	count(integrity.require_approval) == 1 with input as {"call": no_window, "facts": truncated}
		with data.policycheck.registry as mail_registry

	count(integrity.require_approval) == 0 with input as {"call": mail(secret_window), "facts": facts}
		with data.policycheck.registry as mail_registry
	public_window := object.union(untrusted_window, {"confidentiality": "public"})
	count(integrity.require_approval) == 0 with input as {"call": mail(public_window), "facts": truncated}
		with data.policycheck.registry as mail_registry
}
