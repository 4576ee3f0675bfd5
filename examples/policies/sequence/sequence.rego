# METADATA
# title: Look before you refund
# description: |
#   A sequence rule over facts: a tool is callable only after another tool
#   has returned successfully inside the post-compaction window
#   (input.facts.returned). A compaction that summarised the lookup away
#   makes the model look again.
package policycheck.rules.sequence

# METADATA
# title: after
# description: tool -> the tool that must have returned successfully first.
after := {"issue_refund": "get_order"}

# METADATA
# title: deny
# description: Denies a call whose prerequisite has not returned successfully in the window.
# entrypoint: true
deny contains {
	"reason": sprintf("%s requires a successful %s in the post-compaction window", [input.call.tool, first]),
	"message": sprintf("Call %s first and check its result, then call %s again.", [first, input.call.tool]),
} if {
	first := after[input.call.tool]
	not first in input.facts.returned
}
