# Counting calls, part of package policycheck.lib (its METADATA is in
# lib.rego). Helpers for rules that count the calls of a run and add up
# their arguments: budgets ("at most 3 transfers per run", "their amounts
# sum to at most 10,000") and rates ("no more than 10 searches in 5
# minutes"). They read input.facts.tool_calls, which the engine builds
# only for a policy set that reads it (docs/input.md, "Counting calls").
#
# A call whose outcome is `retried` (a retry-prompt sent it back: it did
# not execute) is never counted; a `returned` or `pending` one is. In a
# deny or require_approval rule, pass input.call: the helpers then count
# the calls up to and including that one, so that of two calls in one
# response the later one sees the earlier.
package policycheck.lib

# METADATA
# title: calls
# description: |
#   The calls of `tool` in the whole history (input.facts.tool_calls),
#   in history order, retried ones included: `count(lib.calls("search"))`.
calls(tool) := object.get(input.facts.tool_calls, tool, [])

# METADATA
# title: calls_upto
# description: |
#   The calls of call.tool that executed or may execute (not retried), up
#   to and including `call`, a call of the dispatched response (in a rule,
#   input.call): `count(lib.calls_upto(input.call)) > 3` is a fourth call.
calls_upto(call) := [c |
	some c in calls(call.tool)
	c.outcome != "retried"
	_upto(c, call)
] if {
	input.facts.tool_calls
}

# METADATA
# title: call_count
# description: |
#   The number of calls of call.tool up to and including `call`, retried
#   ones not counted: the count per run.
#   `deny contains "at most 3 transfers per run" if lib.call_count(input.call) > 3`.
call_count(call) := count(calls_upto(call))

# METADATA
# title: call_count_within
# description: |
#   call_count over the calls whose message's timestamp is at most
#   `window_ns` nanoseconds before the timestamp of `call`'s message:
#   `lib.call_count_within(input.call, time.parse_duration_ns("5m")) > 10`.
#   Fails closed: a call whose timestamp is null or unreadable counts as
#   recent, and when `call`'s own timestamp is unreadable every call counts.
#   Timestamps are read as RFC 3339 strings (`2026-01-02T03:04:05Z`, an
#   offset, a fraction) or numbers of Unix seconds.
call_count_within(call, window_ns) := count([c |
	some c in ups
	not _older(c, call, window_ns)
]) if {
	ups := calls_upto(call)
}

# METADATA
# title: arg_sum
# description: |
#   The sum of argument `key` over the calls of call.tool up to and
#   including `call`, retried ones left out:
#   `lib.arg_sum(input.call, "amount") > 10000`. Values that are not
#   numbers are left out of the sum: deny such a call on its own (as the
#   budgets example does) so that none executes.
arg_sum(call, key) := sum([v |
	some c in ups
	v := object.get(c.args, key, null)
	is_number(v)
]) if {
	ups := calls_upto(call)
}

# The index of the dispatched response: the last message with calls.
_dispatch_message := max({c.message | some cs in input.facts.tool_calls; some c in cs})

# c comes before call, a call of the dispatched response, or is call.
_upto(c, call) if [c.message, c.part] <= [_dispatch_message, call.part]

# The timestamp of call's message, in nanoseconds.
_call_ns(call) := _ns(c.timestamp) if {
	some c in calls(call.tool)
	c.message == _dispatch_message
	c.part == call.part
}

# c is known to be more than window_ns older than call.
_older(c, call, window_ns) if _ns(c.timestamp) < _call_ns(call) - window_ns

# A timestamp in nanoseconds since the epoch; undefined when unreadable.
_ns(ts) := time.parse_rfc3339_ns(ts) if {
	is_string(ts)
	regex.match(`^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$`, ts)
}

_ns(ts) := round(ts * 1000000000) if is_number(ts)
