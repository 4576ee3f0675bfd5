# METADATA
# title: Untrusted flows
# description: |
#   The integrity twin of examples/policies/exfiltration, for the
#   AgentDojo-style evaluation (examples/agentdojo/README.md): a call of a
#   consequential-labelled tool whose arguments carry a value returned by
#   an untrusted-labelled tool (text a third party wrote: a file, a web
#   page, an email, a review) gets approval_required until a person
#   approved that very call. The flows are today's: verbatim copies of a
#   whole returned string, or arguments containing one (docs/flows.md).
#   Fails closed: when the call's flows cannot be relied on, every
#   consequential call asks too.
package policycheck.rules.untrusted

import data.policycheck.lib

# METADATA
# title: require_approval
# description: |
#   Asks a person to approve a consequential call that carries a value
#   from an untrusted source, naming the argument and the source; or any
#   consequential call whose flows cannot be relied on.
# entrypoint: true
require_approval contains {
	"reason": sprintf(
		"argument %v of %v carries a value returned by untrusted-labelled %v (tool_call_id %v, message %v, part %v)",
		[f.path, input.call.tool, f.source.tool, f.source.tool_call_id, f.source.message, f.source.part],
	),
	"message": sprintf("Approve %v with a value taken from what %v returned?", [input.call.tool, f.source.tool]),
} if {
	_consequential
	not _approved
	some f in lib.flows_labelled(input.call, "untrusted")
}

require_approval contains {
	"reason": sprintf("the flows of this %v call cannot be relied on", [input.call.tool]),
	"message": sprintf("Approve this %v call? What its arguments carry could not be checked.", [input.call.tool]),
} if {
	_consequential
	not _approved
	not lib.flows_complete(input.call)
}

_consequential if "consequential" in data.policycheck.registry.tools[input.call.tool].labels

_approved if input.call.approval.kind == "tool-approved"
