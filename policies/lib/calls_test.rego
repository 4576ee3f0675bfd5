# METADATA
# title: policycheck.lib counting tests
# description: The counting helpers count, window and sum the calls of a run.
package policycheck.lib_calls_test

import data.policycheck.lib

# A run: transfers at messages 1 and 3 (one retried at 3), a search, and
# the dispatched response at message 5 with two transfers.
run := {"facts": {"tool_calls": {
	"transfer_funds": [
		{
			"tool_call_id": "a", "message": 1, "part": 0,
			"timestamp": "2026-01-02T03:00:00Z", "outcome": "returned", "args": {"amount": 4000},
		},
		{
			"tool_call_id": "b", "message": 3, "part": 0,
			"timestamp": "2026-01-02T03:08:00Z", "outcome": "retried", "args": {"amount": 9000},
		},
		{
			"tool_call_id": "c", "message": 3, "part": 1,
			"timestamp": "2026-01-02T03:08:00Z", "outcome": "returned", "args": {"amount": "lots"},
		},
		{
			"tool_call_id": "d", "message": 5, "part": 0,
			"timestamp": "2026-01-02T03:10:00Z", "outcome": "pending", "args": {"amount": 5000},
		},
		{
			"tool_call_id": "e", "message": 5, "part": 2,
			"timestamp": "2026-01-02T03:10:00Z", "outcome": "pending", "args": {"amount": 500},
		},
	],
	"search": [{
		"tool_call_id": "s", "message": 5, "part": 1,
		"timestamp": "2026-01-02T03:10:00Z", "outcome": "pending", "args": {},
	}],
}}}

first := {"tool": "transfer_funds", "part": 0}

second := {"tool": "transfer_funds", "part": 2}

test_calls_lists_every_call_of_the_tool if {
	count(lib.calls("transfer_funds")) == 5 with input as run
	lib.calls("nope") == [] with input as run
}

test_call_count_counts_up_to_the_call_without_retried_ones if {
	lib.call_count(first) == 3 with input as run
	lib.call_count(second) == 4 with input as run
	lib.call_count({"tool": "search", "part": 1}) == 1 with input as run
}

test_calls_upto_lists_the_counted_calls if {
	[c.tool_call_id | some c in lib.calls_upto(second)] == ["a", "c", "d", "e"] with input as run
}

test_call_count_within_counts_the_recent_calls if {
	lib.call_count_within(second, time.parse_duration_ns("1m")) == 2 with input as run
	lib.call_count_within(second, time.parse_duration_ns("5m")) == 3 with input as run
	lib.call_count_within(first, time.parse_duration_ns("5m")) == 2 with input as run
	lib.call_count_within(second, time.parse_duration_ns("1h")) == 4 with input as run
}

test_call_count_within_counts_a_call_exactly_window_old if {
	lib.call_count_within(second, time.parse_duration_ns("2m")) == 3 with input as run
}

test_call_count_within_counts_unreadable_timestamps_as_recent if {
	odd := json.patch(run, [
		{"op": "replace", "path": "/facts/tool_calls/transfer_funds/0/timestamp", "value": null},
		{"op": "replace", "path": "/facts/tool_calls/transfer_funds/2/timestamp", "value": "2026-01-02 03:08:00"},
	])
	lib.call_count_within(second, time.parse_duration_ns("1m")) == 4 with input as odd
}

test_call_count_within_counts_every_call_when_the_call_time_is_unreadable if {
	odd := json.patch(run, [{"op": "replace", "path": "/facts/tool_calls/transfer_funds/4/timestamp", "value": null}])
	lib.call_count_within(second, time.parse_duration_ns("1m")) == 4 with input as odd
}

test_call_count_within_reads_unix_seconds if {
	unix := json.patch(run, [
		{"op": "replace", "path": "/facts/tool_calls/transfer_funds/0/timestamp", "value": 1767322800},
		{"op": "replace", "path": "/facts/tool_calls/transfer_funds/4/timestamp", "value": 1767323400},
	])
	lib.call_count_within(second, time.parse_duration_ns("5m")) == 3 with input as unix
	lib.call_count_within(second, time.parse_duration_ns("11m")) == 4 with input as unix
}

test_arg_sum_adds_the_numbers_up_to_the_call if {
	lib.arg_sum(first, "amount") == 9000 with input as run
	lib.arg_sum(second, "amount") == 9500 with input as run
	lib.arg_sum(second, "missing") == 0 with input as run
}

test_helpers_are_undefined_without_tool_calls if {
	not lib.calls("transfer_funds") with input as {"facts": {}}
	not lib.call_count(first) with input as {"facts": {}}
	not lib.arg_sum(first, "amount") with input as {"facts": {}}
	not lib.call_count_within(first, 1) with input as {"facts": {}}
}
