package server_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
	"github.com/policycheck/policycheck/internal/testkit/servetest"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/trust"
)

// collectorEvents returns every event the collector received, decoded
// with numbers kept as written, in the order uploaded.
func collectorEvents(t *testing.T, col *uploadCollector) []map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(col.dir, "*.json.gz"))
	require.NoError(t, err)
	sort.Strings(files)
	var out []map[string]any
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := json.NewDecoder(gunzip(t, raw))
		dec.UseNumber()
		var events []map[string]any
		require.NoError(t, dec.Decode(&events))
		out = append(out, events...)
	}
	return out
}

// writeEvents writes events as one gzip upload, as the collector keeps
// them, to a new directory, and returns it.
func writeEvents(t *testing.T, events []map[string]any) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	require.NoError(t, json.NewEncoder(zw).Encode(events))
	require.NoError(t, zw.Close())
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "upload.json.gz"), buf.Bytes(), 0o644))
	return dir
}

// replayExit runs `policycheck replay --format json` and returns its exit
// status, report (nil unless it is JSON) and stderr.
func replayExit(t *testing.T, input string, args ...string) (int, map[string]any, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(append(append([]string{"replay", "--format", "json"}, args...), input), strings.NewReader(""), &out, &errb)
	var rep map[string]any
	if json.Unmarshal(out.Bytes(), &rep) != nil {
		rep = nil
	}
	return code, rep, errb.String()
}

// transferApproval is examples/approvals/transfer.json's approval of t2
// with the signature sign makes of the honest payload for run ("" for
// none), as a request's approvals member.
func transferApproval(t *testing.T, run string, sign func(trust.ApprovalPayload) string) json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "examples", "approvals", "transfer.json"))
	require.NoError(t, err)
	var file struct {
		Approvals map[string]map[string]json.RawMessage
	}
	require.NoError(t, json.Unmarshal(raw, &file))
	a := file.Approvals["t2"]
	var p trust.ApprovalPayload
	require.NoError(t, json.Unmarshal(a["digest"], &p.Digest))
	require.NoError(t, json.Unmarshal(a["kind"], &p.Kind))
	p.OverrideArgs = a["override_args"]
	if sig := sign(receiptcases.Honest(p, run)); sig != "" {
		a["signature"], _ = json.Marshal(sig)
	}
	out, err := json.Marshal(map[string]any{"t2": a})
	require.NoError(t, err)
	return out
}

func asMap(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "want an object, got %T %v", v, v)
	return m
}

