# METADATA
# title: Exfiltration
# description: |
#   A value returned by a secret-labelled tool may not leave through a call
#   of an external-labelled tool unless a person approved that very call:
#   such a call gets approval_required until an approval is bound to it
#   (input.call.approval; a denial the gate turns into denied). The labels
#   are the registry's (examples/registry.yaml: the vault capability is
#   labelled secret, transfer_funds external); the flows are
#   input.call.flows, argument values equal to or containing a string (or
#   equal to a number) of an earlier return (docs/flows.md says what that
#   catches and what it does not). Fails closed: when the call carries no
#   flows (an input recorded without them) or the index of returns was
#   truncated, every call of an external tool needs the approval too.
package policycheck.rules.exfiltration

import data.policycheck.lib

# METADATA
# title: require_approval
# description: |
#   Asks a person to approve a call of an external tool that carries a
#   value from a secret source, naming the argument and where the value
#   came from; or any call of an external tool whose flows cannot be
#   relied on.
# entrypoint: true
require_approval contains {
	"reason": sprintf(
		"argument %v of %v carries a value returned by secret-labelled %v (tool_call_id %v, message %v, part %v)",
		[_pointer(f.path), input.call.tool, f.source.tool, f.source.tool_call_id, f.source.message, f.source.part],
	),
	"message": sprintf(
		"Approve sending a value read from %v through %v (argument %v)?",
		[f.source.tool, input.call.tool, _pointer(f.path)],
	),
} if {
	_external
	not _approved
	some f in lib.flows_labelled(input.call, "secret")
}

require_approval contains {
	"reason": sprintf(
		"the flows of this %v call cannot be relied on (missing, or the index of returns was truncated)",
		[input.call.tool],
	),
	"message": sprintf("Approve this %v call? What its arguments carry could not be checked.", [input.call.tool]),
} if {
	_external
	not _approved
	not lib.flows_complete(input.call)
}

_external if "external" in data.policycheck.registry.tools[input.call.tool].labels

_approved if input.call.approval.kind == "tool-approved"

# The whole arguments are the pointer "".
_pointer(p) := "(the whole arguments)" if p == ""

else := p
