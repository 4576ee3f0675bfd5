package docs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
)

// flowEvasion is one way of carrying a secret past the data-flow match
// that docs/flows.md lists ("Confirmed evasions"): what secret_op returns
// (the content of its tool-return) and the arguments of the transfer that
// carries it out.
type flowEvasion struct {
	// doc is the words docs/flows.md lists the evasion under.
	doc     string
	content any
	args    map[string]any
}

// flowEvasions are the evasions of data-flow matching a red team
// confirmed (issue 43), each as today's matching leaves it: no flow, so
// the exfiltration example lets the transfer execute.
var flowEvasions = []flowEvasion{
	{doc: "JSON `\\u` escapes inside a nested JSON string",
		content: map[string]any{"value": "sk-live-51Hx9QeT2vA7"},
		args:    map[string]any{"from": "ops", "to": `{"ref": "\u0073k-live-51Hx9QeT2vA7"}`, "amount": 1}},
	{doc: "nested more than four levels deep",
		content: nestedJSON("sk-live-51Hx9QeT2vA7", 5),
		args:    map[string]any{"from": "ops", "to": "sk-live-51Hx9QeT2vA7", "amount": 1}},
	{doc: "a number copied as a string",
		content: map[string]any{"pin": 73401659},
		args:    map[string]any{"from": "ops", "to": "acct 73401659", "amount": 1}},
	{doc: "a string copied as a number",
		content: map[string]any{"pin": "73401659"},
		args:    map[string]any{"from": "ops", "to": "globex", "amount": 73401659}},
	{doc: "split across two arguments",
		content: map[string]any{"value": "sk-live-51Hx9QeT2vA7"},
		args:    map[string]any{"from": "sk-live-51H", "to": "x9QeT2vA7", "amount": 1}},
	{doc: "a zero-width character inserted",
		content: map[string]any{"value": "sk-live-51Hx9QeT2vA7"},
		args:    map[string]any{"from": "ops", "to": "sk-live-51H\u200bx9QeT2vA7", "amount": 1}},
	{doc: "upper-cased",
		content: map[string]any{"value": "sk-live-51Hx9QeT2vA7"},
		args:    map[string]any{"from": "ops", "to": "SK-LIVE-51HX9QET2VA7", "amount": 1}},
	{doc: "base64",
		content: map[string]any{"value": "sk-live-51Hx9QeT2vA7"},
		args:    map[string]any{"from": "ops", "to": "c2stbGl2ZS01MUh4OVFlVDJ2QTc=", "amount": 1}},
}

// nestedJSON is {"value": s} as JSON text inside a string, levels
// times: {"value": "{\"value\": ...}"}.
func nestedJSON(s string, levels int) map[string]any {
	v := any(s)
	for range levels {
		b, err := json.Marshal(map[string]any{"value": v})
		if err != nil {
			panic(err)
		}
		v = string(b)
	}
	return map[string]any{"value": v}
}

// exfiltrationVerdict runs the exfiltration example on its history with
// secret_op returning content and the second transfer (x2) called with
// args, and returns x2's verdict.
func exfiltrationVerdict(t *testing.T, content any, args map[string]any) string {
	t.Helper()
	raw, err := os.ReadFile("../examples/histories/exfiltration.json")
	require.NoError(t, err)
	var history []map[string]any
	require.NoError(t, json.Unmarshal(raw, &history))
	seen := 0
	for _, m := range history {
		for _, p := range m["parts"].([]any) {
			part := p.(map[string]any)
			switch {
			case part["part_kind"] == "tool-return" && part["tool_call_id"] == "v1":
				part["content"] = content
				seen++
			case part["part_kind"] == "tool-call" && part["tool_call_id"] == "x2":
				part["args"] = args
				seen++
			}
		}
	}
	require.Equal(t, 2, seen, "examples/histories/exfiltration.json lost secret_op's return (v1) or the transfer x2")
	b, err := json.Marshal(history)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "history.json")
	require.NoError(t, os.WriteFile(file, b, 0o600))
	stdout, stderr, code := run(t, "eval", "--registry", "../examples/registry.yaml", "--history", file,
		"--policy", "../examples/policies/exfiltration")
	require.Equal(t, cli.ExitOK, code, stderr)
	var d struct {
		Calls []struct {
			ToolCallID string `json:"tool_call_id"`
			Verdict    string `json:"verdict"`
		} `json:"calls"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &d), stdout)
	for _, c := range d.Calls {
		if c.ToolCallID == "x2" {
			return c.Verdict
		}
	}
	t.Fatalf("no verdict for x2: %s", stdout)
	return ""
}

// TestFlowsConfirmedEvasions: every evasion docs/flows.md lists under
// "Confirmed evasions" carries the secret out today (the transfer
// executes), and the page lists every one tested here; the verbatim copy
// and the copy inside a longer string are caught. When matching learns to
// catch one, this test fails: take it off the page's list.
func TestFlowsConfirmedEvasions(t *testing.T) {
	page, err := os.ReadFile("flows.md")
	require.NoError(t, err)
	_, list, ok := strings.Cut(string(page), "## Confirmed evasions")
	require.True(t, ok, "docs/flows.md lost its \"Confirmed evasions\" section")
	list, _, _ = strings.Cut(list, "\n## ")
	secret := map[string]any{"value": "sk-live-51Hx9QeT2vA7"}
	require.Equal(t, "approval_required", exfiltrationVerdict(t, secret,
		map[string]any{"from": "ops", "to": "sk-live-51Hx9QeT2vA7", "amount": 1}), "a verbatim copy is caught")
	require.Equal(t, "approval_required", exfiltrationVerdict(t, secret,
		map[string]any{"from": "ops", "to": "globex ref sk-live-51Hx9QeT2vA7 thanks", "amount": 1}), "a copy inside a string is caught")
	require.Equal(t, "approval_required", exfiltrationVerdict(t, nestedJSON("sk-live-51Hx9QeT2vA7", 4),
		map[string]any{"from": "ops", "to": "sk-live-51Hx9QeT2vA7", "amount": 1}), "JSON text four levels deep is read")
	require.Equal(t, "approval_required", exfiltrationVerdict(t, map[string]any{"body": `{"value": "\u0073k-live-51Hx9QeT2vA7"}`},
		map[string]any{"from": "ops", "to": "sk-live-51Hx9QeT2vA7", "amount": 1}), "returned JSON text is decoded, \\u escapes included")
	list = strings.ToLower(list)
	for _, e := range flowEvasions {
		t.Run(e.doc, func(t *testing.T) {
			assert.Contains(t, list, strings.ToLower(e.doc), "docs/flows.md does not list this evasion")
			assert.Equal(t, "execute", exfiltrationVerdict(t, e.content, e.args), "caught today: take it off docs/flows.md's list")
		})
	}
	assert.Equal(t, len(flowEvasions), strings.Count(list, "\n* **"), "docs/flows.md lists an evasion no test confirms")
}
