package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/approvalcases"
)

// TestApprovalBindingThroughEval runs the approval table through
// `policycheck eval --approvals` and `policycheck explain --approvals`:
// no approval lets a call through unless it is bound to that very call,
// and the decision says why each approval did or did not apply.
func TestApprovalBindingThroughEval(t *testing.T) {
	dir := t.TempDir()
	reg := writeFile(t, dir, "registry.yaml", approvalcases.Registry)
	pol := writeFile(t, dir, approvalcases.PolicyFile, approvalcases.Policy)
	for _, tc := range approvalcases.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			hist := writeFile(t, t.TempDir(), "history.json", string(tc.History))
			appr := writeFile(t, t.TempDir(), "approvals.json", `{"approvals": `+string(tc.Approvals)+`}`)
			res := run(t, "", "eval", "--registry", reg, "--history", hist, "--policy", pol, "--approvals", appr)
			require.Equal(t, 0, res.code, res.stderr)
			var d engine.Decision
			require.NoError(t, json.Unmarshal([]byte(res.stdout), &d))
			require.NotEmpty(t, d.Calls)
			require.Len(t, d.Approvals, 1, "the decision records the approval")
			o := d.Approvals[0]
			assert.Equal(t, tc.Applied, o.Applied, o.Why)
			assert.Contains(t, o.Why, tc.Why)
			for _, c := range d.Calls {
				assert.Equal(t, tc.Verdict, c.Verdict, "%+v", c)
				if tc.Message != "" {
					assert.Contains(t, c.Message, tc.Message)
				}
				if tc.Verdict == engine.ApprovalRequired {
					assert.NotEmpty(t, c.Digest, "what to bind the next approval to")
					assert.NotNil(t, c.Args, "what to show the approver")
					assert.NotEmpty(t, c.Reasons)
				}
			}

			res = run(t, "", "explain", "--registry", reg, "--history", hist, "--policy", pol, "--approvals", appr)
			require.Equal(t, 0, res.code, res.stderr)
			assert.Contains(t, res.stdout, "-> "+tc.Verdict)
			assert.Contains(t, res.stdout, o.Why, "explain says whether the approval applied and why")
		})
	}
}

// TestApprovalsFileIsChecked refuses approvals files of shapes the engine
// does not take, naming the file and the JSON pointer, with exit status 2
// and nothing decided.
func TestApprovalsFileIsChecked(t *testing.T) {
	dir := t.TempDir()
	reg := writeFile(t, dir, "registry.yaml", approvalcases.Registry)
	hist := writeFile(t, dir, "history.json", string(approvalcases.Cases()[0].History))
	digest := `"sha256:` + strings.Repeat("a", 64) + `"`
	cases := []struct{ note, doc, pointer string }{
		{"not an object", `[]`, "(root)"},
		{"no approvals member", `{}`, "(root)"},
		{"an unknown member", `{"approvals": {}, "extra": 1}`, "/extra"},
		{"approvals not an object", `{"approvals": []}`, "/approvals"},
		{"a bare true carries no digest", `{"approvals": {"t2": true}}`, "/approvals/t2"},
		{"a bare false carries no digest", `{"approvals": {"t2": false}}`, "/approvals/t2"},
		{"no kind", `{"approvals": {"t2": {"digest": ` + digest + `}}}`, "/approvals/t2"},
		{"an unknown kind", `{"approvals": {"t2": {"kind": "yes", "digest": ` + digest + `}}}`, "/approvals/t2/kind"},
		{"no digest", `{"approvals": {"t2": {"kind": "tool-approved"}}}`, "/approvals/t2"},
		{"a malformed digest", `{"approvals": {"t2": {"kind": "tool-approved", "digest": "abc"}}}`, "/approvals/t2/digest"},
		{"override_args not an object", `{"approvals": {"t2": {"kind": "tool-approved", "digest": ` + digest + `, "override_args": 5}}}`, "/approvals/t2/override_args"},
		{"a denial with override_args", `{"approvals": {"t2": {"kind": "tool-denied", "digest": ` + digest + `, "override_args": {}}}}`, "/approvals/t2/override_args"},
		{"an approver that is not a string", `{"approvals": {"t2": {"kind": "tool-approved", "digest": ` + digest + `, "approvers": ["ana", 7]}}}`, "/approvals/t2/approvers/1"},
		{"an unknown member of an approval", `{"approvals": {"t2": {"kind": "tool-approved", "digest": ` + digest + `, "tool": "x"}}}`, "/approvals/t2/tool"},
		{"trailing data", `{"approvals": {}} {}`, "(root)"},
		{"two approvals for one tool_call_id", `{"approvals": {"t2": {"kind": "tool-denied", "digest": ` + digest + `}, "t2": {"kind": "tool-approved", "digest": ` + digest + `}}}`, "/approvals/t2"},
		{"two approvals for one tool_call_id, one spelt with an escape", `{"approvals": {"t2": {"kind": "tool-denied", "digest": ` + digest + `}, "t\u0032": {"kind": "tool-approved", "digest": ` + digest + `}}}`, "/approvals/t2"},
		{"a kind given twice", `{"approvals": {"t2": {"kind": "tool-denied", "digest": ` + digest + `, "kind": "tool-approved"}}}`, "/approvals/t2/kind"},
		{"two approvals members", `{"approvals": {}, "approvals": {}}`, "/approvals"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			appr := writeFile(t, t.TempDir(), "approvals.json", tc.doc)
			for _, cmd := range []string{"eval", "explain"} {
				res := run(t, "", cmd, "--registry", reg, "--history", hist, "--approvals", appr)
				assert.Equal(t, 2, res.code, "%s: %s", cmd, res.stdout)
				assert.Empty(t, res.stdout, "nothing half-decided")
				assert.Contains(t, res.stderr, appr+": "+tc.pointer+":")
			}
		})
	}
}

// TestReplayWithApprovals: replaying the transfer run against the
// transfers example (candidate) and the default policy (baseline), t2
// turns execute -> approval_required; with --approvals, the approval
// bound to t2 applies at its step and nothing changes; an approvals file
// of a bad shape is refused with its pointer, exit 2.
func TestReplayWithApprovals(t *testing.T) {
	reg := filepath.Join(examplesDir, "registry.yaml")
	hist := filepath.Join(examplesDir, "histories", "transfer.json")
	args := []string{"replay", "--registry", reg, "--candidate", filepath.Join(examplesDir, "policies", "transfers"),
		"--fail-on", "execute->approval_required", hist}
	res := run(t, "", args...)
	assert.Equal(t, 1, res.code, res.stderr)
	assert.Contains(t, res.stderr, "execute->approval_required (1)")

	res = run(t, "", append(args, "--approvals", filepath.Join(examplesDir, "approvals", "transfer.json"))...)
	assert.Equal(t, 0, res.code, res.stderr+res.stdout)

	bad := writeFile(t, t.TempDir(), "approvals.json", `{"approvals": {"t2": true}}`)
	res = run(t, "", append(args, "--approvals", bad)...)
	assert.Equal(t, 2, res.code)
	assert.Contains(t, res.stderr, bad+": /approvals/t2:")
}
