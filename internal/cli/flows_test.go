package cli_test

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

const (
	exRegistry = "../../examples/registry.yaml"
	exHistory  = "../../examples/histories/exfiltration.json"
	exPolicy   = "../../examples/policies/exfiltration"
)

// exVerdicts runs eval on the exfiltration example with extra flags.
func exVerdicts(t *testing.T, flags ...string) map[string]string {
	t.Helper()
	res := run(t, "", append([]string{"eval", "--registry", exRegistry, "--history", exHistory, "--policy", exPolicy}, flags...)...)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var d struct {
		Calls []struct {
			ID      string `json:"tool_call_id"`
			Verdict string `json:"verdict"`
		} `json:"calls"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &d))
	out := map[string]string{}
	for _, c := range d.Calls {
		out[c.ID] = c.Verdict
	}
	return out
}

// TestFlowFlags: --flow-min-length and --flow-index-cap reach the
// decision (a minimum longer than the copied secret finds no flow; a cap
// too small truncates the index, and the example fails closed); a value
// below 1 is refused, exit 2, naming the flag, by every command that
// takes them.
func TestFlowFlags(t *testing.T) {
	assert.Equal(t, map[string]string{"x1": "execute", "x2": "approval_required"}, exVerdicts(t))
	assert.Equal(t, map[string]string{"x1": "execute", "x2": "approval_required"}, exVerdicts(t, "--flow-min-length", "20"))
	assert.Equal(t, map[string]string{"x1": "execute", "x2": "execute"}, exVerdicts(t, "--flow-min-length", "21"))
	assert.Equal(t, map[string]string{"x1": "approval_required", "x2": "approval_required"}, exVerdicts(t, "--flow-index-cap", "10"))

	for _, args := range [][]string{
		{"eval", "--registry", exRegistry, "--history", exHistory, "--flow-min-length", "0"},
		{"explain", "--registry", exRegistry, "--history", exHistory, "--flow-index-cap", "-1"},
		{"facts", "--registry", exRegistry, "--history", exHistory, "--flow-min-length", "-3"},
		{"replay", "--registry", exRegistry, "--candidate", exPolicy, "--flow-min-length", "0", exHistory},
		{"serve", "--registry", exRegistry, "--addr", "127.0.0.1:0", "--flow-index-cap", "0"},
	} {
		res := run(t, "", args...)
		assert.Equal(t, cli.ExitBadUsage, res.code, "%v: %s", args, res.stderr)
		assert.Contains(t, res.stderr, "--flow-", args[0])
		assert.Contains(t, res.stderr, "must be at least 1", args[0])
	}
}

// TestReplayExfiltration: replaying the exfiltration example against the
// shipped histories changes exactly the one call that copies the vault's
// secret into a transfer (docs/replay.md shows the report).
func TestReplayExfiltration(t *testing.T) {
	res := run(t, "", "replay", "--registry", exRegistry, "--candidate", exPolicy, "--format", "json", "../../examples/histories")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var rep struct {
		Transitions map[string]int `json:"transitions"`
		Changes     []struct {
			Run        string `json:"run"`
			ToolCallID string `json:"tool_call_id"`
			Transition string `json:"transition"`
		} `json:"changes"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep))
	require.Len(t, rep.Changes, 1, res.stdout)
	assert.True(t, strings.HasSuffix(rep.Changes[0].Run, "exfiltration.json"))
	assert.Equal(t, "x2", rep.Changes[0].ToolCallID)
	assert.Equal(t, "execute->approval_required", rep.Changes[0].Transition)
}

// TestExplainShowsFlowSources: explain names, for the refused call, the
// argument that carries a returned value and the return it came from, in
// the pretty, JSON and HTML formats; the call that executes has none.
func TestExplainShowsFlowSources(t *testing.T) {
	base := []string{"explain", "--registry", exRegistry, "--history", exHistory, "--policy", exPolicy}
	res := run(t, "", base...)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, `- argument "/to" contains a string returned by "secret_op" (tool_call_id "v1", labels "secret") at message 4, part 0`)

	res = run(t, "", append(base, "--format", "json")...)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var x struct {
		Calls []struct {
			ID    string          `json:"tool_call_id"`
			Flows json.RawMessage `json:"flows"`
		} `json:"calls"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &x))
	require.Len(t, x.Calls, 2)
	assert.Equal(t, "x1", x.Calls[0].ID)
	assert.Empty(t, x.Calls[0].Flows, "an executed call lists no flows")
	assert.JSONEq(t, `[{"path": "/to", "match": "contains", "source":
		{"kind": "tool-return", "tool_call_id": "v1", "tool": "secret_op", "labels": ["secret"], "at": {"message": 4, "part": 0}}}]`, string(x.Calls[1].Flows))

	res = run(t, "", append(base, "--format", "html")...)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, `<li>argument &#34;/to&#34; contains a string returned by &#34;secret_op&#34; (tool_call_id &#34;v1&#34;, labels &#34;secret&#34;) at message 4, part 0</li>`)
}

// TestFlowTokensFlag: --flow-tokens reaches the engine of eval and serve.
// The exfiltration example with the key returned inside a longer string
// ("key: sk-live-… (rotate monthly)"): the transfer that carries the key
// is not a verbatim copy of a returned string, so it executes without
// the flag and waits for approval with it (a pair_value token).
func TestFlowTokensFlag(t *testing.T) {
	b, err := os.ReadFile(exHistory)
	require.NoError(t, err)
	const value = `"value": "sk-live-51Hx9QeT2vA7"`
	require.Contains(t, string(b), value)
	b = []byte(strings.Replace(string(b), value, `"value": "key: sk-live-51Hx9QeT2vA7 (rotate monthly)"`, 1))
	path := filepath.Join(t.TempDir(), "inside.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	verdicts := func(flags ...string) map[string]string {
		res := run(t, "", append([]string{"eval", "--registry", exRegistry, "--history", path, "--policy", exPolicy}, flags...)...)
		require.Equal(t, cli.ExitOK, res.code, res.stderr)
		var d struct {
			Calls []struct {
				ID      string `json:"tool_call_id"`
				Verdict string `json:"verdict"`
			} `json:"calls"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &d))
		out := map[string]string{}
		for _, c := range d.Calls {
			out[c.ID] = c.Verdict
		}
		return out
	}
	assert.Equal(t, map[string]string{"x1": "execute", "x2": "execute"}, verdicts())
	assert.Equal(t, map[string]string{"x1": "execute", "x2": "approval_required"}, verdicts("--flow-tokens"))
	res := run(t, "", "serve", "--help")
	assert.Contains(t, res.stdout+res.stderr, "--flow-tokens")
}
