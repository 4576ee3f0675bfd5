package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/trust"
)

// A rule that denies a call unless it is approved gives the harness what
// approval_required gives it, the call's digest, so that the approver's
// answer can be bound without computing it by hand; and the operator
// reasons of require_approval, like deny's, carry the rule's
// file:row:col.
func TestDenyUnlessApprovedCarriesTheDigest(t *testing.T) {
	reg := mustRegistry(t, `{"tools": [{"name": "transfer_funds"}, {"name": "get_time"}]}`)
	e := mustEngine(t, reg, engine.Modules(engine.Source{File: "rules/pay.rego", Text: `package policycheck.rules.pay

deny contains {"reason": "unapproved transfer", "message": "Ask for approval first."} if {
	input.call.tool == "transfer_funds"
	not input.call.approval
}

require_approval contains {"reason": "time needs a yes", "message": "Tell the time?"} if input.call.tool == "get_time"
`}))
	h := mustHistory(t, wReq(wUser("pay")), wResp("openai",
		wCall("transfer_funds", "p1", `{"amount": 50}`), wCall("get_time", "p2", `{}`)))
	d := mustDecide(t, e, h, nil)
	require.Len(t, d.Calls, 2)
	pay, clock := d.Calls[0], d.Calls[1]
	assert.Equal(t, engine.Denied, pay.Verdict)
	id := "p1"
	assert.Equal(t, trust.CallDigest(&id, "transfer_funds", []byte(`{"amount": 50}`)), pay.Digest)
	assert.Equal(t, []string{"denied by policycheck.rules.pay (rules/pay.rego:3:1): unapproved transfer"}, pay.Reasons)
	assert.Equal(t, engine.ApprovalRequired, clock.Verdict)
	assert.Equal(t, []string{"approval required by policycheck.rules.pay (rules/pay.rego:8:1): time needs a yes"}, clock.Reasons)
}
