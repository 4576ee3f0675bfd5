package docs_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/internal/testkit/handlertest"
	"github.com/policycheck/policycheck/loader"
)

// consoleExamples returns the ```console blocks of a Markdown file: the
// command after "$ " on the block's first line, and the output the rest
// of the block shows.
func consoleExamples(t *testing.T, file string) (commands, outputs []string) {
	t.Helper()
	for _, b := range codeBlocks(t, file, "console") {
		first, out, _ := strings.Cut(b, "\n")
		cmd, ok := strings.CutPrefix(first, "$ ")
		require.True(t, ok, "%s: a console block begins with \"$ command\": %q", file, first)
		commands, outputs = append(commands, cmd), append(outputs, out)
	}
	return commands, outputs
}

// fingerprint is the pretty format's last line: its digest covers the
// policy and registry revisions, which change with every edit of the
// shipped policies, so it is compared as a digest only.
var fingerprint = regexp.MustCompile(`(?m)^(Filter-cache fingerprint .*: )sha256:[0-9a-f]{64}$`)

// TestTrustExamples runs every example docs/trust.md shows, from the
// repository root as the page does, and compares its output with the
// page's: policycheck commands in process, the digest computed by hand
// with sh.
func TestTrustExamples(t *testing.T) {
	commands, outputs := consoleExamples(t, "trust.md")
	require.GreaterOrEqual(t, len(commands), 7, "docs/trust.md lost examples")
	path := t.TempDir()
	t.Chdir("..")
	for i, c := range commands {
		var stdout, stderr string
		var code int
		if rest, ok := strings.CutPrefix(c, "policycheck "); ok {
			args, err := splitArgs(rest)
			require.NoError(t, err, c)
			stdout, stderr, code = run(t, args...)
		} else {
			stdout, stderr, code = sh(path, c)
		}
		require.Equal(t, cli.ExitOK, code, "%s\n%s", c, stderr)
		want := fingerprint.ReplaceAllString(outputs[i], "${1}<digest>")
		got := fingerprint.ReplaceAllString(stdout, "${1}<digest>")
		assert.Equal(t, want, got, "docs/trust.md shows the output of\n%s\nas\n%s\nit prints\n%s", c, outputs[i], stdout)
	}
}

// The histories and approvals docs/trust.md describes are what it says
// they are: the fabricated search return answers no call, the fabricated
// load's call and return are the client's, and the self-written approval
// carries the digest the page computes by hand and an approver no one
// checked.
func TestTrustExampleFiles(t *testing.T) {
	type part struct {
		PartKind   string `json:"part_kind"`
		ToolName   string `json:"tool_name"`
		ToolCallID string `json:"tool_call_id"`
	}
	type message struct {
		Kind  string `json:"kind"`
		Parts []part `json:"parts"`
	}
	read := func(file string, v any) {
		t.Helper()
		raw, err := os.ReadFile("../examples/trust/" + file)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, v))
	}
	calls := func(h []message, tool string) (calls, returns int) {
		for _, m := range h {
			for _, p := range m.Parts {
				switch {
				case p.ToolName != tool:
				case p.PartKind == "tool-call":
					calls++
				case p.PartKind == "tool-return":
					returns++
				}
			}
		}
		return calls, returns
	}
	var search, load []message
	read("fabricated-search.json", &search)
	c, r := calls(search, "search_tools")
	assert.Equal(t, [2]int{0, 1}, [2]int{c, r}, "fabricated-search.json: one search_tools return and no search call")
	read("fabricated-load.json", &load)
	c, r = calls(load, "load_capability")
	assert.Equal(t, [2]int{1, 1}, [2]int{c, r}, "fabricated-load.json: one load_capability call and its return")

	var approvals struct {
		Approvals map[string]struct {
			Digest    string   `json:"digest"`
			Approvers []string `json:"approvers"`
		} `json:"approvals"`
	}
	read("self-approval.json", &approvals)
	doc, err := os.ReadFile("trust.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?m)^([0-9a-f]{64})  -$").FindSubmatch(doc)
	require.NotNil(t, m, "docs/trust.md lost the digest computed by hand")
	require.Contains(t, approvals.Approvals, "t2")
	assert.Equal(t, "sha256:"+string(m[1]), approvals.Approvals["t2"].Digest)
	assert.Equal(t, []string{"the-client-wrote-this"}, approvals.Approvals["t2"].Approvers)
}

// The sidecar takes the same word as eval (docs/trust.md): a fabricated
// search return reveals over /v1/decide, a fabricated load pair loads
// over /v1/runs, where offset 0 starts the run again with any history,
// and a body's registry replaces the configured one.
func TestTrustSidecar(t *testing.T) {
	reg, err := loader.ReadRegistry("../examples/registry.yaml")
	require.NoError(t, err)
	h := handlertest.Handler(t, reg)
	post := func(path, body string) (int, engine.Decision) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		var d engine.Decision
		if rec.Code == http.StatusOK {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &d), rec.Body.String())
		}
		return rec.Code, d
	}
	history := func(file string) string {
		t.Helper()
		raw, err := os.ReadFile("../examples/trust/" + file)
		require.NoError(t, err)
		return string(raw)
	}
	verdict := func(d engine.Decision) string {
		t.Helper()
		require.Len(t, d.Calls, 1)
		return d.Calls[0].Verdict
	}

	code, d := post("/v1/decide", `{"history": `+history("no-search.json")+`}`)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, engine.NotAvailableYet, verdict(d))
	_, d = post("/v1/decide", `{"history": `+history("fabricated-search.json")+`}`)
	assert.Equal(t, engine.Execute, verdict(d), "a search return that answers no call reveals")

	code, d = post("/v1/runs/r1/decide", `{"offset": 0, "messages": `+history("no-search.json")+`}`)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, engine.NotAvailableYet, verdict(d))
	code, _ = post("/v1/runs/r1/decide", `{"offset": 1, "messages": []}`)
	assert.Equal(t, http.StatusConflict, code, "within a run, what the server holds cannot be rewritten")
	_, d = post("/v1/runs/r1/decide", `{"offset": 0, "messages": `+history("fabricated-load.json")+`}`)
	assert.Equal(t, engine.Execute, verdict(d), "offset 0 starts the run again, with a load pair the client wrote")

	own := `{"capabilities": [{"id": "docs"}], "tools": [{"name": "search_docs", "capability": "docs"}]}`
	_, d = post("/v1/decide", `{"registry": `+own+`, "history": `+history("no-search.json")+`}`)
	assert.Equal(t, engine.Execute, verdict(d), "a body's registry, in which search_docs is not deferred, replaces the configured one")
}
