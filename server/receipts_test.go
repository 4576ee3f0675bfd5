package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/trust"
)

// testSigner is a receipt signer of the table's key seed n on clock now.
func testSigner(t testing.TB, n byte, now func() time.Time) *trust.Signer {
	t.Helper()
	s, err := trust.NewSigner(receiptcases.Key(n), trust.TTL(receiptcases.TTL), trust.Clock(now))
	require.NoError(t, err)
	return s
}

// signingServer serves the examples' registry and policies, signing
// receipts with s.
func signingServer(t *testing.T, s *trust.Signer) *running {
	t.Helper()
	reg, err := loader.ReadRegistry(filepath.Join("..", "examples", "registry.yaml"))
	require.NoError(t, err)
	return start(t, withRegistry(reg), withEngine(engine.PolicyPaths(filepath.Join("..", "examples", "policies"))),
		withReceipts(s))
}

// getKeys fetches and parses GET /v1/keys.
func getKeys(t *testing.T, rs *running) (raw []byte, keys receiptKeys) {
	t.Helper()
	resp, err := rs.client.Get(rs.url + "/v1/keys")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.NoError(t, json.Unmarshal(raw, &keys), string(raw))
	return raw, keys
}

type receiptKeys struct {
	Keys []struct{ Kid, Kty, Crv, Alg, Use string }
}

// receiptOf posts body to path and returns the receipt of the decision's
// call with tool_call_id id, which must execute.
func receiptOf(t *testing.T, rs *running, path, body, id string) string {
	t.Helper()
	status, out := rs.post(t, path, []byte(body))
	require.Equal(t, http.StatusOK, status, string(out))
	var d engine.Decision
	require.NoError(t, json.Unmarshal(out, &d))
	for _, c := range d.Calls {
		if c.ToolCallID != nil && *c.ToolCallID == id {
			require.Equal(t, engine.Execute, c.Verdict, "%+v", c)
			require.NotEmpty(t, c.Receipt, "an execute carries a receipt")
			return c.Receipt
		}
		if c.Verdict != engine.Execute {
			assert.Empty(t, c.Receipt, "only an execute carries a receipt: %+v", c)
		}
	}
	t.Fatalf("no call %q in %s", id, out)
	return ""
}

// TestReceiptForgeriesOverHTTP runs the forgery table against receipts
// the sidecar signed, on /v1/decide (no run) and on a run's decide
// endpoint, verified with the keys GET /v1/keys serves: the honest
// receipt verifies; each forgery is rejected and says why.
func TestReceiptForgeriesOverHTTP(t *testing.T) {
	issued := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return issued }
	rs := signingServer(t, testSigner(t, 1, clock))
	other := signingServer(t, testSigner(t, 2, clock)) // a key the verifier does not know
	raw, _ := getKeys(t, rs)
	keys, err := trust.ParseKeys(raw)
	require.NoError(t, err)

	history, err := os.ReadFile(filepath.Join("..", "examples", "histories", "refund.json"))
	require.NoError(t, err)
	ctx, err := os.ReadFile(filepath.Join("..", "examples", "context", "support.json"))
	require.NoError(t, err)
	id := "c1" // get_order {"order_id": 7}, which executes
	for i, ep := range []struct{ name, run string }{{"decide", ""}, {"run", "run-a"}} {
		for j, tc := range receiptcases.Cases() {
			t.Run(ep.name+"/"+tc.Name, func(t *testing.T) {
				path, body := "/v1/decide", fmt.Sprintf(`{"history": %s, "context": %s}`, history, ctx)
				if ep.run != "" {
					path = fmt.Sprintf("/v1/runs/%s-%d-%d/decide", ep.run, i, j)
					body = fmt.Sprintf(`{"offset": 0, "messages": %s, "context": %s}`, history, ctx)
				}
				signer := rs
				if tc.OtherKey {
					signer = other
				}
				r := receiptOf(t, signer, path, body, id)
				if tc.Tamper != nil {
					r = tc.Tamper(r)
				}
				callID := id
				call := trust.Call{ToolCallID: &callID, Tool: "get_order", Args: []byte(`{"order_id":7}`)}
				if ep.run != "" {
					call.RunID = fmt.Sprintf("%s-%d-%d", ep.run, i, j)
				}
				if tc.Edit != nil {
					tc.Edit(&call)
				}
				c, err := trust.Verify(r, keys, call, trust.Clock(func() time.Time { return issued.Add(tc.Later) }))
				if tc.Want == "" {
					require.NoError(t, err)
					assert.Equal(t, call.RunID, c.RunID)
					assert.Equal(t, "get_order", c.Tool)
					assert.NotEmpty(t, c.PolicyRevision)
					assert.Equal(t, issued.Add(receiptcases.TTL).Unix(), c.Expiry)
					return
				}
				var inv *trust.Invalid
				require.ErrorAs(t, err, &inv)
				assert.Contains(t, inv.Reason, tc.Want)
			})
		}
	}
}

