package trust_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/approvalcases"
	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
	"github.com/policycheck/policycheck/trust"
)

// TestVerifyForgeries runs the receipt forgery table beside the verifier:
// a receipt signed for get_order {"order_id": 7} (call c1), stateless and
// in a run, verifies for exactly that call and is rejected, saying why,
// when moved, expired, tampered with or signed by a key not in the set.
// The CLI's and the sidecar's tests run the same table through their
// entry points.
func TestVerifyForgeries(t *testing.T) {
	issued := time.Unix(1_800_000_000, 0)
	clock := trust.Clock(func() time.Time { return issued })
	signer, err := trust.NewSigner(receiptcases.Key(1), trust.TTL(receiptcases.TTL), clock)
	require.NoError(t, err)
	other, err := trust.NewSigner(receiptcases.Key(2), trust.TTL(receiptcases.TTL), clock)
	require.NoError(t, err)
	keysJSON, err := signer.KeysJSON()
	require.NoError(t, err)
	keys, err := trust.ParseKeys(keysJSON)
	require.NoError(t, err)
	args := []byte(`{"order_id": 7}`)
	for _, run := range []string{"", "run-a"} {
		for _, tc := range receiptcases.Cases() {
			t.Run(run+"/"+tc.Name, func(t *testing.T) {
				id := "c1"
				s := signer
				if tc.OtherKey {
					s = other
				}
				r, err := s.Sign(trust.Claims{RunID: run, ToolCallID: &id, Tool: "get_order",
					Digest: trust.CallDigest(&id, "get_order", args), PolicyRevision: "rev"})
				require.NoError(t, err)
				if tc.Tamper != nil {
					r = tc.Tamper(r)
				}
				callID := id
				call := trust.Call{RunID: run, ToolCallID: &callID, Tool: "get_order", Args: args}
				if tc.Edit != nil {
					tc.Edit(&call)
				}
				c, err := trust.Verify(r, keys, call, trust.Clock(func() time.Time { return issued.Add(tc.Later) }))
				if tc.Want == "" {
					require.NoError(t, err)
					assert.Equal(t, run, c.RunID)
					assert.Equal(t, issued.Add(receiptcases.TTL).Unix(), c.Expiry)
					assert.NotEmpty(t, c.ID)
					return
				}
				var inv *trust.Invalid
				require.ErrorAs(t, err, &inv)
				assert.Contains(t, inv.Reason, tc.Want)
			})
		}
	}
}

// TestApprovalForgeries runs the signed-approval table beside the
// verifier: only the approver's signature over the approval's digest,
// kind and override_args, for the decision's run and within the exp
// bound, counts, as the key's sub; every other signature is refused with
// the code decision logs record and the reason the decision gives.
func TestApprovalForgeries(t *testing.T) {
	keys, err := trust.ParseKeys(receiptcases.ApproverJWKS())
	require.NoError(t, err)
	v, err := trust.NewApprovalVerifier(keys)
	require.NoError(t, err)
	honest := trust.ApprovalPayload{
		Digest:       approvalcases.Digest("t2", "transfer_funds", map[string]any{"from": "ops", "to": "savings", "amount": 5000}),
		Kind:         facts.ToolApproved,
		OverrideArgs: json.RawMessage(`{"from": "ops", "to": "savings", "amount": 4000}`),
	}
	for _, run := range []string{"", "run-a"} {
		for _, tc := range receiptcases.ApprovalCases() {
			t.Run(run+"/"+tc.Name, func(t *testing.T) {
				a := facts.Approval{Kind: honest.Kind, Digest: honest.Digest, OverrideArgs: honest.OverrideArgs,
					Signature: tc.Sign(receiptcases.Honest(honest, run)), Approvers: []string{"whoever"}}
				got := v.Check(facts.Approvals{"t2": a}, run)["t2"]
				assert.Equal(t, tc.Result, got.Verification)
				outcomes := trust.SignatureOutcomes(facts.Approvals{"t2": got})
				require.Len(t, outcomes, 1)
				assert.Equal(t, tc.Result, outcomes[0].Result)
				if tc.Applied {
					assert.Empty(t, got.Refused)
					assert.Equal(t, []string{receiptcases.Approver}, got.Approvers)
					assert.Equal(t, receiptcases.Approver, outcomes[0].Approver)
					return
				}
				// The engine gives the refusal as "not applied: " and it.
				assert.Contains(t, "not applied: "+got.Refused, tc.Want)
				assert.Empty(t, outcomes[0].Approver)
			})
		}
	}
}

// TestApprovalBindingDigests runs the approval binding table beside the
// call digest: in every case the table refuses because the call is not
// what the approver was shown, no call of the last response with the
// approval's tool_call_id has the digest the approval carries; in every
// other case each such call has it (and the engine refuses, where it
// does, for another reason).
func TestApprovalBindingDigests(t *testing.T) {
	for _, tc := range approvalcases.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			var history []struct {
				Parts []struct {
					PartKind   string          `json:"part_kind"`
					ToolName   string          `json:"tool_name"`
					ToolCallID string          `json:"tool_call_id"`
					Args       json.RawMessage `json:"args"`
				} `json:"parts"`
			}
			require.NoError(t, json.Unmarshal(tc.History, &history))
			var approvals map[string]struct{ Digest string }
			require.NoError(t, json.Unmarshal(tc.Approvals, &approvals))
			last := history[len(history)-1]
			mismatch := strings.Contains(tc.Why, "not what the approver was shown")
			for id, a := range approvals {
				for _, p := range last.Parts {
					if p.PartKind != "tool-call" || p.ToolCallID != id {
						continue
					}
					d := trust.CallDigest(&p.ToolCallID, p.ToolName, p.Args)
					if mismatch {
						assert.NotEqual(t, a.Digest, d, "call %s %s", p.ToolName, p.Args)
					} else if !strings.Contains(tc.Name, "one with other arguments") {
						assert.Equal(t, a.Digest, d, "call %s %s", p.ToolName, p.Args)
					}
				}
			}
		})
	}
}
