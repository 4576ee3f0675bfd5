# METADATA
# title: gate probe rules (tests only)
# description: |
#   An operator rules package that exists only under opa test (the engine
#   never loads *_test.rego): it denies the tool `gate_probe` and names the
#   tool_call_id it read, so gate_test.rego can pin that deny rules see the
#   call as input.call. No real tool is called gate_probe.
package policycheck.rules.gate_probe_test

# METADATA
# title: deny
# description: Denies the probe tool, naming the call id it saw.
deny contains {"reason": sprintf("probe saw %s", [input.call.tool_call_id]), "message": "probe"} if {
	input.call.tool == "gate_probe"
}

# METADATA
# title: deny
# description: |
#   Denies the second probe tool, naming what it read beside the call: the
#   context and the facts of the decision's input.
deny contains {"reason": reason, "message": "probe"} if {
	input.call.tool == "gate_probe_input"
	reason := sprintf("probe saw %s and %d discovered", [input.context.who, count(input.facts.discovered)])
}

# METADATA
# title: require_approval
# description: |
#   Asks approval for the approval probe tool until the approval bound to
#   the call (input.call.approval) names two approvers, and names the
#   amount it read: the arguments the call would execute with.
require_approval contains {
	"reason": sprintf("probe saw amount %v", [input.call.args.amount]),
	"message": "approve the probe",
} if {
	input.call.tool == "gate_probe_approval"
	count(object.get(input.call, ["approval", "approvers"], [])) < 2
}
