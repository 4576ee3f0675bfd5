# METADATA
# title: Group tool policy
# description: |
#   Which tools a user sees, by input.context.group (seed 004): per group an
#   allow list of tool names (absent: every tool), a deny list, and a
#   capability scope (absent: every capability; tools that belong to no
#   capability are never out of scope). A user in no known group sees no
#   registry tool.
#
#   The policy only adds names to `hide`, a set computed per request from
#   the registry (shared, read-only data) and the request's context: no
#   request can change what another sees, whatever order they come in.
package policycheck.rules.groups

# METADATA
# title: table
# description: The group table. Edit it, or move it to a data.json.
table := {
	"admin": {},
	"support": {"deny": {"transfer_funds"}, "capabilities": {"docs", "refunds"}},
	"viewer": {"allow": {"get_time", "get_order", "search_docs"}},
}

# METADATA
# title: hide
# description: Every registry tool the request's group may not see.
# entrypoint: true
hide contains name if {
	some name in data.policycheck.registry.names
	not _visible(name)
}

_visible(name) if {
	group := table[input.context.group]
	_allowed(group, name)
	not name in object.get(group, "deny", set())
	_in_scope(group, name)
}

_allowed(group, _) if not "allow" in object.keys(group)

_allowed(group, name) if name in group.allow

_in_scope(group, _) if not "capabilities" in object.keys(group)

_in_scope(_, name) if data.policycheck.registry.tools[name].capability == null

_in_scope(group, name) if data.policycheck.registry.tools[name].capability in group.capabilities
