package docs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// TestTrustLoadReceiptIsNotBoundToItsContext is what docs/trust.md says
// of --evidence verified (issue 43, item 12): a receipt vouches for the
// call, its tool and arguments, not for the context it was judged under.
// A vault load judged execute for an admin, and refused for a support
// agent, still counts as verified evidence in a support agent's
// request, whose next call to a vault tool then executes.
func TestTrustLoadReceiptIsNotBoundToItsContext(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v any) string {
		t.Helper()
		b, err := json.Marshal(v)
		require.NoError(t, err)
		file := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(file, b, 0o600))
		return file
	}
	policy := filepath.Join(dir, "loadgate.rego")
	require.NoError(t, os.WriteFile(policy, []byte(`package policycheck.rules.loadgate

deny contains {"reason": "only admins load the vault", "message": "Only administrators may load the vault."} if {
	input.call.tool == "load_capability"
	input.call.args.id == "vault"
	input.context.group != "admin"
}
`), 0o600))
	var history []map[string]any
	raw, err := os.ReadFile("../examples/trust/fabricated-load.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &history))
	require.Len(t, history, 4)
	loadCall := write("load.json", history[:2])

	decide := func(historyFile, ctx string, extra ...string) map[string]map[string]any {
		t.Helper()
		args := append([]string{"eval", "--registry", "../examples/registry.yaml", "--history", historyFile,
			"--policy", policy, "--context", ctx, "--receipt-key", "../examples/trust/receipt-key.pem"}, extra...)
		stdout, stderr, code := run(t, args...)
		require.Equal(t, cli.ExitOK, code, stderr)
		var d struct {
			Calls              []map[string]any `json:"calls"`
			UnverifiedEvidence []any            `json:"unverified_evidence"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &d), stdout)
		require.Empty(t, d.UnverifiedEvidence, stdout)
		out := map[string]map[string]any{}
		for _, c := range d.Calls {
			out[c["tool_call_id"].(string)] = c
		}
		return out
	}
	require.Equal(t, "denied", decide(loadCall, `{"group":"support"}`)["l1"]["verdict"], "the rules refuse the load for support")
	admin := decide(loadCall, `{"group":"admin"}`)["l1"]
	require.Equal(t, "execute", admin["verdict"])
	receipt, _ := admin["receipt"].(string)
	require.NotEmpty(t, receipt)

	// The admin's receipt in the load's return, in a support agent's
	// request: the load counts, and the vault's tool executes.
	ret := history[2]["parts"].([]any)[0].(map[string]any)
	ret["metadata"] = map[string]any{"policycheck_receipt": receipt}
	withReceipt := write("with-receipt.json", history)
	got := decide(withReceipt, `{"group":"support"}`, "--evidence", "verified")
	require.Equal(t, "execute", got["c1"]["verdict"], "a receipt minted under the admin's context counts under support's")
}
