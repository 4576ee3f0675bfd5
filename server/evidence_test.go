package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
	"github.com/policycheck/policycheck/trust"
)

// verifiedServer serves the examples' registry with the shipped policies,
// signing receipts with s and counting only verified evidence.
func verifiedServer(t *testing.T, s *trust.Signer) *running {
	t.Helper()
	reg, err := loader.ReadRegistry(filepath.Join("..", "examples", "registry.yaml"))
	require.NoError(t, err)
	return start(t, withRegistry(reg), withReceipts(s), withVerifiedEvidence())
}

// stepDecision posts body to path and returns the decision (a run's
// step decision has the same members).
func stepDecision(t *testing.T, rs *running, path, body string) engine.Decision {
	t.Helper()
	status, out := rs.post(t, path, []byte(body))
	require.Equal(t, http.StatusOK, status, string(out))
	var d engine.Decision
	require.NoError(t, json.Unmarshal(out, &d), string(out))
	return d
}

// checkEvidence asserts what a decision of a case's history says.
func checkEvidence(t *testing.T, d engine.Decision, called string, counts bool, why string) {
	t.Helper()
	require.Len(t, d.Calls, 1)
	assert.Equal(t, called, d.Calls[0].Tool)
	if counts {
		assert.Equal(t, engine.Execute, d.Calls[0].Verdict, "%+v", d.Calls[0])
		assert.Empty(t, d.UnverifiedEvidence)
		return
	}
	assert.Equal(t, engine.NotAvailableYet, d.Calls[0].Verdict, "%+v", d.Calls[0])
	assert.NotContains(t, d.Available, called)
	require.Len(t, d.UnverifiedEvidence, 1)
	assert.Contains(t, d.UnverifiedEvidence[0].Why, why)
}

// TestVerifiedEvidenceOverHTTP runs the verified-evidence table on
// /v1/decide and /v1/explain of a sidecar with --evidence verified: the
// honest receipts are the ones its own earlier decisions issued; each
// forgery leaves the tool unavailable and is listed.
func TestVerifiedEvidenceOverHTTP(t *testing.T) {
	rs := verifiedServer(t, testSigner(t, 1, time.Now))
	schema := loadOpenAPI(t).responseSchema(t, "/v1/decide", http.MethodPost, http.StatusOK)
	env := receiptcases.EvidenceEnv{Issued: func(tool, id, args string) string {
		return receiptOf(t, rs, "/v1/decide", fmt.Sprintf(`{"history": %s}`, receiptcases.FirstStep(tool, id, args)), id)
	}}
	for _, tc := range receiptcases.EvidenceCases() {
		t.Run(tc.Name, func(t *testing.T) {
			body := fmt.Sprintf(`{"history": %s}`, tc.History(env))
			d := stepDecision(t, rs, "/v1/decide", body)
			status, out := rs.post(t, "/v1/decide", []byte(body))
			require.Equal(t, http.StatusOK, status)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
			require.NoError(t, err)
			require.NoError(t, schema.Validate(doc), "docs/openapi.yaml describes the decision")
			checkEvidence(t, d, tc.Called(), tc.Counts, tc.Why)
			// Sent again, the same (the prefix cache does not skip the
			// check).
			again := stepDecision(t, rs, "/v1/decide", body)
			assert.Equal(t, unverifiedAt(d.UnverifiedEvidence), unverifiedAt(again.UnverifiedEvidence))
			assert.Equal(t, d.Calls[0].Verdict, again.Calls[0].Verdict)

			// /v1/facts reports the facts the decision was made on.
			status, out = rs.post(t, "/v1/facts", []byte(body))
			require.Equal(t, http.StatusOK, status, string(out))
			var f engine.FactsReport
			require.NoError(t, json.Unmarshal(out, &f))
			assert.Equal(t, d.Facts, f.Facts)

			status, out = rs.post(t, "/v1/explain", []byte(body))
			require.Equal(t, http.StatusOK, status, string(out))
			var x engine.Explanation
			require.NoError(t, json.Unmarshal(out, &x))
			assert.Equal(t, unverifiedAt(d.UnverifiedEvidence), unverifiedAt(x.Decision.UnverifiedEvidence))
			assert.Equal(t, d.Calls[0].Verdict, x.Decision.Calls[0].Verdict)
		})
	}
}

// TestVerifiedEvidenceKeepsNoPrefixes: with verified evidence no request
// resumes from the prefix cache, so none fills it either; the same
// requests to a server counting the client's evidence do.
func TestVerifiedEvidenceKeepsNoPrefixes(t *testing.T) {
	signer := testSigner(t, 1, time.Now)
	reg, err := loader.ReadRegistry(filepath.Join("..", "examples", "registry.yaml"))
	require.NoError(t, err)
	body := []byte(fmt.Sprintf(`{"history": %s}`, receiptcases.FirstStep("get_order", "c1", `{"order_id": "o-1"}`)))
	for _, tc := range []struct {
		name    string
		rs      *running
		entries float64
	}{
		{"verified", verifiedServer(t, signer), 0},
		{"client", start(t, withRegistry(reg), withReceipts(signer)), 1},
	} {
		for _, path := range []string{"/v1/decide", "/v1/decide", "/v1/facts", "/v1/explain", "/v1/decide"} {
			status, out := tc.rs.post(t, path, body)
			require.Equal(t, http.StatusOK, status, "%s %s: %s", tc.name, path, out)
		}
		assert.Equal(t, tc.entries, metricValue(t, tc.rs, "policycheck_prefix_cache_entries"), tc.name)
	}
}