// TestDecisionLogRecordsReceiptsAndApprovalOutcomes: a sidecar with a
// receipt key and approver keys logs, in each event's custom, the id
// (jti) and kid of every receipt the decision handed out, the JWKS
// GET /v1/keys served, and the outcome of every approval's signature
// check — verified, or the code of why not, with the kid and the
// signature — for the whole table of signed approvals. Replaying the log
// verifies every receipt against the keys it records; with
// --approver-keys the one applied approval is judged again and verifies,
// without them it is counted as not judged again. An approval whose
// recorded signature is removed from the log is refused by replay
// --approver-keys (a finding, exit 1), and decided as not applied.
func TestDecisionLogRecordsReceiptsAndApprovalOutcomes(t *testing.T) {
	signer, err := trust.NewSigner(receiptcases.Key(1))
	require.NoError(t, err)
	keys, err := trust.ParseKeys(receiptcases.ApproverJWKS())
	require.NoError(t, err)
	v, err := trust.NewApprovalVerifier(keys)
	require.NoError(t, err)
	policies := filepath.Join("..", "examples", "policies")
	rs, col, regPath := startLogged(t, policies, "receipt-log-test", withReceipts(signer), withApproverKeys(v))
	keysJSON, _ := getKeys(t, rs)
	transfer, err := os.ReadFile(filepath.Join("..", "examples", "histories", "transfer.json"))
	require.NoError(t, err)

	cases := receiptcases.ApprovalCases()
	sent := map[string]string{}     // run -> the signature sent
	receipts := map[string]string{} // jti -> the receipt the response carried
	for i, tc := range cases {
		run := fmt.Sprintf("case-%d", i)
		approvals := transferApproval(t, run, tc.Sign)
		var a map[string]map[string]any
		require.NoError(t, json.Unmarshal(approvals, &a))
		sent[run], _ = a["t2"]["signature"].(string)
		status, out := rs.post(t, "/v1/runs/"+run+"/decide", []byte(fmt.Sprintf(`{"offset": 0, "messages": %s, "approvals": %s, "context": %s}`,
			transfer, approvals, adminContext(t))))
		require.Equal(t, http.StatusOK, status, string(out))
		d := decisionOf(t, "/v1/runs/"+run+"/decide", out)
		for _, c := range d.Calls {
			if c.Receipt != "" {
				_, cl, err := trust.Peek(c.Receipt)
				require.NoError(t, err)
				require.NotEmpty(t, cl.ID, "every receipt has an id")
				require.NotContains(t, receipts, cl.ID, "receipt ids are unique")
				receipts[cl.ID] = c.Receipt
			}
		}
	}
	require.NoError(t, logs.Lookup(rs.srv.Manager()).Trigger(t.Context()))
	events := collectorEvents(t, col)
	require.Len(t, events, len(cases))
	var wantKeys any
	require.NoError(t, json.Unmarshal(keysJSON, &wantKeys))
	logged := 0
	for _, ev := range events {
		in, custom, result := asMap(t, ev["input"]), asMap(t, ev["custom"]), asMap(t, ev["result"])
		run := in["run"].(string)
		var i int
		_, err := fmt.Sscanf(run, "case-%d", &i)
		require.NoError(t, err)
		tc := cases[i]
		t.Run(tc.Name, func(t *testing.T) {
			// The approval's outcome.
			outcomes, ok := custom["approvals"].([]any)
			require.True(t, ok, "custom.approvals: %v", custom)
			require.Len(t, outcomes, 1)
			o := asMap(t, outcomes[0])
			assert.Equal(t, "t2", o["tool_call_id"])
			assert.Equal(t, tc.Result, o["result"])
			assert.Equal(t, sent[run], orEmpty(o["signature"]), "the signature is recorded as sent")
			if tc.Result == trust.Verified {
				assert.Equal(t, "ana-key", o["kid"])
				assert.Equal(t, receiptcases.Approver, o["approver"])
				assert.NotContains(t, o, "reason")
			} else {
				assert.Contains(t, o["reason"], strings.TrimPrefix(tc.Want, "not applied: "))
				assert.NotContains(t, o, "approver")
			}
			// The receipts: one per execute, by call, with the kid.
			calls := result["calls"].([]any)
			listed, _ := custom["receipts"].([]any)
			var want []any
			for ci, c := range calls {
				c := asMap(t, c)
				r, ok := c["receipt"].(string)
				if !ok {
					continue
				}
				kid, cl, err := trust.Peek(r)
				require.NoError(t, err)
				assert.Equal(t, receipts[cl.ID], r, "the logged receipt is the one answered")
				assert.Equal(t, signer.KeyID(), kid)
				want = append(want, map[string]any{"call": json.Number(fmt.Sprint(ci)), "jti": cl.ID, "kid": kid})
				logged++
			}
			require.NotEmpty(t, want, "t1 executes in every case")
			assert.Equal(t, want, listed)
			assert.Equal(t, wantKeys, normalize(t, custom["receipt_keys"]), "the JWKS /v1/keys served")
		})
	}
	assert.Len(t, receipts, logged, "every receipt answered is in the log")

	args := []string{"--registry", regPath, "--baseline", policies, "--candidate", policies}
	approverKeys := filepath.Join(t.TempDir(), "approver-keys.json")
	require.NoError(t, os.WriteFile(approverKeys, receiptcases.ApproverJWKS(), 0o644))

	code, rep, stderr := replayExit(t, col.dir, args...)
	require.Equal(t, 0, code, stderr)
	audit := asMap(t, rep["audit"])
	assert.Equal(t, map[string]any{"checked": float64(logged), "valid": float64(logged)}, audit["receipts"])
	assert.Equal(t, map[string]any{"recorded": float64(len(cases)), "recorded_refused": float64(len(cases) - 1), "checked": 0.0, "verified": 0.0,
		"not_checked": 1.0}, audit["approvals"])
	assert.Equal(t, []any{}, audit["findings"])

	code, rep, stderr = replayExit(t, col.dir, append(args, "--approver-keys", approverKeys)...)
	require.Equal(t, 0, code, stderr)
	audit = asMap(t, rep["audit"])
	assert.Equal(t, map[string]any{"recorded": float64(len(cases)), "recorded_refused": float64(len(cases) - 1), "checked": 1.0, "verified": 1.0,
		"not_checked": 0.0}, audit["approvals"])
	assert.Equal(t, 1.0, asMap(t, rep["transitions"])["execute->execute"].(float64)-float64(len(cases)), "t2 executes on the verified approval")

	// The applied approval's signature taken out of the log.
	var edited []map[string]any
	for _, ev := range events {
		o := asMap(t, asMap(t, ev["custom"])["approvals"].([]any)[0])
		if o["result"] != trust.Verified {
			continue
		}
		delete(o, "signature")
		edited = append(edited, ev)
	}
	require.Len(t, edited, 1)
	code, rep, stderr = replayExit(t, writeEvents(t, edited), append(args, "--approver-keys", approverKeys)...)
	require.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "1 recorded receipt(s) or approval signature(s) did not verify")
	findings := asMap(t, rep["audit"])["findings"].([]any)
	require.Len(t, findings, 1)
	f := asMap(t, findings[0])
	assert.Equal(t, "approval", f["kind"])
	assert.Equal(t, "t2", f["tool_call_id"])
	assert.Equal(t, "transfer_funds", f["tool"])
	assert.Contains(t, f["reason"], "--approver-keys refuses it: unsigned")
	assert.Equal(t, map[string]any{"execute->execute": 1.0, "approval_required->approval_required": 1.0}, rep["transitions"],
		"the refused approval is decided as not applied on both sides")
}

