package cli_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
	"github.com/policycheck/policycheck/trust"
)

// exampleApproval is examples/approvals/transfer.json's approval of t2,
// as a map to add a signature to, and the payload an approver signs.
func exampleApproval(t *testing.T, path string) (map[string]any, trust.ApprovalPayload) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var file struct {
		Approvals map[string]map[string]json.RawMessage
	}
	require.NoError(t, json.Unmarshal(raw, &file))
	a := file.Approvals["t2"]
	require.NotNil(t, a)
	var p trust.ApprovalPayload
	require.NoError(t, json.Unmarshal(a["digest"], &p.Digest))
	require.NoError(t, json.Unmarshal(a["kind"], &p.Kind))
	p.OverrideArgs = a["override_args"]
	m := map[string]any{}
	for k, v := range a {
		m[k] = v
	}
	return m, p
}

// TestSignedApprovalsThroughEval runs the signed-approval table through
// eval --approver-keys: only the approval the approver's key signed over
// its digest, kind and override_args counts, its approver is the key's
// sub (not the name the file wrote), and every other one is not applied
// and the decision says why.
func TestSignedApprovalsThroughEval(t *testing.T) {
	dir := t.TempDir()
	keys := writeFile(t, dir, "approvers.json", string(receiptcases.ApproverJWKS()))
	for _, tc := range receiptcases.ApprovalCases() {
		t.Run(tc.Name, func(t *testing.T) {
			a, p := exampleApproval(t, "../../examples/approvals/transfer.json")
			if sig := tc.Sign(receiptcases.Honest(p, "")); sig != "" {
				a["signature"] = sig
			}
			b, err := json.Marshal(map[string]any{"approvals": map[string]any{"t2": a}})
			require.NoError(t, err)
			approvals := writeFile(t, dir, "approvals.json", string(b))
			res := run(t, "", "eval", "--registry", "../../examples/registry.yaml", "--history", "../../examples/histories/transfer.json",
				"--policy", "../../examples/policies", "--context", "../../examples/context/admin.json", "--approvals", approvals, "--approver-keys", keys)
			require.Equal(t, 0, res.code, res.stderr)
			var d engine.Decision
			require.NoError(t, json.Unmarshal([]byte(res.stdout), &d))
			require.Len(t, d.Approvals, 1)
			o := d.Approvals[0]
			assert.Equal(t, tc.Applied, o.Applied, o.Why)
			assert.Contains(t, o.Why, tc.Want)
			for _, c := range d.Calls {
				if *c.ToolCallID != "t2" {
					continue
				}
				if tc.Applied {
					assert.Equal(t, engine.Execute, c.Verdict)
					assert.Equal(t, []string{receiptcases.Approver}, o.Approvers, "the approver is the key's, not the file's")
				} else {
					assert.Equal(t, engine.ApprovalRequired, c.Verdict, "an approval that does not count leaves the call asking")
				}
			}
		})
	}
}

// TestApproverKeysBadInput: an approver key set that is not one is
// refused with exit 2.
func TestApproverKeysBadInput(t *testing.T) {
	dir := t.TempDir()
	eval := []string{"eval", "--registry", "../../examples/registry.yaml", "--history", "../../examples/histories/transfer.json"}
	for _, tc := range []struct{ name, keys, want string }{
		{"missing", dir + "/none.json", "none.json"},
		{"not a JWKS", writeFile(t, dir, "bad.json", `{"keys": 3}`), "--approver-keys"},
		{"a private key", writeFile(t, dir, "private.json", `{"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k", "alg": "EdDSA", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "d": "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}]}`), "must be a public key"},
		{"no kid", writeFile(t, dir, "nokid.json", `{"keys": [{"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`), "has no kid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, "", append(eval, "--approver-keys", tc.keys)...)
			require.Equal(t, 2, res.code, res.stdout+res.stderr)
			assert.Contains(t, res.stderr, tc.want)
		})
	}
}

// TestApprovalMaxTTLBadInput: --approval-max-ttl is checked at start, on
// eval and serve: not positive, beyond a day, or without --approver-keys
// is exit 2 with a message naming it.
func TestApprovalMaxTTLBadInput(t *testing.T) {
	dir := t.TempDir()
	keys := writeFile(t, dir, "approvers.json", string(receiptcases.ApproverJWKS()))
	eval := []string{"eval", "--registry", "../../examples/registry.yaml", "--history", "../../examples/histories/transfer.json"}
	serve := []string{"serve", "--addr", "127.0.0.1:0", "--registry", "../../examples/registry.yaml"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"zero", []string{"--approver-keys", keys, "--approval-max-ttl", "0s"}, "--approval-max-ttl must be positive"},
		{"negative", []string{"--approver-keys", keys, "--approval-max-ttl", "-1m"}, "--approval-max-ttl must be positive"},
		{"beyond a day", []string{"--approver-keys", keys, "--approval-max-ttl", "48h"}, "--approval-max-ttl 48h0m0s is longer than 24h0m0s"},
		{"without approver keys", []string{"--approval-max-ttl", "5m"}, "without --approver-keys"},
	} {
		for _, cmd := range [][]string{eval, serve} {
			t.Run(cmd[0]+"/"+tc.name, func(t *testing.T) {
				res := run(t, "", append(append([]string{}, cmd...), tc.args...)...)
				require.Equal(t, 2, res.code, res.stdout+res.stderr)
				assert.Contains(t, res.stderr, tc.want)
			})
		}
	}
}
