# METADATA
# title: Tool visibility by group
# description: |
#   Request-scoped visibility (seed 004): the caller's group, from
#   input.context.group, hides tools for this request only. A hidden tool is
#   neither advertised nor callable; a call to it is an unknown tool.
package policycheck.rules.groups

_hidden_by_group := {
	"interns": {"transfer_funds"},
	"guests": {"transfer_funds", "read_ledger"},
	"nobody": {"transfer_funds", "read_ledger", "get_time"},
}

# METADATA
# title: hide
# description: The tools the caller's group may not see.
hide contains name if {
	some name in _hidden_by_group[input.context.group]
}
