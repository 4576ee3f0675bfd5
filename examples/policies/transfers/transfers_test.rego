# METADATA
# title: Transfer approval tests
# description: |
#   Which transfers need one or two approvers, what an approval bound to
#   the call (input.call.approval) satisfies, that an override is judged
#   again. Malformed arguments never reach these rules (the registry's
#   parameters_json_schema makes them invalid_args). The verdicts these
#   make through the shipped gate are pinned through eval
#   (examples/examples_test.go).
package policycheck.rules.transfers_test

import data.policycheck.rules.transfers

transfer(args) := {"tool": "transfer_funds", "tool_call_id": "t1", "args": args}

pay(amount) := {"from": "ops", "to": "savings", "amount": amount}

# approved(call, approvers) is call with an approval bound to it, as the
# engine hands it; overridden(...) one with override_args, which the rules
# see as input.call.args.
approved(call, approvers) := object.union(call, {"approval": {
	"kind": "tool-approved", "digest": "sha256:x",
	"approvers": approvers, "call_args": call.args,
}})

overridden(call, approvers, args) := object.union(approved(call, approvers), {
	"args": args,
	"approval": {"override_args": args},
})

denied(call) := object.union(call, {"approval": {
	"kind": "tool-denied", "digest": "sha256:x",
	"approvers": ["ana"], "call_args": call.args, "message": "no",
}})

test_require_approval[note] if {
	cases := {
		"small transfers need no approval": {"call": transfer(pay(250)), "asks": false},
		"the limit itself needs none": {"call": transfer(pay(1000)), "asks": false},
		"above the limit asks": {"call": transfer(pay(5000)), "asks": true},
		"one approver is enough below the two-approver limit": {
			"call": approved(transfer(pay(5000)), ["ana"]),
			"asks": false,
		},
		"an approval that names no one counts as none": {
			"call": approved(transfer(pay(5000)), []),
			"asks": true,
		},
		"above the two-approver limit one approver is not enough": {
			"call": approved(transfer(pay(20000)), ["ana"]),
			"asks": true,
		},
		"the same approver twice is one approver": {
			"call": approved(transfer(pay(20000)), ["ana", "ana"]),
			"asks": true,
		},
		"two different approvers are enough": {
			"call": approved(transfer(pay(20000)), ["ana", "bo"]),
			"asks": false,
		},
		"a denial approves nothing": {"call": denied(transfer(pay(5000))), "asks": true},
		"an override is judged again": {
			"call": overridden(transfer(pay(5000)), ["ana"], pay(20000)),
			"asks": true,
		},
		"other tools never ask": {
			"call": {"tool": "get_time", "tool_call_id": "c1", "args": {"amount": 9999}},
			"asks": false,
		},
	}
	some note, tc in cases
	asks := count(transfers.require_approval) > 0 with input as {"call": tc.call, "context": {}}
	asks == tc.asks
}

test_deny[note] if {
	cases := {
		"an approved transfer within the hard limit passes": {
			"call": approved(transfer(pay(20000)), ["ana", "bo"]),
			"denied": false,
		},
		"above the hard limit is denied whatever the approval": {
			"call": approved(transfer(pay(60000)), ["ana", "bo"]),
			"denied": true,
		},
		"an override above the hard limit is denied": {
			"call": overridden(transfer(pay(5000)), ["ana"], pay(60000)),
			"denied": true,
		},
		"an override that lowers the amount passes": {
			"call": overridden(transfer(pay(5000)), ["ana"], pay(4000)),
			"denied": false,
		},
		"an override that changes the payee is denied": {
			"call": overridden(transfer(pay(5000)), ["ana"], {"from": "ops", "to": "mallory", "amount": 5000}),
			"denied": true,
		},
		"other tools are never denied": {
			"call": {"tool": "get_time", "tool_call_id": "c1", "args": {"amount": 99999}},
			"denied": false,
		},
	}
	some note, tc in cases
	denied := count(transfers.deny) > 0 with input as {"call": tc.call, "context": {}}
	denied == tc.denied
}

test_request_tells_the_approver_what_they_approve if {
	rs := transfers.require_approval with input as {"call": transfer(pay(5000)), "context": {}}
	some r in rs
	r.message == "Approve a transfer of 5000 from ops to savings?"
	r.reason == "transfer_funds of 5000 exceeds the limit of 1000 and needs 1 approver(s); the bound approval names 0"
}
