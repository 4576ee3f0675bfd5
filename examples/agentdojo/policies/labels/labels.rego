# METADATA
# title: Labels
# description: |
#   The evaluation's "labels" mode (examples/agentdojo/README.md): the
#   registry's flow labels (integrity, confidentiality, clearance,
#   consequential; docs/registry.md) on the values of a call, through the
#   stock library (policies/lib/integrity.rego). A consequential call one
#   of whose argument values has an untrusted source (lib.value_label,
#   the join of its sources' labels) waits for a person's approval; a
#   call that carries a value above its tool's clearance
#   (lib.flow_violation_reasons) is denied. A value no flow reaches is
#   not looked at: "strict trusted action" (examples/policies/integrity)
#   is the mode that asks for those too. Supersedes the stop-gap
#   policies/untrusted, which read the operator's free-form labels.
#   Fails closed: a consequential call whose flows cannot be relied on
#   asks too.
package policycheck.rules.labels

import data.policycheck.lib

# METADATA
# title: deny
# description: Denies a call that carries a value above its tool's clearance, naming the source.
# entrypoint: true
deny contains {
	"reason": reason,
	"message": sprintf("%v may not carry that value: it is more confidential than it may receive.", [input.call.tool]),
} if {
	some reason in lib.flow_violation_reasons(input.call)
}

# METADATA
# title: require_approval
# description: |
#   Asks a person to approve a consequential call that carries a value
#   from an untrusted source, naming the argument and the source; or any
#   consequential call whose flows cannot be relied on.
# entrypoint: true
require_approval contains {
	"reason": sprintf(
		"argument %v of %v carries an untrusted value from %v (tool_call_id %v, message %v, part %v)",
		[f.path, input.call.tool, f.source.tool, f.source.tool_call_id, f.source.message, f.source.part],
	),
	"message": sprintf("Approve %v with a value taken from what %v returned?", [input.call.tool, f.source.tool]),
} if {
	lib.consequential(input.call.tool)
	not _approved
	some f in input.call.flows
	lib.source_label(f.source).integrity == "untrusted"
}

require_approval contains {
	"reason": sprintf("the flows of this %v call cannot be relied on", [input.call.tool]),
	"message": sprintf("Approve this %v call? What its arguments carry could not be checked.", [input.call.tool]),
} if {
	lib.consequential(input.call.tool)
	not _approved
	not lib.flows_complete(input.call)
}

_approved if input.call.approval.kind == "tool-approved"