func orEmpty(v any) string {
	s, _ := v.(string)
	return s
}

// normalize re-reads v as JSON decoded without UseNumber.
func normalize(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// startLogged starts a server on the shipped registry
// (examples/registry.yaml, whose path it returns for replay) and the
// policies, with opts, uploading its decision logs (OPA instance name) to
// a collector of its own, reported by hand.
func startLogged(t *testing.T, policies, name string, opts ...option) (*running, *uploadCollector, string) {
	t.Helper()
	regPath := filepath.Join("..", "examples", "registry.yaml")
	reg, err := loader.ReadRegistry(regPath)
	require.NoError(t, err)
	col := newUploadCollector(t)
	all := append([]option{withRegistry(reg), withEngine(engine.PolicyPaths(policies))}, opts...)
	return start(t, append(all, withOPAConfig(col.opaConfig(), name))...), col, regPath
}

// TestDecisionLogUnchangedWithoutKeys: without a receipt key and approver
// keys a decision-log event records nothing of receipts or signatures —
// custom holds what it held before they existed, even when an approval
// carries a signature (read, not checked) — and the replay report of
// such a log has no audit.
func TestDecisionLogUnchangedWithoutKeys(t *testing.T) {
	policies := filepath.Join("..", "examples", "policies")
	rs, col, regPath := startLogged(t, policies, "no-keys-log-test")
	transfer, err := os.ReadFile(filepath.Join("..", "examples", "histories", "transfer.json"))
	require.NoError(t, err)
	approvals := transferApproval(t, "", receiptcases.ApprovalCases()[0].Sign)
	require.Contains(t, string(approvals), `"signature"`)
	var answered []json.RawMessage
	for _, body := range []string{
		fmt.Sprintf(`{"history": %s, "approvals": %s, "context": %s}`, transfer, approvals, adminContext(t)),
		fmt.Sprintf(`{"history": %s, "context": %s}`, transfer, adminContext(t)),
	} {
		status, out := rs.post(t, "/v1/decide", []byte(body))
		require.Equal(t, http.StatusOK, status, string(out))
		answered = append(answered, out)
	}
	require.NoError(t, logs.Lookup(rs.srv.Manager()).Trigger(t.Context()))
	events := collectorEvents(t, col)
	require.Len(t, events, 2)
	for i, ev := range events {
		keys := slices.Sorted(mapsKeys(ev))
		assert.Equal(t, []string{"custom", "decision_id", "input", "labels", "path", "requested_by", "result", "revision", "timestamp"},
			withoutOptional(keys), "the event's members")
		assert.Equal(t, []string{"fingerprint", "policy_revision", "registry_revision"}, slices.Sorted(mapsKeys(asMap(t, ev["custom"]))))
		result, err := json.Marshal(ev["result"])
		require.NoError(t, err)
		assert.JSONEq(t, string(answered[i]), string(result), "the result is the decision answered")
		raw, err := json.Marshal(ev)
		require.NoError(t, err)
		for _, s := range []string{`"receipt`, `"jti"`, `"signature"`, `"verification"`} {
			assert.NotContains(t, string(raw), s)
		}
	}
	code, rep, stderr := replayExit(t, col.dir, "--registry", regPath, "--baseline", policies, "--candidate", policies)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, rep, "audit")
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// withoutOptional drops the members OPA writes only sometimes (a mask
// policy's, the request's id and metrics where configured, the bundles
// where one is served).
func withoutOptional(keys []string) []string {
	return slices.DeleteFunc(keys, func(k string) bool {
		return k == "nd_builtin_cache" || k == "erased" || k == "masked" || k == "req_id" || k == "metrics" || k == "bundles"
	})
}

// TestReplayVerifiesTheReceiptsOfServesOwnLog: a real `policycheck
// serve --receipt-key` with OPA's console decision logger on (--log-format
// json) decides the example runs step by step; `policycheck replay` of
// its log verifies every receipt it handed out — against the keys the log
// records, and against the served JWKS given as --receipt-keys — and
// finds nothing. Against another key set every receipt is a finding. A
// receipt whose payload was rewritten in the log, a receipt moved onto
// another call, and an event whose time was moved past the receipt's
// expiry are each found, one finding each, and fail the replay (exit 1).
func TestReplayVerifiesTheReceiptsOfServesOwnLog(t *testing.T) {
	examples := filepath.Join("..", "examples")
	regPath := filepath.Join(examples, "registry.yaml")
	policies := filepath.Join(examples, "policies")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "opa-config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("decision_logs:\n  console: true\n"), 0o600))
	keyFile := filepath.Join(dir, "receipt-key.pem")
	require.NoError(t, os.WriteFile(keyFile, receiptcases.PEM(receiptcases.Key(1)), 0o600))
	ctxDoc := `{"group": "support"}`
	bin := servetest.Build(t)
	p := servetest.Start(t, bin, "--registry", regPath, "--policy", policies, "--config", cfg, "--log-format", "json", "--receipt-key", keyFile)

	resp, err := p.Client().Get(p.URL + "/v1/keys")
	require.NoError(t, err)
	served, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(served))
	servedKeys := filepath.Join(dir, "served-keys.json")
	require.NoError(t, os.WriteFile(servedKeys, served, 0o600))

	files, _ := filepath.Glob(filepath.Join(examples, "histories", "*.json"))
	answered := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, out := range decideSteps(t, p, filepath.Base(f), splitHistory(t, raw), ctxDoc) {
			answered += strings.Count(string(out), `"receipt":`)
		}
	}
	p.Stop()
	require.Positive(t, answered)
	logPath := filepath.Join(dir, "serve.log")
	require.NoError(t, os.WriteFile(logPath, []byte(p.Logged()), 0o600))
	args := []string{"--registry", regPath, "--baseline", policies, "--candidate", policies}

	clean := func(t *testing.T, extra ...string) map[string]any {
		t.Helper()
		code, rep, stderr := replayExit(t, logPath, append(slices.Clone(args), extra...)...)
		require.Equal(t, 0, code, stderr)
		audit := asMap(t, rep["audit"])
		assert.Equal(t, map[string]any{"checked": float64(answered), "valid": float64(answered)}, audit["receipts"])
		assert.Equal(t, []any{}, audit["findings"])
		return audit
	}
	assert.Equal(t, "recorded", clean(t)["receipt_keys"])
	assert.Equal(t, servedKeys, clean(t, "--receipt-keys", servedKeys)["receipt_keys"])

	strangers := filepath.Join(dir, "stranger-keys.json")
	other, err := trust.NewSigner(receiptcases.Key(2))
	require.NoError(t, err)
	raw, err := json.Marshal(other.Keys())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(strangers, raw, 0o600))
	code, rep, stderr := replayExit(t, logPath, append(slices.Clone(args), "--receipt-keys", strangers)...)
	require.Equal(t, 1, code, stderr)
	findings := asMap(t, rep["audit"])["findings"].([]any)
	require.Len(t, findings, answered)
	for _, f := range findings {
		assert.Contains(t, asMap(t, f)["reason"], "which is not in the key set")
	}

	// The log's decision records, editable.
	type record struct {
		line  int
		event map[string]any
	}
	lines := strings.Split(strings.TrimRight(p.Logged(), "\n"), "\n")
	var signed []record // decisions with a receipt, in order
	for i, l := range lines {
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber()
		var ev map[string]any
		if dec.Decode(&ev) != nil || ev["msg"] != "Decision Log" {
			continue
		}
		if strings.Contains(l, `"receipt":`) {
			signed = append(signed, record{i, ev})
		}
	}
	require.GreaterOrEqual(t, len(signed), 2)
	receiptAt := func(ev map[string]any) (map[string]any, string) {
		for _, c := range asMap(t, ev["result"])["calls"].([]any) {
			c := asMap(t, c)
			if r, ok := c["receipt"].(string); ok {
				return c, r
			}
		}
		t.Fatal("no receipt")
		return nil, ""
	}
	var rewrite func(string) string
	for _, c := range receiptcases.Cases() {
		if c.Name == "payload rewritten" {
			rewrite = c.Tamper
		}
	}
	require.NotNil(t, rewrite)
	for _, tc := range []struct {
		name string
		edit func() []record
		want string
	}{
		{"payload rewritten", func() []record {
			c, r := receiptAt(signed[0].event)
			c["receipt"] = rewrite(r)
			return signed[:1]
		}, "the signature does not verify"},
		{"moved to another call", func() []record {
			_, r := receiptAt(signed[0].event)
			c, _ := receiptAt(signed[1].event)
			c["receipt"] = r
			return signed[1:2]
		}, "issued for "},
		{"decided after it expired", func() []record {
			ts, err := time.Parse(time.RFC3339Nano, signed[0].event["timestamp"].(string))
			require.NoError(t, err)
			signed[0].event["timestamp"] = ts.Add(time.Hour).Format(time.RFC3339Nano)
			return signed[:1]
		}, "expired at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := slices.Clone(lines)
			for _, r := range tc.edit() {
				b, err := json.Marshal(r.event)
				require.NoError(t, err)
				edited[r.line] = string(b)
			}
			path := filepath.Join(t.TempDir(), "serve.log")
			require.NoError(t, os.WriteFile(path, []byte(strings.Join(edited, "\n")+"\n"), 0o600))
			code, rep, stderr := replayExit(t, path, args...)
			require.Equal(t, 1, code, stderr)
			assert.Contains(t, stderr, "1 recorded receipt(s) or approval signature(s) did not verify")
			audit := asMap(t, rep["audit"])
			findings := audit["findings"].([]any)
			require.Len(t, findings, 1)
			f := asMap(t, findings[0])
			assert.Equal(t, "receipt", f["kind"])
			assert.Contains(t, f["reason"], tc.want)
			assert.Equal(t, map[string]any{"checked": float64(answered), "valid": float64(answered - 1)}, audit["receipts"])
			// The pretty report lists it too.
			var out, errb bytes.Buffer
			require.Equal(t, 1, cli.Run(append(slices.Clone(append([]string{"replay"}, args...)), path), strings.NewReader(""), &out, &errb))
			assert.Contains(t, out.String(), "1 finding\n")
			assert.Contains(t, out.String(), tc.want)
		})
		// Undo the edit for the next case: re-read the original events.
		for i := range signed {
			dec := json.NewDecoder(strings.NewReader(lines[signed[i].line]))
			dec.UseNumber()
			require.NoError(t, dec.Decode(&signed[i].event))
		}
	}
}

