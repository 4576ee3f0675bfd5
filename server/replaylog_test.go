package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/loader"
)

// uploadCollector is a decision-log service on 127.0.0.1 that writes every
// upload it receives, as received (gzip JSON arrays), to a file of its
// own: what a collector archiving the sidecar's logs keeps.
type uploadCollector struct {
	*httptest.Server
	dir    string
	mu     sync.Mutex
	files  int
	events int
}

// opaConfig is the OPA configuration that uploads the decision logs to
// the collector (service "collector"), reported by hand.
func (c *uploadCollector) opaConfig() []byte {
	return []byte("services:\n  collector:\n    url: " + c.URL + "\ndecision_logs:\n  service: collector\n  reporting:\n    trigger: manual\n")
}

func newUploadCollector(t *testing.T) *uploadCollector {
	c := &uploadCollector{dir: t.TempDir()}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Header.Get("Content-Encoding") != "gzip" {
			http.Error(w, "want a gzip upload", http.StatusBadRequest)
			return
		}
		var events []json.RawMessage
		if err := json.NewDecoder(gunzip(t, body)).Decode(&events); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.files++
		c.events += len(events)
		if err := os.WriteFile(filepath.Join(c.dir, fmt.Sprintf("upload-%03d.json.gz", c.files)), body, 0o644); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}))
	t.Cleanup(c.Close)
	return c
}

func gunzip(t *testing.T, b []byte) io.Reader {
	zr, err := gzipReader(b)
	if err != nil {
		t.Error(err)
		return bytes.NewReader(nil)
	}
	return zr
}

// TestReplayOfDecisionLogsEqualsReplayOfHistories is issue 13's second
// "done means": an agent sends its runs step by step to the sidecar,
// whose decision logs a real collector receives; replaying those logs
// gives the same report as replaying the histories behind them.
func TestReplayOfDecisionLogsEqualsReplayOfHistories(t *testing.T) {
	ctx := context.Background()
	root := conformance.ModuleRoot()
	examples := filepath.Join(root, "examples")
	regPath := filepath.Join(examples, "registry.yaml")
	reg, err := loader.ReadRegistry(regPath)
	require.NoError(t, err)
	policies := filepath.Join(examples, "policies")
	col := newUploadCollector(t)
	cfg := col.opaConfig()
	rs := start(t, withRegistry(reg), withEngine(engine.PolicyPaths(policies)), withOPAConfig(cfg, "replay-test"),
		withMaskContext("/ticket"))

	// The context the agent sends; the ticket is masked out of the logs
	// (no policy reads it).
	ctxDoc := `{"group": "support", "ticket": "T-123"}`
	ctxFile := filepath.Join(t.TempDir(), "context.json")
	require.NoError(t, os.WriteFile(ctxFile, []byte(ctxDoc), 0o644))

	histDir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(examples, "histories", "*.json"))
	steps := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(histDir, filepath.Base(f)), raw, 0o644))
		var msgs []json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &msgs))
		run := filepath.Base(f)
		for i, m := range msgs {
			body := fmt.Sprintf(`{"offset": %d, "messages": [%s], "context": %s}`, i, m, ctxDoc)
			status, out := rs.post(t, "/v1/runs/"+run+"/decide", []byte(body))
			require.Equal(t, http.StatusOK, status, string(out))
			steps++
		}
	}
	require.NoError(t, logs.Lookup(rs.srv.Manager()).Trigger(ctx))
	col.mu.Lock()
	require.Equal(t, steps, col.events, "the collector holds every decision")
	col.mu.Unlock()

	rule := filepath.Join(t.TempDir(), "candidate.rego")
	require.NoError(t, os.WriteFile(rule, []byte(`package policycheck.rules.candidate

deny contains {"reason": "refund above 40", "message": "Refunds above 40 need a supervisor."} if {
	input.call.tool == "issue_refund"
	input.call.args.amount > 40
}

hide contains "search_docs"
`), 0o644))
	replayJSON := func(input string, extra ...string) map[string]any {
		return replayReport(t, input, append([]string{"--registry", regPath, "--baseline", policies, "--candidate", policies, "--candidate", rule}, extra...)...)
	}
	fromHistories := replayJSON(histDir, "--context", ctxFile)
	fromLogs := replayJSON(col.dir)

	// The history runs are named by file, the logged ones by run id.
	for _, c := range fromHistories["changes"].([]any) {
		c := c.(map[string]any)
		c["run"] = filepath.Base(c["run"].(string))
	}
	require.NotEmpty(t, fromHistories["changes"])
	kinds := map[string]bool{}
	for _, c := range fromHistories["changes"].([]any) {
		kinds[c.(map[string]any)["kind"].(string)] = true
	}
	require.True(t, kinds["call"] && kinds["advertised"] && kinds["available"], "the corpus exercises calls and advertisement: %v", kinds)
	h, _ := json.MarshalIndent(fromHistories, "", " ")
	l, _ := json.MarshalIndent(fromLogs, "", " ")
	require.Equal(t, string(h), string(l))
	require.EqualValues(t, steps, fromLogs["decisions"])
	col.mu.Lock()
	t.Logf("%d logged decisions in %d uploads, %d changes", steps, col.files, len(fromLogs["changes"].([]any)))
	col.mu.Unlock()
}

