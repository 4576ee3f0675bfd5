package cli_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReplayAuditFlagsRefuseWhatNothingReads: --receipt-keys verifies
// what decision logs recorded and --approver-keys judges the approvals of
// logged decisions and of --approvals: with no input they would read,
// each is refused (exit 2) rather than ignored, as is an empty or
// unreadable key set.
func TestReplayAuditFlagsRefuseWhatNothingReads(t *testing.T) {
	reg := filepath.Join(examplesDir, "registry.yaml")
	pols := filepath.Join(examplesDir, "policies")
	history := filepath.Join(examplesDir, "histories", "refund.json")
	trust := filepath.Join(examplesDir, "trust")
	base := []string{"replay", "--registry", reg, "--baseline", pols, "--candidate", pols}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--receipt-keys", filepath.Join(trust, "receipt-keys.json"), history}, "--receipt-keys verifies the receipts decision logs recorded, and no input is a decision log"},
		{[]string{"--approver-keys", filepath.Join(trust, "approver-keys.json"), history}, "--approver-keys judges the approvals of logged decisions and of --approvals, and there are neither"},
		{[]string{"--receipt-keys", filepath.Join(trust, "no-such-keys.json"), history}, "no-such-keys.json"},
		{[]string{"--receipt-keys", filepath.Join(trust, "receipt-key.pem"), history}, "--receipt-keys"},
		{[]string{"--receipt-keys", "", history}, "--receipt-keys names a JWKS file or URL"},
		{[]string{"--approver-keys", "", history}, "--approver-keys names a file"},
		{[]string{"--approver-keys", filepath.Join(trust, "receipt-key.pem"), history}, "--approver-keys"},
	} {
		code, out, errs := runCLI(append(slices.Clone(base), tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 saying %q", tc.args, code, out, errs, tc.want)
		}
	}
}

// TestReplayRefusesMalformedRecordedSignatures: what an event records of
// receipts and approval signatures is read strictly: a receipt key set
// that is not a JWKS, approval outcomes of another shape, receipts named
// in custom.receipts of another shape, a result whose calls are not the
// input document's, and an event with a receipt but no timestamp (as of
// which its expiry is judged) are refused, exit 2, naming the file and
// the pointer.
func TestReplayRefusesMalformedRecordedSignatures(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(examplesDir, "registry.yaml")
	pols := filepath.Join(examplesDir, "policies")
	history := filepath.Join(examplesDir, "histories", "refund.json")
	logged := loggedDecision(t, dir, reg, history, 5)
	raw, err := os.ReadFile(logged)
	if err != nil {
		t.Fatal(err)
	}
	var event map[string]any
	if err := json.Unmarshal(raw, &event); err != nil {
		t.Fatal(err)
	}
	calls := event["input"].(map[string]any)["dispatch"].(map[string]any)["calls"].([]any)
	result := func(receipt string) map[string]any {
		var cs []any
		for range calls {
			cs = append(cs, map[string]any{"verdict": "execute", "receipt": receipt})
		}
		return map[string]any{"calls": cs}
	}
	const ts = "2026-12-01T10:00:00Z"
	for _, tc := range []struct {
		name string
		edit map[string]any
		want string
	}{
		{"receipt keys not a JWKS", map[string]any{"timestamp": ts, "result": result(""), "custom": map[string]any{"receipt_keys": "nope"}}, ": /custom/receipt_keys: want a JWKS"},
		{"approval outcomes of another shape", map[string]any{"timestamp": ts, "result": result(""), "custom": map[string]any{"approvals": []any{map[string]any{"bogus": 1}}}},
			": /custom/approvals: want an array of approval signature outcomes"},
		{"receipts of another shape", map[string]any{"timestamp": ts, "result": result(""), "custom": map[string]any{"receipts": map[string]any{}}}, ": /custom/receipts: want an array"},
		{"no timestamp", map[string]any{"result": result("x.y.z")}, ": /timestamp: an event that records receipts"},
		{"receipts recorded, the result erased", map[string]any{"timestamp": ts, "custom": map[string]any{"receipts": []any{}}}, ": /result: the event records receipts"},
		{"a result of other calls", map[string]any{"timestamp": ts, "result": map[string]any{"calls": []any{map[string]any{"receipt": "x.y.z"}}}},
			": /result/calls: the result judges 1 call(s), the input document's dispatch holds 5"},
	} {
		ev := maps.Clone(event)
		maps.Copy(ev, tc.edit)
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "edited.jsonl")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs := runCLI("replay", "--registry", reg, "--baseline", pols, "--candidate", pols, path)
		if code != 2 || out != "" || !strings.Contains(errs, "edited.jsonl:1") || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 naming %s", tc.name, code, out, errs, tc.want)
		}
	}
}