// TestVerifiedEvidenceInRuns: on /v1/runs/{id}/decide a reveal or a load
// counts when this run judged its call execute (the harness sends no
// receipt), or, for a run started again at offset 0 with its whole
// history, when the return carries this run's receipt; not when the run
// never judged the call, nor with another run's receipt.
func TestVerifiedEvidenceInRuns(t *testing.T) {
	rs := verifiedServer(t, testSigner(t, 1, time.Now))
	for _, load := range []bool{false, true} {
		tool, args, called := receiptcases.SearchTool, receiptcases.SearchArgs, "search_docs"
		if load {
			tool, args, called = receiptcases.LoadTool, receiptcases.LoadArgs, "secret_op"
		}
		id := "s1"
		whole := func(rcpt any) []byte { return receiptcases.EvidenceHistory(load, id, args, id, rcpt) }
		var msgs []json.RawMessage
		require.NoError(t, json.Unmarshal(whole(nil), &msgs))
		require.Len(t, msgs, 4)
		t.Run(called+"/judged in the run", func(t *testing.T) {
			path := "/v1/runs/judged-" + called + "/decide"
			first := receiptOf(t, rs, path, fmt.Sprintf(`{"offset": 0, "messages": %s}`, receiptcases.FirstStep(tool, id, args)), id)
			require.NotEmpty(t, first)
			rest, err := json.Marshal(msgs[2:])
			require.NoError(t, err)
			d := stepDecision(t, rs, path, fmt.Sprintf(`{"offset": 2, "messages": %s}`, rest))
			checkEvidence(t, d, called, true, "")
		})
		t.Run(called+"/never judged", func(t *testing.T) {
			d := stepDecision(t, rs, "/v1/runs/never-"+called+"/decide", fmt.Sprintf(`{"offset": 0, "messages": %s}`, whole(nil)))
			checkEvidence(t, d, called, false, "this run never judged the")
		})
		t.Run(called+"/restarted with the run's receipt", func(t *testing.T) {
			path := "/v1/runs/restart-" + called + "/decide"
			r := receiptOf(t, rs, path, fmt.Sprintf(`{"offset": 0, "messages": %s}`, receiptcases.FirstStep(tool, id, args)), id)
			d := stepDecision(t, rs, path, fmt.Sprintf(`{"offset": 0, "messages": %s}`, whole(r)))
			checkEvidence(t, d, called, true, "")
			// The same receipt in another run is not this run's.
			d = stepDecision(t, rs, "/v1/runs/other-"+called+"/decide", fmt.Sprintf(`{"offset": 0, "messages": %s}`, whole(r)))
			checkEvidence(t, d, called, false, "issued for run")
			// Nor on a stateless request.
			d = stepDecision(t, rs, "/v1/decide", fmt.Sprintf(`{"history": %s}`, whole(r)))
			checkEvidence(t, d, called, false, "issued for run")
		})
	}
}

// TestVerifiedEvidenceAcrossRotation: a receipt of the key the server
// replaced still counts while the server lists that key (until the
// receipts it signed have expired); one of a key it never had does not.
func TestVerifiedEvidenceAcrossRotation(t *testing.T) {
	signer := testSigner(t, 1, time.Now)
	rs := verifiedServer(t, signer)
	old := receiptOf(t, rs, "/v1/decide", fmt.Sprintf(`{"history": %s}`,
		receiptcases.FirstStep(receiptcases.SearchTool, "s1", receiptcases.SearchArgs)), "s1")
	require.NoError(t, signer.Rotate(receiptcases.Key(3)))
	h := receiptcases.EvidenceHistory(false, "s1", receiptcases.SearchArgs, "s1", old)
	checkEvidence(t, stepDecision(t, rs, "/v1/decide", fmt.Sprintf(`{"history": %s}`, h)), "search_docs", true, "")
	h = receiptcases.EvidenceHistory(false, "s1", receiptcases.SearchArgs, "s1",
		receiptcases.Forge(2, 0, "", receiptcases.SearchTool, "s1", receiptcases.SearchArgs))
	checkEvidence(t, stepDecision(t, rs, "/v1/decide", fmt.Sprintf(`{"history": %s}`, h)), "search_docs", false, "not in the key set")
}

// TestVerifiedEvidenceNeedsReceipts: the server refuses verified evidence
// without a receipt signer, rather than accept or refuse every reveal:
// Validate names the field, and New refuses what Validate refuses.
func TestVerifiedEvidenceNeedsReceipts(t *testing.T) {
	var fe *server.FieldError
	require.ErrorAs(t, testConfig(withVerifiedEvidence()).Validate(), &fe)
	assert.Equal(t, "VerifiedEvidence", fe.Field)
	_, err := newServer(withVerifiedEvidence())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "it needs Receipts")
	require.NoError(t, testConfig(withVerifiedEvidence(), withReceipts(testSigner(t, 1, time.Now))).Validate())
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