// TestReplayApproverKeysRefusesAnUnsignedApprovalTheLogApplied: a
// sidecar without approver keys applies the unsigned approval of
// examples/approvals (t2 executes on it) and logs nothing of signatures.
// Replayed as it is, the log keeps that approval; replayed with
// --approver-keys, the approval is judged as a sidecar with those keys
// would have judged it — unsigned, so not applied: t2 is
// approval_required on both sides, and the refusal is a finding (exit 1).
func TestReplayApproverKeysRefusesAnUnsignedApprovalTheLogApplied(t *testing.T) {
	transfers := filepath.Join("..", "examples", "policies", "transfers")
	rs, col, regPath := startLogged(t, transfers, "unsigned-approval-log-test")
	transfer, err := os.ReadFile(filepath.Join("..", "examples", "histories", "transfer.json"))
	require.NoError(t, err)
	approvals := transferApproval(t, "", func(trust.ApprovalPayload) string { return "" })
	status, out := rs.post(t, "/v1/decide", []byte(fmt.Sprintf(`{"history": %s, "approvals": %s}`, transfer, approvals)))
	require.Equal(t, http.StatusOK, status, string(out))
	d := decisionOf(t, "/v1/decide", out)
	require.Equal(t, engine.Execute, d.Calls[1].Verdict, "t2 executes on the unsigned approval")
	require.NoError(t, logs.Lookup(rs.srv.Manager()).Trigger(t.Context()))

	args := []string{"--registry", regPath, "--baseline", transfers, "--candidate", transfers}
	code, rep, stderr := replayExit(t, col.dir, args...)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, map[string]any{"execute->execute": 2.0}, rep["transitions"])
	assert.NotContains(t, rep, "audit")

	code, rep, stderr = replayExit(t, col.dir, append(args, "--approver-keys", filepath.Join("..", "examples", "trust", "approver-keys.json"))...)
	require.Equal(t, 1, code, stderr)
	assert.Equal(t, map[string]any{"execute->execute": 1.0, "approval_required->approval_required": 1.0}, rep["transitions"])
	audit := asMap(t, rep["audit"])
	assert.Equal(t, map[string]any{"recorded": 0.0, "recorded_refused": 0.0, "checked": 1.0, "verified": 0.0, "not_checked": 0.0}, audit["approvals"])
	findings := audit["findings"].([]any)
	require.Len(t, findings, 1)
	f := asMap(t, findings[0])
	assert.Equal(t, "approval", f["kind"])
	assert.Equal(t, "t2", f["tool_call_id"])
	assert.Contains(t, f["reason"], "the logged decision was made with it applied, and --approver-keys refuses it: unsigned")
}

