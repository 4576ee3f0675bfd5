package server_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

var updateReceiptLog = flag.Bool("update-receipt-log", false,
	"TestRecordReceiptLogExample records examples/trust/receipt-log.jsonl and receipt-log-moved.jsonl again with a real serve")

// The example decision logs docs/replay.md replays, and what recorded
// them, named from the module root as the doc names them.
const (
	exampleReceiptLog      = "examples/trust/receipt-log.jsonl"
	exampleReceiptLogMoved = "examples/trust/receipt-log-moved.jsonl"
	exampleReceiptRun      = "refund-1"
)

// TestRecordReceiptLogExample checks that the example decision logs
// docs/replay.md replays still replay as the doc says under the current
// example policies: examples/trust/receipt-log.jsonl clean (every
// recorded receipt valid, no decision failed closed on either side, no
// change), and examples/trust/receipt-log-moved.jsonl with exactly one
// finding, the receipt of c1 (get_order) copied onto c3 (search_docs).
// A log recorded before an example policy started reading an input the
// logged documents lack (input.call.flows) fails closed under it, and
// this test with it.
//
// With -update-receipt-log it records them again first:
//
//	go test ./server -run TestRecordReceiptLogExample -args -update-receipt-log
//
// A real `policycheck serve --registry examples/registry.yaml --policy
// examples/policies --receipt-key examples/trust/receipt-key.pem`, with
// OPA's console decision logger, run from the module root, is sent the
// refund example (examples/histories/refund.json) one message a request
// as run refund-1 of a support user (examples/context/support.json). Its
// decision log events, without the logger's own level, msg and time, are
// receipt-log.jsonl; the run's last decision with the receipt of c1
// copied onto c3 is receipt-log-moved.jsonl.
func TestRecordReceiptLogExample(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	if *updateReceiptLog {
		recordReceiptLogExample(t, root)
	}
	t.Chdir(root)
	args := []string{"--registry", "examples/registry.yaml", "--baseline", "examples/policies", "--candidate", "examples/policies"}
	receipts := 0
	raw, err := os.ReadFile(exampleReceiptLog)
	require.NoError(t, err)
	for l := range strings.Lines(string(raw)) {
		var ev struct {
			Custom struct{ Receipts []any }
		}
		require.NoError(t, json.Unmarshal([]byte(l), &ev))
		receipts += len(ev.Custom.Receipts)
	}
	require.Positive(t, receipts, "%s records no receipt", exampleReceiptLog)

	t.Run("clean", func(t *testing.T) {
		code, rep, stderr := replayExit(t, exampleReceiptLog, args...)
		require.Equal(t, 0, code, stderr)
		assertReplaysAsDecided(t, rep)
		audit := asMap(t, rep["audit"])
		assert.Equal(t, map[string]any{"checked": float64(receipts), "valid": float64(receipts)}, audit["receipts"])
		assert.Equal(t, []any{}, audit["findings"])
	})
	t.Run("moved", func(t *testing.T) {
		code, rep, stderr := replayExit(t, exampleReceiptLogMoved, args...)
		require.Equal(t, 1, code, stderr)
		assertReplaysAsDecided(t, rep)
		findings := asMap(t, rep["audit"])["findings"].([]any)
		require.Len(t, findings, 1)
		f := asMap(t, findings[0])
		assert.Equal(t, exampleReceiptRun, f["run"])
		assert.Equal(t, "c3", f["tool_call_id"])
		assert.Equal(t, "search_docs", f["tool"])
		assert.Equal(t, `receipt rejected: issued for tool_call_id "c1", the call's is "c3"`, f["reason"])
	})
}

// assertReplaysAsDecided fails unless a replay report of one policy
// against itself decided every call as logged, with no decision failed
// closed on either side.
func assertReplaysAsDecided(t *testing.T, rep map[string]any) {
	t.Helper()
	require.NotNil(t, rep, "no JSON report")
	assert.Equal(t, map[string]any{"baseline": 0.0, "candidate": 0.0}, rep["fail_closed"],
		"decisions fail closed under the current example policies: record the example logs again (go test ./server -run TestRecordReceiptLogExample -args -update-receipt-log)")
	assert.Equal(t, []any{}, rep["changes"])
	assert.Positive(t, rep["calls"])
}

// recordReceiptLogExample records the example decision logs again (see
// TestRecordReceiptLogExample) and writes them under root.
func recordReceiptLogExample(t *testing.T, root string) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "opa-config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("decision_logs:\n  console: true\n"), 0o600))
	p := servetest.StartIn(t, root, servetest.Build(t), "--registry", "examples/registry.yaml", "--policy", "examples/policies",
		"--receipt-key", "examples/trust/receipt-key.pem", "--config", cfg, "--log-format", "json")

	raw, err := os.ReadFile(filepath.Join(root, "examples", "histories", "refund.json"))
	require.NoError(t, err)
	msgs := splitHistory(t, raw)
	ctxDoc, err := os.ReadFile(filepath.Join(root, "examples", "context", "support.json"))
	require.NoError(t, err)
	decideSteps(t, p, exampleReceiptRun, msgs, ctxDoc)
	p.Stop()

	var log bytes.Buffer
	enc := json.NewEncoder(&log)
	enc.SetEscapeHTML(false)
	var last map[string]any
	for l := range strings.Lines(p.Logged()) {
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber()
		var ev map[string]any
		if dec.Decode(&ev) != nil || ev["msg"] != "Decision Log" {
			continue
		}
		delete(ev, "level")
		delete(ev, "msg")
		delete(ev, "time")
		require.NoError(t, enc.Encode(ev))
		last = ev
	}
	require.Equal(t, len(msgs), bytes.Count(log.Bytes(), []byte("\n")), "one decision logged a request:\n%s", p.Logged())
	require.NoError(t, os.WriteFile(filepath.Join(root, exampleReceiptLog), log.Bytes(), 0o644))

	// The last decision, the receipt of c1 copied onto c3.
	calls := asMap(t, last["result"])["calls"].([]any)
	byID := map[string]map[string]any{}
	for _, c := range calls {
		c := asMap(t, c)
		byID[c["tool_call_id"].(string)] = c
	}
	c1, c3 := byID["c1"], byID["c3"]
	require.NotNil(t, c1, "the last decision judged c1")
	require.NotNil(t, c3, "the last decision judged c3")
	require.Equal(t, []any{"get_order", "search_docs"}, []any{c1["tool"], c3["tool"]})
	require.NotEmpty(t, c1["receipt"], "c1 executes with a receipt")
	require.NotEmpty(t, c3["receipt"], "c3 executes with a receipt")
	c3["receipt"] = c1["receipt"]
	var moved bytes.Buffer
	enc = json.NewEncoder(&moved)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(last))
	require.NoError(t, os.WriteFile(filepath.Join(root, exampleReceiptLogMoved), moved.Bytes(), 0o644))
	t.Logf("recorded %s and %s", exampleReceiptLog, exampleReceiptLogMoved)
}