// TestReplayApproverKeysJudgesTheApprovalsFile: with --approver-keys, the
// approvals of --approvals are judged as eval --approver-keys judges
// them: the unsigned approval of examples/approvals no longer lets t2
// execute, on either side, and the decision says why.
func TestReplayApproverKeysJudgesTheApprovalsFile(t *testing.T) {
	reg := filepath.Join(examplesDir, "registry.yaml")
	transfers := filepath.Join(examplesDir, "policies", "transfers")
	history := filepath.Join(examplesDir, "histories", "transfer.json")
	base := []string{"replay", "--format", "json", "--registry", reg, "--baseline", transfers, "--candidate", transfers,
		"--approvals", filepath.Join(examplesDir, "approvals", "transfer.json"), history}
	transitions := func(args ...string) map[string]any {
		t.Helper()
		code, out, errs := runCLI(append(slices.Clone(base), args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if _, ok := rep["audit"]; ok {
			t.Errorf("a history run records nothing to audit: %v", rep["audit"])
		}
		return rep["transitions"].(map[string]any)
	}
	if got := transitions(); !maps.Equal(got, map[string]any{"execute->execute": 2.0}) {
		t.Errorf("without approver keys: %v", got)
	}
	got := transitions("--approver-keys", filepath.Join(examplesDir, "trust", "approver-keys.json"))
	if !maps.Equal(got, map[string]any{"execute->execute": 1.0, "approval_required->approval_required": 1.0}) {
		t.Errorf("with approver keys, the unsigned approval is not applied: %v", got)
	}
}

// TestReplayHelpNamesTheAuditFlags: replay's usage and help give
// --receipt-keys and --approver-keys, and the exit status a finding
// gives; serve's help says what its decision log records of receipts and
// approvals.
func TestReplayHelpNamesTheAuditFlags(t *testing.T) {
	code, out, errs := runCLI("serve", "--help")
	if code != 0 || !strings.Contains(out, "each decision-log event's custom also records the\nreceipts handed out (each one's jti and kid)") {
		t.Errorf("serve --help: exit %d, %s%s", code, out, errs)
	}
	code, out, errs = runCLI("replay", "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"[--receipt-keys JWKS] [--approver-keys JWKS]", "--receipt-keys string", "--approver-keys string",
		"a recorded receipt or approval signature did not verify (a finding)"} {
		if !strings.Contains(out, want) {
			t.Errorf("replay --help does not say %q:\n%s", want, out)
		}
	}
}

// TestReplayDocFindingExample runs the replays docs/replay.md shows
// failing (```console exit=1 blocks, which TestReplayDocExample leaves
// alone), from the module root as the doc does: each exits 1 and prints
// what the doc shows, its report and then its error.
func TestReplayDocFindingExample(t *testing.T) {
	examples := 0
	for _, ex := range replayDocExamples(t, "```console exit=1\n") {
		cmdline, want := ex.cmdline, ex.want
		examples++
		code, out, errs := runCLI(strings.Fields(cmdline)...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1: %s", cmdline, code, errs)
		}
		if got := out + errs; got != want {
			t.Errorf("docs/replay.md shows:\n%s\n%s prints:\n%s", want, cmdline, got)
		}
	}
	if examples < 1 {
		t.Fatal("docs/replay.md lost its example of a receipt moved to another call")
	}
}

// TestReplayFindingInEveryFormat: the receipt moved to another call in
// examples/trust/receipt-log-moved.jsonl is a finding in every format —
// json's audit, with the receipt's id and key, and html's findings
// section, escaped as the rest of the page — and fails the replay in each.
func TestReplayFindingInEveryFormat(t *testing.T) {
	moved := filepath.Join(examplesDir, "trust", "receipt-log-moved.jsonl")
	base := []string{"replay", "--registry", filepath.Join(examplesDir, "registry.yaml"),
		"--baseline", filepath.Join(examplesDir, "policies"), "--candidate", filepath.Join(examplesDir, "policies")}
	code, out, errs := runCLI(append(slices.Clone(base), "--format", "json", moved)...)
	if code != 1 {
		t.Fatalf("json: exit %d: %s", code, errs)
	}
	var rep struct {
		Audit struct {
			ReceiptKeys string         `json:"receipt_keys"`
			Receipts    map[string]int `json:"receipts"`
			Findings    []map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Audit.ReceiptKeys != "recorded" || !maps.Equal(rep.Audit.Receipts, map[string]int{"checked": 2, "valid": 1}) || len(rep.Audit.Findings) != 1 {
		t.Fatalf("json audit: %+v", rep.Audit)
	}
	f := rep.Audit.Findings[0]
	for k, want := range map[string]any{"run": "refund-1", "message": 5.0, "kind": "receipt", "tool_call_id": "c3", "tool": "search_docs",
		"jti": "Wjl8PsFwEFJyksyEwSq7ew", "kid": "pvHiZbP8IoxsbthcNA6IgjJCNYyN4ukc70LRZqEMLZk",
		"reason": `receipt rejected: issued for tool_call_id "c1", the call's is "c3"`, "source": moved + ":1"} {
		if f[k] != want {
			t.Errorf("finding %s: %v, want %v", k, f[k], want)
		}
	}
	code, out, errs = runCLI(append(slices.Clone(base), "--format", "html", moved)...)
	if code != 1 {
		t.Fatalf("html: exit %d: %s", code, errs)
	}
	for _, want := range []string{`<section id="findings">`, `<td id="finding-count" class="changed">1</td>`,
		`issued for tool_call_id &#34;c1&#34;, the call&#39;s is &#34;c3&#34;`, `<td id="audit-receipts">2 checked, 1 valid (keys: recorded)</td>`} {
		if !strings.Contains(out, want) {
			t.Errorf("the html report lacks %q", want)
		}
	}
}

// TestReplayFindsAReceiptHandedOutTwice: the example log's last decision
// copied into the log as another decision (a new decision_id) carries
// receipts that verify — same run, call and arguments — but that an
// earlier decision handed out: each is a finding. The same event logged
// twice (its decision_id too) is not.
func TestReplayFindsAReceiptHandedOutTwice(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(examplesDir, "trust", "receipt-log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	last := lines[len(lines)-1]
	var ev map[string]any
	if err := json.Unmarshal([]byte(last), &ev); err != nil {
		t.Fatal(err)
	}
	ev["decision_id"] = "00000000-0000-4000-8000-000000000000"
	copied, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"replay", "--format", "json", "--registry", filepath.Join(examplesDir, "registry.yaml"),
		"--baseline", filepath.Join(examplesDir, "policies"), "--candidate", filepath.Join(examplesDir, "policies")}
	for _, tc := range []struct {
		name, extra string
		findings    int
	}{{"copied as another decision", string(copied), 2}, {"logged twice", last, 0}} {
		path := filepath.Join(t.TempDir(), "log.jsonl")
		if err := os.WriteFile(path, []byte(strings.Join(append(slices.Clone(lines), tc.extra), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs := runCLI(append(slices.Clone(base), path)...)
		var rep struct {
			Audit struct {
				Receipts map[string]int
				Findings []struct{ Reason string }
			}
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: %v: %s", tc.name, err, errs)
		}
		if len(rep.Audit.Findings) != tc.findings || (tc.findings > 0) != (code == 1) || (tc.findings == 0) != (code == 0) {
			t.Fatalf("%s: exit %d, findings %+v", tc.name, code, rep.Audit.Findings)
		}
		for _, f := range rep.Audit.Findings {
			if !strings.Contains(f.Reason, "a receipt copied into another decision") {
				t.Errorf("%s: %s", tc.name, f.Reason)
			}
		}
		if want := 6 - tc.findings; rep.Audit.Receipts["checked"] != 6 || rep.Audit.Receipts["valid"] != want {
			t.Errorf("%s: receipts %v, want 6 checked, %d valid", tc.name, rep.Audit.Receipts, want)
		}
	}
}
