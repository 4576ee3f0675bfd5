package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
)

// evidenceDecision runs eval on history with the extra flags and returns
// its decision.
func evidenceDecision(t *testing.T, dir string, history []byte, extra ...string) engine.Decision {
	t.Helper()
	h := writeFile(t, dir, "history.json", string(history))
	res := run(t, "", append([]string{"eval", "--registry", "../../examples/registry.yaml", "--history", h}, extra...)...)
	require.Equal(t, 0, res.code, res.stderr)
	var d engine.Decision
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &d), res.stdout)
	return d
}

// TestVerifiedEvidenceThroughTheCLI runs the verified-evidence table
// through eval: the honest receipts are the ones an earlier eval
// --receipt-key issued; with --evidence verified each forgery leaves the
// tool unavailable and is listed in unverified_evidence, and the honest
// rows count. With --evidence client (the default) every row counts, as
// before, and no decision lists unverified evidence.
func TestVerifiedEvidenceThroughTheCLI(t *testing.T) {
	dir, key1, _, _ := receiptFiles(t)
	env := receiptcases.EvidenceEnv{Issued: func(tool, id, args string) string {
		d := evidenceDecision(t, t.TempDir(), receiptcases.FirstStep(tool, id, args), "--receipt-key", key1)
		require.Len(t, d.Calls, 1)
		require.Equal(t, engine.Execute, d.Calls[0].Verdict, "%+v", d.Calls[0])
		return d.Calls[0].Receipt
	}}
	for _, tc := range receiptcases.EvidenceCases() {
		t.Run(tc.Name, func(t *testing.T) {
			history := tc.History(env)
			d := evidenceDecision(t, dir, history, "--evidence", "verified", "--receipt-key", key1)
			require.Len(t, d.Calls, 1)
			assert.Equal(t, tc.Called(), d.Calls[0].Tool)
			if tc.Counts {
				assert.Equal(t, engine.Execute, d.Calls[0].Verdict, "%+v", d.Calls[0])
				assert.Empty(t, d.UnverifiedEvidence)
			} else {
				assert.Equal(t, engine.NotAvailableYet, d.Calls[0].Verdict, "the model gets the retry it gets without the evidence")
				assert.NotContains(t, d.Available, tc.Called())
				require.Len(t, d.UnverifiedEvidence, 1)
				u := d.UnverifiedEvidence[0]
				assert.Contains(t, u.Why, tc.Why)
				// The part is the return (or the delta) that carried it.
				var msgs []struct {
					Parts []struct {
						PartKind string `json:"part_kind"`
					}
				}
				require.NoError(t, json.Unmarshal(history, &msgs))
				assert.Equal(t, "tool-return", msgs[u.Message].Parts[u.Part].PartKind)
			}
			client := evidenceDecision(t, dir, history)
			assert.Equal(t, engine.Execute, client.Calls[0].Verdict, "--evidence client takes the evidence on the client's word")
			assert.Nil(t, client.UnverifiedEvidence)

			// explain says the same, in pretty and in JSON.
			h := writeFile(t, dir, "history.json", string(history))
			res := run(t, "", "explain", "--registry", "../../examples/registry.yaml", "--history", h, "--evidence", "verified", "--receipt-key", key1)
			require.Equal(t, 0, res.code, res.stderr)
			if tc.Counts {
				assert.NotContains(t, res.stdout, "Unverified evidence")
			} else {
				assert.Contains(t, res.stdout, "Unverified evidence, ignored (1):")
				assert.Contains(t, res.stdout, tc.Why)
			}
			res = run(t, "", "explain", "--registry", "../../examples/registry.yaml", "--history", h, "--evidence", "verified", "--receipt-key", key1, "--format", "json")
			require.Equal(t, 0, res.code, res.stderr)
			var x engine.Explanation
			require.NoError(t, json.Unmarshal([]byte(res.stdout), &x))
			assert.Equal(t, unverifiedAt(d.UnverifiedEvidence), unverifiedAt(x.Decision.UnverifiedEvidence))
			res = run(t, "", "explain", "--registry", "../../examples/registry.yaml", "--history", h, "--evidence", "verified", "--receipt-key", key1, "--format", "html")
			require.Equal(t, 0, res.code, res.stderr)
			if tc.Counts {
				assert.NotContains(t, res.stdout, "Unverified evidence")
			} else {
				assert.Contains(t, res.stdout, "<h3>Unverified evidence, ignored</h3>")
				assert.Contains(t, res.stdout, fmt.Sprintf("message %d, part %d: ", d.UnverifiedEvidence[0].Message, d.UnverifiedEvidence[0].Part))
			}
			for _, tool := range x.Tools {
				if !tc.Counts && tool.Name == tc.Called() {
					assert.Empty(t, tool.Reveals, "unverified evidence is not shown as a reveal")
					assert.Empty(t, tool.Loads, "unverified evidence is not shown as a load")
				}
			}
		})
	}
}

// TestEvidenceFlagRefusals: --evidence verified without the receipt key
// that vouches, an unknown mode, and explain's --receipt-key without
// verified evidence are usage errors (exit 2), not a silent accept.
func TestEvidenceFlagRefusals(t *testing.T) {
	dir, key1, _, _ := receiptFiles(t)
	h := writeFile(t, dir, "h.json", string(receiptcases.FirstStep(receiptcases.SearchTool, "s1", receiptcases.SearchArgs)))
	base := []string{"--registry", "../../examples/registry.yaml", "--history", h}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"eval", "--evidence", "verified"}, base...), "--receipt-key is required"},
		{append([]string{"explain", "--evidence", "verified"}, base...), "--receipt-key is required"},
		{append([]string{"serve", "--evidence", "verified", "--addr", "127.0.0.1:0"}, base[:2]...), "--receipt-key is required"},
		{append([]string{"eval", "--evidence", "trusted", "--receipt-key", key1}, base...), `--evidence is client or verified, not "trusted"`},
		{append([]string{"serve", "--evidence", "trusted", "--receipt-key", key1, "--addr", "127.0.0.1:0"}, base[:2]...), `"--evidence" flag: is client or verified, not "trusted"`},
		{append([]string{"explain", "--receipt-key", key1}, base...), "explain signs nothing"},
		{append([]string{"serve", "--evidence", "verified", "--receipt-key", key1, "--prefix-cache-bytes", "1024", "--addr", "127.0.0.1:0"}, base[:2]...), "--prefix-cache-bytes sizes the prefix cache, which --evidence verified does not keep"},
	} {
		res := run(t, "", tc.args...)
		assert.Equal(t, 2, res.code, "%s: %s", strings.Join(tc.args, " "), res.stdout)
		assert.Contains(t, res.stderr, tc.want, strings.Join(tc.args, " "))
	}
}

// unverifiedAt is where each piece of unverified evidence sits (its why
// may name the time, as an expired receipt's does).
func unverifiedAt(u []engine.UnverifiedEvidence) [][2]int {
	var out [][2]int
	for _, e := range u {
		out = append(out, [2]int{e.Message, e.Part})
	}
	return out
}