// TestReceiptCoversOverrideArgs: a call an approval lets execute with
// the approver's override_args is signed over those arguments, not the
// ones the model wrote, and the receipt names the approval applied.
func TestReceiptCoversOverrideArgs(t *testing.T) {
	rs := signingServer(t, testSigner(t, 1, time.Now))
	raw, _ := getKeys(t, rs)
	keys, err := trust.ParseKeys(raw)
	require.NoError(t, err)
	transfer, err := os.ReadFile(filepath.Join("..", "examples", "histories", "transfer.json"))
	require.NoError(t, err)
	var file struct{ Approvals json.RawMessage }
	raw, err = os.ReadFile(filepath.Join("..", "examples", "approvals", "transfer.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &file))
	var answers map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(file.Approvals, &answers))
	require.Len(t, answers, 1)
	var id string
	var approval struct {
		OverrideArgs json.RawMessage `json:"override_args"`
	}
	for k, v := range answers {
		id = k
		require.NoError(t, json.Unmarshal(v, &approval))
	}
	require.NotEmpty(t, approval.OverrideArgs, "the example approval overrides the arguments")
	r := receiptOf(t, rs, "/v1/decide", fmt.Sprintf(`{"history": %s, "approvals": %s, "context": %s}`, transfer, file.Approvals, adminContext(t)), id)

	var tool string
	var modelArgs json.RawMessage
	var msgs []struct {
		Parts []struct {
			PartKind   string          `json:"part_kind"`
			ToolName   string          `json:"tool_name"`
			ToolCallID string          `json:"tool_call_id"`
			Args       json.RawMessage `json:"args"`
		}
	}
	require.NoError(t, json.Unmarshal(transfer, &msgs))
	for _, p := range msgs[len(msgs)-1].Parts {
		if p.ToolCallID == id {
			tool, modelArgs = p.ToolName, p.Args
		}
	}
	require.NotEmpty(t, tool)
	c, err := trust.Verify(r, keys, trust.Call{ToolCallID: &id, Tool: tool, Args: approval.OverrideArgs})
	require.NoError(t, err, "the receipt vouches for the approver's arguments")
	require.Len(t, c.Approvals, 1)
	assert.True(t, c.Approvals[0].Applied)
	_, err = trust.Verify(r, keys, trust.Call{ToolCallID: &id, Tool: tool, Args: modelArgs})
	require.Error(t, err, "the model's own arguments are not what was approved")
}

// TestReceiptKeysAfterRotation: after a rotation GET /v1/keys lists the
// new key first and the replaced one until the receipts it signed have
// expired; a receipt of the old key verifies with the served keys until
// then, and not after.
func TestReceiptKeysAfterRotation(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s := testSigner(t, 1, clock)
	rs := signingServer(t, s)
	history, err := os.ReadFile(filepath.Join("..", "examples", "histories", "refund.json"))
	require.NoError(t, err)
	body := fmt.Sprintf(`{"history": %s, "context": %s}`, history, adminContext(t))
	old := receiptOf(t, rs, "/v1/decide", body, "c1")
	_, before := getKeys(t, rs)
	require.Len(t, before.Keys, 1)
	assert.Equal(t, "OKP", before.Keys[0].Kty)
	assert.Equal(t, "EdDSA", before.Keys[0].Alg)
	assert.Equal(t, s.KeyID(), before.Keys[0].Kid)

	require.NoError(t, s.Rotate(receiptcases.Key(2)))
	now = now.Add(time.Minute)
	rotated := receiptOf(t, rs, "/v1/decide", body, "c1")
	raw, after := getKeys(t, rs)
	require.Len(t, after.Keys, 2, string(raw))
	assert.Equal(t, s.KeyID(), after.Keys[0].Kid, "the current key first")
	assert.Equal(t, before.Keys[0].Kid, after.Keys[1].Kid, "the replaced key is still listed")
	keys, err := trust.ParseKeys(raw)
	require.NoError(t, err)
	id := "c1"
	call := trust.Call{ToolCallID: &id, Tool: "get_order", Args: []byte(`{"order_id": 7}`)}
	at := func() time.Time { return now }
	for _, r := range []string{old, rotated} {
		_, err := trust.Verify(r, keys, call, trust.Clock(at))
		require.NoError(t, err)
	}

	// Once every receipt of the old key has expired, it is gone.
	now = now.Add(receiptcases.TTL)
	raw, later := getKeys(t, rs)
	require.Len(t, later.Keys, 1, string(raw))
	assert.Equal(t, s.KeyID(), later.Keys[0].Kid)
	keys, err = trust.ParseKeys(raw)
	require.NoError(t, err)
	_, err = trust.Verify(old, keys, call, trust.Clock(func() time.Time { return now.Add(-time.Minute) }))
	require.ErrorContains(t, err, "not in the key set")
}

// TestNoReceiptsWithoutAKey: without Receipts no decision carries a
// receipt and /v1/keys is not found.
func TestNoReceiptsWithoutAKey(t *testing.T) {
	reg, err := loader.ReadRegistry(filepath.Join("..", "examples", "registry.yaml"))
	require.NoError(t, err)
	rs := start(t, withRegistry(reg))
	history, err := os.ReadFile(filepath.Join("..", "examples", "histories", "refund.json"))
	require.NoError(t, err)
	status, out := rs.post(t, "/v1/decide", []byte(fmt.Sprintf(`{"history": %s}`, history)))
	require.Equal(t, http.StatusOK, status, string(out))
	assert.NotContains(t, string(out), `"receipt"`)
	resp, err := rs.client.Get(rs.url + "/v1/keys")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func adminContext(t *testing.T) []byte {
	t.Helper()
	ctx, err := os.ReadFile(filepath.Join("..", "examples", "context", "admin.json"))
	require.NoError(t, err)
	return ctx
}

// TestSignedApprovalsOverHTTP runs the signed-approval table through a
// sidecar with approver keys, on /v1/decide, /v1/explain and a run: only
// the approval the approver's key signed counts, as the key's sub; the
// others are not applied and the decision says why.
func TestSignedApprovalsOverHTTP(t *testing.T) {
	keys, err := trust.ParseKeys(receiptcases.ApproverJWKS())
	require.NoError(t, err)
	v, err := trust.NewApprovalVerifier(keys)
	require.NoError(t, err)
	reg, err := loader.ReadRegistry(filepath.Join("..", "examples", "registry.yaml"))
	require.NoError(t, err)
	rs := start(t, withRegistry(reg), withEngine(engine.PolicyPaths(filepath.Join("..", "examples", "policies"))), withApproverKeys(v))
	transfer, err := os.ReadFile(filepath.Join("..", "examples", "histories", "transfer.json"))
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join("..", "examples", "approvals", "transfer.json"))
	require.NoError(t, err)
	var file struct {
		Approvals map[string]map[string]json.RawMessage
	}
	require.NoError(t, json.Unmarshal(raw, &file))
	for i, tc := range receiptcases.ApprovalCases() {
		t.Run(tc.Name, func(t *testing.T) {
			a := map[string]json.RawMessage{}
			for k, v := range file.Approvals["t2"] {
				a[k] = v
			}
			var p trust.ApprovalPayload
			require.NoError(t, json.Unmarshal(a["digest"], &p.Digest))
			require.NoError(t, json.Unmarshal(a["kind"], &p.Kind))
			p.OverrideArgs = a["override_args"]
			// approvals is the approval signed for a decision of run.
			approvals := func(run string) []byte {
				a := maps.Clone(a)
				if sig := tc.Sign(receiptcases.Honest(p, run)); sig != "" {
					a["signature"], _ = json.Marshal(sig)
				}
				out, err := json.Marshal(map[string]any{"t2": a})
				require.NoError(t, err)
				return out
			}
			run := fmt.Sprintf("signed-%d", i)
			// explain first: it uses no signature, and decide then may.
			for _, ep := range []struct{ path, body string }{
				{"/v1/explain", fmt.Sprintf(`{"history": %s, "approvals": %s, "context": %s}`, transfer, approvals(""), adminContext(t))},
				{"/v1/decide", fmt.Sprintf(`{"history": %s, "approvals": %s, "context": %s}`, transfer, approvals(""), adminContext(t))},
				{"/v1/runs/" + run + "/decide", fmt.Sprintf(`{"offset": 0, "messages": %s, "approvals": %s, "context": %s}`, transfer, approvals(run), adminContext(t))},
			} {
				status, out := rs.post(t, ep.path, []byte(ep.body))
				require.Equal(t, http.StatusOK, status, "%s: %s", ep.path, out)
				d := decisionOf(t, ep.path, out)
				require.Len(t, d.Approvals, 1, ep.path)
				o := d.Approvals[0]
				assert.Equal(t, tc.Applied, o.Applied, "%s: %s", ep.path, o.Why)
				assert.Contains(t, o.Why, tc.Want, ep.path)
				if tc.Applied {
					assert.Equal(t, []string{receiptcases.Approver}, o.Approvers, ep.path)
				}
			}
		})
	}
}
