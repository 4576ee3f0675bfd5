# Data flows, part of package policycheck.lib (its METADATA is in
# lib.rego). Helpers for rules on where a call's arguments came from:
# "a value read from a secret-labelled tool may not leave through an
# external-labelled one unless a person approved it". They read
# input.call.flows (docs/flows.md: verbatim copies and substrings of a
# return's strings, not re-encodings or paraphrases), which the engine
# builds only for a policy set that reads it, and
# input.facts.flow_index_truncated.
package policycheck.lib

# METADATA
# title: flows_labelled
# description: |
#   The flows of `call` (in a rule, input.call) whose source tool carries
#   registry label `label`, in the order of call.flows:
#   `some f in lib.flows_labelled(input.call, "secret")`. Empty when the
#   call carries no flows: check lib.flows_complete(input.call) too.
flows_labelled(call, label) := [f |
	some f in object.get(call, "flows", [])
	label in f.source.labels
]

# METADATA
# title: flows_complete
# description: |
#   The flows of `call` can be relied on: the call carries them and the
#   index of return strings they were found in was not truncated (it
#   holds every return of the history). A rule that lets a call through
#   because no flow is labelled should fail closed without it:
#   `not lib.flows_complete(input.call)`.
flows_complete(call) if {
	is_array(call.flows)
	input.facts.flow_index_truncated == false
}