// TestDecisionLogRecordsTheKeysAcrossARotation: after the receipt key is
// rotated, an event records the JWKS GET /v1/keys serves then — the new
// key and the replaced one, still listed — and its receipts name the new
// key; replay verifies the receipts of both events, each with the keys it
// records.
func TestDecisionLogRecordsTheKeysAcrossARotation(t *testing.T) {
	signer, err := trust.NewSigner(receiptcases.Key(1))
	require.NoError(t, err)
	first := signer.KeyID()
	policies := filepath.Join("..", "examples", "policies")
	rs, col, regPath := startLogged(t, policies, "rotation-log-test", withReceipts(signer))
	history, err := os.ReadFile(filepath.Join("..", "examples", "histories", "refund.json"))
	require.NoError(t, err)
	body := []byte(fmt.Sprintf(`{"history": %s, "context": {"group": "support"}}`, history))
	var served []any
	for range 2 {
		status, out := rs.post(t, "/v1/decide", body)
		require.Equal(t, http.StatusOK, status, string(out))
		raw, _ := getKeys(t, rs)
		var keys any
		require.NoError(t, json.Unmarshal(raw, &keys))
		served = append(served, keys)
		require.NoError(t, signer.Rotate(receiptcases.Key(2)))
	}
	require.NoError(t, logs.Lookup(rs.srv.Manager()).Trigger(t.Context()))
	events := collectorEvents(t, col)
	require.Len(t, events, 2)
	second := signer.KeyID()
	require.NotEqual(t, first, second)
	for i, want := range []struct {
		kid  string
		kids int
	}{{first, 1}, {second, 2}} {
		custom := asMap(t, events[i]["custom"])
		keys := normalize(t, custom["receipt_keys"])
		assert.Equal(t, served[i], keys, "event %d records the keys /v1/keys served", i)
		assert.Len(t, asMap(t, keys)["keys"], want.kids, "event %d", i)
		for _, r := range custom["receipts"].([]any) {
			assert.Equal(t, want.kid, asMap(t, r)["kid"], "event %d", i)
		}
	}
	code, rep, stderr := replayExit(t, col.dir, "--registry", regPath, "--baseline", policies, "--candidate", policies)
	require.Equal(t, 0, code, stderr)
	audit := asMap(t, rep["audit"])
	assert.Equal(t, map[string]any{"checked": 4.0, "valid": 4.0}, audit["receipts"])
}

