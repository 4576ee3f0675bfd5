# METADATA
# title: Integrity
# description: |
#   The stock label rules of policies/lib/integrity.rego at work
#   (docs/registry.md, "Integrity and confidentiality"). A consequential
#   call that is not a trusted action (lib.trusted_action: an argument
#   value neither trusted nor declassified, with untrusted content in the
#   window the model saw, a compaction summary's included) waits for a
#   person's approval; a call that carries a value above its tool's
#   clearance (lib.permitted_flow) is denied. Fails closed: a
#   consequential call whose flows cannot be relied on waits for approval
#   too, and so does any call whose flows cannot be relied on when the
#   window held something above its clearance. The labels are the registry's (examples/integrity/registry.yaml).
package policycheck.rules.integrity

import data.policycheck.lib

# METADATA
# title: deny
# description: |
#   Denies a call that carries a value above its tool's clearance, naming
#   the argument, the source's tool, message and part, and both levels.
# entrypoint: true
deny contains {
	"reason": reason,
	"message": sprintf(
		"%v may not carry that value: it is more confidential than %v may receive.",
		[input.call.tool, input.call.tool],
	),
} if {
	some reason in lib.flow_violation_reasons(input.call)
}

# METADATA
# title: require_approval
# description: |
#   Asks a person to approve a consequential call that is not a trusted
#   action, naming each untrusted argument and where it came from; or a
#   call whose flows cannot be relied on when that matters: it is
#   consequential, or the window held something above its clearance (a
#   missing flow may be a value the deny rule would have stopped).
# entrypoint: true
require_approval contains {
	"reason": reason,
	"message": sprintf("Approve %v? Some of its arguments were not given by you.", [input.call.tool]),
} if {
	not _approved
	some reason in lib.untrusted_action_reasons(input.call)
}

require_approval contains {
	"reason": sprintf(
		"the flows of this %v call cannot be relied on (missing, or the index was truncated)",
		[input.call.tool],
	),
	"message": sprintf("Approve this %v call? What its arguments carry could not be checked.", [input.call.tool]),
} if {
	not _approved
	_flows_matter
	not lib.flows_complete(input.call)
}

_approved if input.call.approval.kind == "tool-approved"

_flows_matter if lib.consequential(input.call.tool)

# Unless the window is known to hold nothing above the tool's clearance
# (an input without a window holds anything).
_flows_matter if not _window_within_clearance

_rank := {"public": 0, "internal": 1, "confidential": 2, "secret": 3}

_window_within_clearance if _rank[input.call.window.confidentiality] <= _rank[lib.clearance(input.call.tool)]