// replayReport runs `policycheck replay --format json` with args on
// input and returns its report.
func replayReport(t *testing.T, input string, args ...string) map[string]any {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(append(append([]string{"replay", "--format", "json"}, args...), input), strings.NewReader(""), &out, &errb)
	require.Equal(t, 0, code, errb.String())
	var rep map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	return rep
}

// TestReplayOfDecisionLogsKeepsBoundApprovals: an agent sends the
// transfer run step by step to a sidecar serving the transfers example,
// each request carrying the approval of examples/approvals (t2, approved
// by ana with override_args), and t2 executes on it. Replaying the
// decision logs a real collector received gives the report replaying the
// history with --approvals of that file gives: the logged decision is
// decided again with the approval that was bound to its call, so its
// baseline (the served policy) is the live decision, and a candidate that
// wants two approvers turns t2 execute -> approval_required saying why
// the bound approval no longer suffices.
func TestReplayOfDecisionLogsKeepsBoundApprovals(t *testing.T) {
	examples := filepath.Join(conformance.ModuleRoot(), "examples")
	regPath := filepath.Join(examples, "registry.yaml")
	reg, err := loader.ReadRegistry(regPath)
	require.NoError(t, err)
	transfers := filepath.Join(examples, "policies", "transfers")
	approvalsPath := filepath.Join(examples, "approvals", "transfer.json")
	var file struct {
		Approvals json.RawMessage `json:"approvals"`
	}
	raw, err := os.ReadFile(approvalsPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &file))
	col := newUploadCollector(t)
	cfg := col.opaConfig()
	rs := start(t, withRegistry(reg), withEngine(engine.PolicyPaths(transfers)), withOPAConfig(cfg, "replay-approvals-test"))

	histDir := t.TempDir()
	hist, err := os.ReadFile(filepath.Join(examples, "histories", "transfer.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(histDir, "transfer.json"), hist, 0o644))
	var msgs []json.RawMessage
	require.NoError(t, json.Unmarshal(hist, &msgs))
	var live struct {
		Calls []struct {
			ToolCallID string `json:"tool_call_id"`
			Verdict    string `json:"verdict"`
			Approval   *struct {
				Applied bool `json:"applied"`
			} `json:"approval"`
		} `json:"calls"`
	}
	for i, m := range msgs {
		body := fmt.Sprintf(`{"offset": %d, "messages": [%s], "approvals": %s}`, i, m, file.Approvals)
		status, out := rs.post(t, "/v1/runs/transfer.json/decide", []byte(body))
		require.Equal(t, http.StatusOK, status, string(out))
		require.NoError(t, json.Unmarshal(out, &live))
	}
	// Live, t1 is under the limit and t2 executes on ana's approval.
	require.Len(t, live.Calls, 2)
	assert.Equal(t, "execute", live.Calls[0].Verdict)
	assert.Equal(t, "t2", live.Calls[1].ToolCallID)
	assert.Equal(t, "execute", live.Calls[1].Verdict)
	require.NotNil(t, live.Calls[1].Approval)
	assert.True(t, live.Calls[1].Approval.Applied)
	require.NoError(t, logs.Lookup(rs.srv.Manager()).Trigger(t.Context()))
	col.mu.Lock()
	require.Equal(t, len(msgs), col.events, "the collector holds every decision")
	col.mu.Unlock()

	rule := filepath.Join(t.TempDir(), "two_approvers.rego")
	require.NoError(t, os.WriteFile(rule, []byte(`package policycheck.rules.two_approvers

require_approval contains {"reason": "transfers above 1000 need two approvers"} if {
	input.call.tool == "transfer_funds"
	input.call.args.amount > 1000
	count({a | some a in object.get(input.call, ["approval", "approvers"], [])}) < 2
}
`), 0o644))
	args := []string{"--registry", regPath, "--baseline", transfers, "--candidate", transfers, "--candidate", rule}
	fromHistories := replayReport(t, histDir, append(args, "--approvals", approvalsPath)...)
	fromLogs := replayReport(t, col.dir, args...)
	for _, c := range fromHistories["changes"].([]any) {
		c := c.(map[string]any)
		c["run"] = filepath.Base(c["run"].(string))
	}
	// The baseline is the served policy: its verdicts are the live ones.
	assert.Equal(t, map[string]any{"execute->execute": 1.0, "execute->approval_required": 1.0}, fromLogs["transitions"])
	changes := fromLogs["changes"].([]any)
	require.Len(t, changes, 1)
	c := changes[0].(map[string]any)
	assert.Equal(t, "t2", c["tool_call_id"])
	assert.Contains(t, fmt.Sprint(c["candidate"]), "not applied: require_approval rules still ask for approval with this approval present")
	assert.Contains(t, fmt.Sprint(c["baseline"]), "applied: approved by ana; the call executes with the approver's override_args")
	h, _ := json.MarshalIndent(fromHistories, "", " ")
	l, _ := json.MarshalIndent(fromLogs, "", " ")
	require.Equal(t, string(h), string(l))
}

func gzipReader(b []byte) (io.Reader, error) { return gzip.NewReader(bytes.NewReader(b)) }