// TestReplayKeepsTheSidecarsUsedRefusal: a sidecar with approver keys
// applies a signed approval once; the same approval sent again is
// refused as used, and the log records that. Replayed with
// --approver-keys, the second decision is decided as the sidecar decided
// it (t2 approval_required: that a signature was used is the sidecar's
// memory, not in the signature), with no finding.
func TestReplayKeepsTheSidecarsUsedRefusal(t *testing.T) {
	keys, err := trust.ParseKeys(receiptcases.ApproverJWKS())
	require.NoError(t, err)
	v, err := trust.NewApprovalVerifier(keys)
	require.NoError(t, err)
	transfers := filepath.Join("..", "examples", "policies", "transfers")
	rs, col, regPath := startLogged(t, transfers, "used-approval-log-test", withApproverKeys(v))
	transfer, err := os.ReadFile(filepath.Join("..", "examples", "histories", "transfer.json"))
	require.NoError(t, err)
	approvals := transferApproval(t, "", receiptcases.ApprovalCases()[0].Sign)
	for _, want := range []string{engine.Execute, engine.ApprovalRequired} {
		status, out := rs.post(t, "/v1/decide", []byte(fmt.Sprintf(`{"history": %s, "approvals": %s}`, transfer, approvals)))
		require.Equal(t, http.StatusOK, status, string(out))
		d := decisionOf(t, "/v1/decide", out)
		require.Equal(t, want, d.Calls[1].Verdict, d.Approvals[0].Why)
	}
	require.NoError(t, logs.Lookup(rs.srv.Manager()).Trigger(t.Context()))

	jwks := filepath.Join(t.TempDir(), "approvers.json")
	require.NoError(t, os.WriteFile(jwks, receiptcases.ApproverJWKS(), 0o600))
	code, rep, stderr := replayExit(t, col.dir, "--registry", regPath, "--baseline", transfers, "--candidate", transfers, "--approver-keys", jwks)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, map[string]any{"execute->execute": 3.0, "approval_required->approval_required": 1.0}, rep["transitions"])
	audit := asMap(t, rep["audit"])
	assert.Equal(t, map[string]any{"recorded": 2.0, "recorded_refused": 1.0, "checked": 1.0, "verified": 1.0, "not_checked": 0.0}, audit["approvals"])
	assert.Empty(t, audit["findings"])
}
