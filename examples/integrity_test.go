package examples_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// TestIntegrityExample: the integrity example (examples/policies/integrity,
// its registry examples/integrity/registry.yaml) asks a person before a
// consequential call whose recipient came from an untrusted file, also
// when the file was read before a compaction; denies publishing a secret
// statement; lets the gift to a contact from the trusted address book
// execute.
func TestIntegrityExample(t *testing.T) {
	cases := []struct {
		note     string
		history  string
		verdicts map[string]string
		reasons  map[string]string
	}{
		{note: "the bill's IBAN waits for approval, the secret statement is not published, the gift executes",
			history:  "pay-bill",
			verdicts: map[string]string{"p1": "approval_required", "p2": "execute", "r1": "denied"},
			reasons: map[string]string{
				"p1": "argument /recipient of send_money is untrusted: it carries a value from tool-return (read_file untrusted, tool_call_id f1, message 2, part 0)",
				"r1": "argument /text of post_review carries a secret value from get_statement (tool_call_id s1, message 2, part 2), above its clearance public",
			}},
		{note: "the taint survives a compaction",
			history:  "after-compaction",
			verdicts: map[string]string{"p1": "approval_required"},
			reasons: map[string]string{
				"p1": "argument /recipient of send_money is untrusted: no trusted source gave it, and the window held read_file's return (tool_call_id f1, call at message 1, part 0, through a compaction summary)",
			}},
		{note: "a provider's web search in the same response taints the window: its injected IBAN waits for approval",
			history:  "web-search",
			verdicts: map[string]string{"p1": "approval_required"},
			reasons: map[string]string{
				"p1": "argument /recipient of send_money is untrusted: no trusted source gave it, and the window held the provider's web_search return (tool_call_id w1, at message 1, part 1)",
			}},
		{note: "a return whose call the history lost taints the window: its IBAN waits for approval",
			history:  "unpaired-return",
			verdicts: map[string]string{"p1": "approval_required"},
			reasons: map[string]string{
				"p1": "argument /recipient of send_money is untrusted: it carries a value from tool-return (read_file untrusted, tool_call_id f1, message 2, part 0)",
			}},
		{note: "a file a tool returned, in a user-prompt part beside its return, is not the user's word",
			history:  "tool-file",
			verdicts: map[string]string{"p1": "approval_required"},
			reasons: map[string]string{
				"p1": "argument /recipient of send_money is untrusted: it carries a value from user-prompt beside read_file's return (untrusted, message 2, part 1)",
			}},
		{note: "a window of trusted returns: the call executes",
			history:  "clean",
			verdicts: map[string]string{"p1": "execute"}},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := cli.Run([]string{"eval", "--registry", "integrity/registry.yaml", "--history", "integrity/histories/" + tc.history + ".json",
				"--policy", "policies/integrity"}, strings.NewReader(""), &out, &errb)
			require.Equal(t, cli.ExitOK, code, errb.String())
			var d decision
			require.NoError(t, json.Unmarshal(out.Bytes(), &d))
			got := map[string]call{}
			for _, c := range d.Calls {
				got[c.ToolCallID] = c
			}
			for id, want := range tc.verdicts {
				require.Contains(t, got, id)
				assert.Equal(t, want, got[id].Verdict, id)
			}
			for id, reason := range tc.reasons {
				assert.Contains(t, strings.Join(got[id].Reasons, "\n"), reason, id)
			}
		})
	}
}
