package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/conformance/runner"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// post sends body to path and returns the status and the response body.
func (rs *running) post(t testing.TB, path string, body []byte, header ...string) (int, []byte) {
	t.Helper()
	return rs.do(t, http.MethodPost, path, body, header...)
}

// do sends a request. As a run's client does, it keeps the generation of
// each run's last answer and sends it with the run's next step when the
// step (a JSON object with an offset above 0) carries none; a test that
// sends "generation" itself sends what it means.
func (rs *running) do(t testing.TB, method, path string, body []byte, header ...string) (int, []byte) {
	t.Helper()
	run, isRun := runOfPath(method, path)
	if isRun {
		body = rs.withGeneration(run, body)
	}
	status, out := rs.send(t, method, path, bytes.NewReader(body), header...)
	if isRun && status == http.StatusOK {
		var answer struct {
			Generation string `json:"generation"`
		}
		if json.Unmarshal(out, &answer) == nil {
			rs.gensMu.Lock()
			if rs.gens == nil {
				rs.gens = map[string]string{}
			}
			rs.gens[run] = answer.Generation
			rs.gensMu.Unlock()
		}
	}
	return status, out
}

// runOfPath returns the run id of a POST /v1/runs/{id}/decide.
func runOfPath(method, path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/v1/runs/")
	if !ok || method != http.MethodPost {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, "/decide")
	if !ok {
		return "", false
	}
	if unescaped, err := url.PathUnescape(id); err == nil {
		id = unescaped
	}
	return id, true
}

// withGeneration adds to a run step's body the generation the run's last
// answer gave, when the body is an object with an offset above 0 and no
// generation.
func (rs *running) withGeneration(run string, body []byte) []byte {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	var offset int
	if _, has := doc["generation"]; has || json.Unmarshal(doc["offset"], &offset) != nil || offset <= 0 {
		return body
	}
	rs.gensMu.Lock()
	gen, ok := rs.gens[run]
	rs.gensMu.Unlock()
	if !ok {
		return body
	}
	// Spliced in as the first member: the rest of the body keeps its bytes.
	member, _ := json.Marshal(gen)
	at := bytes.IndexByte(body, '{') + 1
	out := append([]byte{}, body[:at]...)
	out = append(append(append(out, `"generation": `...), member...), ',')
	return append(out, body[at:]...)
}

// send is do with the body as a reader: one that is not a *bytes.Reader
// (or strings.Reader) declares no length, so the request is chunked.
func (rs *running) send(t testing.TB, method, path string, body io.Reader, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, rs.url+path, body)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := rs.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// decisionOf reads the decision of an answer from path: /v1/explain
// wraps it in the explanation.
func decisionOf(t testing.TB, path string, out []byte) engine.Decision {
	t.Helper()
	var d engine.Decision
	if path == "/v1/explain" {
		var x struct{ Decision engine.Decision }
		require.NoError(t, json.Unmarshal(out, &x))
		return x.Decision
	}
	require.NoError(t, json.Unmarshal(out, &d))
	return d
}

// evalJSON encodes v exactly as policycheck eval prints it.
func evalJSON(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return buf.Bytes()
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// filterKey names a case's filter set, so that cases with the same
// filters share a server.
func filterKey(srcs []engine.Source) string {
	var b strings.Builder
	for _, s := range srcs {
		b.WriteString(s.File + "\x00" + s.Text + "\x00")
	}
	return b.String()
}

// TestConformanceOverHTTP decides every shared conformance case over HTTP,
// with the registry in the request, and requires the bytes engine.Decide
// (and engine.Explain) produce, as policycheck eval prints them.
func TestConformanceOverHTTP(t *testing.T) {
	ctx := context.Background()
	cases := conformance.Cases(t)
	servers := map[string]*running{}
	for _, c := range cases {
		name := filepath.Base(c.File)
		mods := runner.FilterModules(c)
		key := filterKey(mods)
		rs := servers[key]
		if rs == nil {
			rs = start(t, withEngine(engine.Modules(mods...)))
			servers[key] = rs
		}
		reg, err := loader.ParseRegistry(name, c.Registry)
		require.NoError(t, err, name)
		h, err := loader.DecodeHistory(name, c.History, loader.DefaultLimits())
		require.NoError(t, err, name)
		eng, err := engine.New(ctx, engine.Registry(reg), engine.Modules(mods...))
		require.NoError(t, err, name)
		want, err := eng.Decide(ctx, engine.Request{History: h})
		require.NoError(t, err, name)
		wantX, err := eng.Explain(ctx, engine.Request{History: h})
		require.NoError(t, err, name)

		body := mustJSON(t, map[string]json.RawMessage{"registry": c.Registry, "history": c.History})
		status, got := rs.post(t, "/v1/decide", body)
		require.Equal(t, http.StatusOK, status, "%s: %s", name, got)
		require.Equal(t, string(evalJSON(t, want)), string(got), name)

		status, got = rs.post(t, "/v1/explain", body)
		require.Equal(t, http.StatusOK, status, "%s: %s", name, got)
		require.Equal(t, string(evalJSON(t, wantX)), string(got), name)
	}
	require.NotEmpty(t, servers)
}

// TestSameAsCLI compares decide and facts over HTTP with the output of
// the policycheck eval and facts commands, byte for byte, for the cases
// without filters.
func TestSameAsCLI(t *testing.T) {
	cases := conformance.Cases(t)
	rs := start(t)
	dir := t.TempDir()
	n := 0
	for _, c := range cases {
		if len(c.Filters) > 0 {
			continue
		}
		if n++; n > 12 {
			break
		}
		name := filepath.Base(c.File)
		regFile, histFile := filepath.Join(dir, "reg.json"), filepath.Join(dir, "hist.json")
		require.NoError(t, os.WriteFile(regFile, c.Registry, 0o600))
		require.NoError(t, os.WriteFile(histFile, c.History, 0o600))
		body := mustJSON(t, map[string]json.RawMessage{"registry": c.Registry, "history": c.History})
		for _, cmd := range []struct {
			args []string
			path string
		}{
			{[]string{"eval"}, "/v1/decide"},
			{[]string{"facts"}, "/v1/facts"},
			{[]string{"facts", "--format", "input"}, "/v1/facts?format=input"},
		} {
			var stdout, stderr bytes.Buffer
			code := cli.Run(append(cmd.args, "--registry", regFile, "--history", histFile), nil, &stdout, &stderr)
			require.Equal(t, 0, code, "%s: %s", name, stderr.String())
			status, got := rs.post(t, cmd.path, body)
			require.Equal(t, http.StatusOK, status, "%s %s: %s", name, cmd.path, got)
			require.Equal(t, stdout.String(), string(got), "%s %s", name, cmd.path)
		}
	}
}

const (
	testRegistry = `{"capabilities":[{"id":"vault","defer_loading":false}],` +
		`"tools":[{"name":"get_time"},{"name":"secret_op","capability":"vault"}]}`
	testHistory = `[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]},` +
		`{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"secret_op","args":{},"tool_call_id":"c1"}]}]`
)

func testReg(t testing.TB) option {
	t.Helper()
	reg, err := loader.ParseRegistry("test", []byte(testRegistry))
	require.NoError(t, err)
	return withRegistry(reg)
}

type errorDoc struct {
	Error struct {
		Code           string `json:"code"`
		Message        string `json:"message"`
		Pointer        string `json:"pointer"`
		HistoryPointer string `json:"history_pointer"`
	} `json:"error"`
}

func decodeError(t testing.TB, body []byte) errorDoc {
	t.Helper()
	var e errorDoc
	require.NoError(t, json.Unmarshal(body, &e), string(body))
	require.NotEmpty(t, e.Error.Code, string(body))
	require.NotEmpty(t, e.Error.Message, string(body))
	return e
}

// TestErrors: malformed, invalid and oversize bodies, wrong methods and
// unknown paths get a 4xx and a JSON error naming the pointer.
func TestErrors(t *testing.T) {
	withReg := start(t, testReg(t), withMaxBody(4096))
	noReg := start(t, withMaxBody(4096))
	big := `{"history": [` + strings.Repeat(`{"kind":"request","parts":[]},`, 200) + `{"kind":"request","parts":[]}]}`
	tests := []struct {
		note    string
		rs      *running
		method  string
		path    string
		body    string
		status  int
		code    string
		pointer string
		message string // a substring of the error message
	}{
		{note: "malformed body", rs: withReg, path: "/v1/decide", body: `{"history": [`, status: 400, code: server.CodeSyntax},
		{note: "body not an object", rs: withReg, path: "/v1/decide", body: `[1]`, status: 400, code: server.CodeSyntax},
		{note: "no comma between envelope members", rs: withReg, path: "/v1/decide", body: `{"history": [] "context": {}}`,
			status: 400, code: server.CodeSyntax, message: "expected ',' or '}'"},
		{note: "no comma between object members", rs: withReg, path: "/v1/decide", body: `{"history": [], "context": {"a": 1 "b": 2}}`,
			status: 400, code: server.CodeSyntax, message: "expected ',' or '}'"},
		{note: "no comma between array elements", rs: withReg, path: "/v1/decide", body: `{"history": [{} {}]}`,
			status: 400, code: server.CodeSyntax, message: "expected ',' or ']'"},
		// Every member is read as a history is (wire.Skip), as eval
		// reads --context: encoding/json would read "a\udc00b" and
		// "a\xffb" alike, as "a\ufffdb".
		{note: "a lone surrogate escape in the context", rs: withReg, path: "/v1/decide", body: `{"history": [], "context": {"user": "a\udc00b"}}`,
			status: 400, code: server.CodeSyntax, pointer: "/context/user", message: `lone UTF-16 surrogate \udc00`},
		{note: "invalid UTF-8 in the context", rs: withReg, path: "/v1/decide", body: "{\"history\": [], \"context\": {\"user\": \"a\xffb\"}}",
			status: 400, code: server.CodeSyntax, pointer: "/context/user", message: "invalid UTF-8 in string"},
		{note: "NaN in the context", rs: withReg, path: "/v1/decide", body: `{"history": [], "context": {"limit": NaN}}`,
			status: 400, code: server.CodeSyntax, pointer: "/context/limit", message: "NaN is not a JSON value"},
		{note: "a lone surrogate escape in a request's registry", rs: withReg, path: "/v1/decide",
			body:   `{"history": [], "registry": {"tools": [{"name": "a\ud800"}]}}`,
			status: 400, code: server.CodeSyntax, pointer: "/registry/tools/0/name", message: `lone UTF-16 surrogate \ud800`},
		{note: "a lone surrogate escape in a member name", rs: withReg, path: "/v1/decide", body: `{"history": [], "cont\udc00ext": {}}`,
			status: 400, code: server.CodeSyntax, message: `lone UTF-16 surrogate \udc00`},
		{note: "a context nested deeper than the history may be", rs: withReg, path: "/v1/decide",
			body:   `{"history": [], "context": {"a": ` + strings.Repeat("[", loader.DefaultMaxDepth+1) + strings.Repeat("]", loader.DefaultMaxDepth+1) + `}}`,
			status: 400, code: server.CodeSyntax, pointer: "/context/a" + strings.Repeat("/0", loader.DefaultMaxDepth-1),
			message: "nesting deeper than the limit of 200"},
		{note: "history missing", rs: withReg, path: "/v1/decide", body: `{}`, status: 400, code: server.CodeSchema, pointer: "/history"},
		// A member the endpoint does not read is refused: a misspelt
		// context would read as none, and a deny rule on it would not fire.
		{note: "a misspelt context", rs: withReg, path: "/v1/decide", body: `{"history": [], "contxt": {"env": "prod"}}`,
			status: 400, code: server.CodeSchema, pointer: "/contxt", message: `"contxt" is not a member this endpoint reads: it reads "registry", "history", "context", "approvals"`},
		{note: "a misspelt member of explain", rs: withReg, path: "/v1/explain", body: `{"history": [], "aprovals": {}}`,
			status: 400, code: server.CodeSchema, pointer: "/aprovals"},
		{note: "a misspelt member of a run", rs: withReg, path: "/v1/runs/r/decide", body: `{"offset": 0, "messages": [], "contxt": {}}`,
			status: 400, code: server.CodeSchema, pointer: "/contxt", message: `it reads "offset", "messages", "context", "registry", "approvals"`},
		{note: "an unknown member's pointer is escaped", rs: withReg, path: "/v1/facts", body: `{"history": [], "a/b~c": 1}`,
			status: 400, code: server.CodeSchema, pointer: "/a~1b~0c"},
		// A syntax error anywhere in the body is reported before an
		// error in the history's content; of duplicate members the last
		// is the one decided.
		{note: "a schema error in the history, a syntax error after it", rs: withReg, path: "/v1/decide",
			body: `{"history": [{"kind": "nope", "parts": []}], "context": {"a" 1}}`, status: 400, code: server.CodeSyntax, message: "expected ':'"},
		{note: "a syntax error inside a message that only the decoder sees", rs: withReg, path: "/v1/decide",
			body: `{"history": [{"kind": "request", "parts": [], "x": tru}]}`, status: 400, code: server.CodeSyntax, pointer: "/history/0/x"},
		{note: "duplicate history, the last not an array", rs: withReg, path: "/v1/decide", body: `{"history": [], "history": {}}`, status: 400, code: server.CodeSchema, pointer: "/history"},
		{note: "duplicate history, the last invalid", rs: withReg, path: "/v1/decide",
			body: `{"history": [], "history": [{"kind": "nope", "parts": []}]}`, status: 400, code: server.CodeSchema, pointer: "/history/0/kind"},
		{note: "history not an array", rs: withReg, path: "/v1/decide", body: `{"history": {}}`, status: 400, code: server.CodeSchema, pointer: "/history"},
		{note: "unknown kind", rs: withReg, path: "/v1/decide", body: `{"history": [{"kind": "nope", "parts": []}]}`, status: 400, code: server.CodeSchema, pointer: "/history/0/kind"},
		{note: "unknown part_kind", rs: withReg, path: "/v1/facts", body: `{"history": [{"kind": "request", "parts": [{"part_kind": "x"}]}]}`, status: 400, code: server.CodeSchema, pointer: "/history/0/parts/0/part_kind"},
		{note: "context not an object", rs: withReg, path: "/v1/explain", body: `{"history": [], "context": [1]}`, status: 400, code: server.CodeSchema, pointer: "/context"},
		{note: "oversize body", rs: withReg, path: "/v1/decide", body: big, status: 413, code: server.CodeLimit},
		{note: "oversize run body", rs: withReg, path: "/v1/runs/r/decide", body: big, status: 413, code: server.CodeLimit},
		{note: "wrong method", rs: withReg, method: http.MethodGet, path: "/v1/decide", status: 405, code: server.CodeMethod},
		// A query parameter the endpoint does not read is refused.
		{note: "a query parameter decide does not read", rs: withReg, path: "/v1/decide?format=input", body: `{"history": []}`,
			status: 400, code: server.CodeQuery, message: `query parameter "format" is not read by /v1/decide, which reads no query parameters`},
		{note: "a misspelt query parameter of facts", rs: withReg, path: "/v1/facts?formt=input", body: `{"history": []}`,
			status: 400, code: server.CodeQuery, message: "which reads only format"},
		{note: "a query parameter on health", rs: withReg, method: http.MethodGet, path: "/health?bundles=true",
			status: 400, code: server.CodeQuery, message: `"bundles"`},
		{note: "wrong method on health", rs: withReg, method: http.MethodPost, path: "/health", status: 405, code: server.CodeMethod},
		{note: "unknown path", rs: withReg, path: "/v1/nope", body: `{}`, status: 404, code: server.CodeNotFound},
		{note: "registry required", rs: noReg, path: "/v1/decide", body: `{"history": []}`, status: 400, code: server.CodeRegistryRequired, pointer: "/registry"},
		{note: "bad registry", rs: noReg, path: "/v1/decide", body: `{"registry": {"tools": [{"name": ""}]}, "history": []}`, status: 400, code: server.CodeBadRegistry, pointer: "/registry/tools/0/name"},
		{note: "filter for a capability the registry lacks", rs: start(t, withEngine(engine.Modules(engine.Source{File: "f.rego", Text: "package policycheck.capabilities.nope\n\nprepare_tools := set()\n"}))),
			path: "/v1/decide", body: `{"registry": {"tools": [{"name": "a"}]}, "history": []}`, status: 400, code: server.CodePolicy},
		{note: "run without offset", rs: withReg, path: "/v1/runs/r/decide", body: `{"messages": []}`, status: 400, code: server.CodeSchema, pointer: "/offset"},
		{note: "run message invalid", rs: withReg, path: "/v1/runs/r/decide", body: `{"offset": 0, "messages": [{"kind": "request", "parts": [{"part_kind": "x"}]}]}`, status: 400, code: server.CodeSchema, pointer: "/messages/0/parts/0/part_kind"},
		{note: "run unknown", rs: withReg, path: "/v1/runs/never/decide", body: `{"offset": 3, "messages": []}`, status: 409, code: server.CodeRunConflict},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			status, body := tc.rs.do(t, method, tc.path, []byte(tc.body))
			require.Equal(t, tc.status, status, string(body))
			e := decodeError(t, body)
			require.Equal(t, tc.code, e.Error.Code, string(body))
			if tc.pointer != "" {
				require.Equal(t, tc.pointer, e.Error.Pointer, string(body))
			}
			require.Contains(t, e.Error.Message, tc.message)
		})
	}
}

// TestCachedMessages: messages decoded and validated for one request are
// reused by the next, but errors, pointers and limits are those of the
// whole history.
func TestCachedMessages(t *testing.T) {
	rs := start(t, testReg(t), withLimits(loader.Limits{MaxParts: 3}))
	msgs := splitHistory(t, []byte(testHistory))
	decideMsgs := func(m ...json.RawMessage) (int, []byte) {
		return rs.post(t, "/v1/decide", mustJSON(t, map[string]any{"history": m}))
	}
	status, first := decideMsgs(msgs...)
	require.Equal(t, 200, status, string(first))
	status, again := decideMsgs(msgs...)
	require.Equal(t, 200, status)
	require.Equal(t, string(first), string(again))
	bad := json.RawMessage(`{"kind": "request", "parts": [{"part_kind": "nope"}]}`)
	status, body := decideMsgs(msgs[0], msgs[1], bad)
	require.Equal(t, 400, status, string(body))
	require.Equal(t, "/history/2/parts/0/part_kind", decodeError(t, body).Error.Pointer)
	// Four parts in cached messages: over MaxParts.
	status, body = decideMsgs(msgs[0], msgs[1], msgs[0], msgs[1])
	require.Equal(t, 413, status, string(body))
	require.Equal(t, server.CodeLimit, decodeError(t, body).Error.Code)
}

// TestRunErrorPointers: an invalid appended message is named both in the
// request (/messages/i) and in the whole history (/offset+i).
func TestRunErrorPointers(t *testing.T) {
	rs := start(t, testReg(t))
	var msgs []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(testHistory), &msgs))
	status, body := rs.post(t, "/v1/runs/p/decide", mustJSON(t, map[string]any{"offset": 0, "messages": msgs}))
	require.Equal(t, 200, status, string(body))
	bad := `{"offset": 2, "messages": [{"kind": "request", "parts": []}, {"kind": "response", "parts": [{"part_kind": "tool-call"}]}]}`
	status, body = rs.post(t, "/v1/runs/p/decide", []byte(bad))
	require.Equal(t, 400, status, string(body))
	e := decodeError(t, body)
	require.True(t, strings.HasPrefix(e.Error.Pointer, "/messages/1/parts/0"), e.Error.Pointer)
	require.True(t, strings.HasPrefix(e.Error.HistoryPointer, "/3/parts/0"), e.Error.HistoryPointer)
	// The run is untouched: appending at offset 2 still works.
	status, body = rs.post(t, "/v1/runs/p/decide", []byte(`{"offset": 2, "messages": [{"kind": "request", "parts": []}]}`))
	require.Equal(t, 200, status, string(body))
}

// TestAuth: with a token, every endpoint but /health wants it.
func TestAuth(t *testing.T) {
	rs := start(t, testReg(t), withToken("s3cret"))
	body := []byte(`{"history": ` + testHistory + `}`)
	tests := []struct {
		note   string
		path   string
		header []string
		status int
	}{
		{note: "missing token", path: "/v1/decide", status: 401},
		{note: "wrong token", path: "/v1/decide", header: []string{"Authorization", "Bearer nope"}, status: 401},
		{note: "token prefix", path: "/v1/decide", header: []string{"Authorization", "Bearer s3cre"}, status: 401},
		{note: "wrong scheme", path: "/v1/decide", header: []string{"Authorization", "Basic s3cret"}, status: 401},
		{note: "right token", path: "/v1/decide", header: []string{"Authorization", "Bearer s3cret"}, status: 200},
		{note: "metrics want it too", path: "/metrics", status: 401},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			method := http.MethodPost
			if tc.path == "/metrics" {
				method = http.MethodGet
			}
			req, err := http.NewRequest(method, rs.url+tc.path, bytes.NewReader(body))
			require.NoError(t, err)
			for i := 0; i+1 < len(tc.header); i += 2 {
				req.Header.Set(tc.header[i], tc.header[i+1])
			}
			resp, err := rs.client.Do(req)
			require.NoError(t, err)
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, tc.status, resp.StatusCode, string(out))
			if tc.status == 401 {
				require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
				require.Equal(t, server.CodeUnauthorized, decodeError(t, out).Error.Code)
			}
		})
	}
	status, _ := rs.do(t, http.MethodGet, "/health", nil)
	require.Equal(t, 200, status)
}

// TestHealthAndMetrics: /health reports the revision; /metrics counts
// decisions and verdicts and reports the engine's caches.
func TestHealthAndMetrics(t *testing.T) {
	rs := start(t, testReg(t))
	status, body := rs.do(t, http.MethodGet, "/health", nil)
	require.Equal(t, 200, status)
	var h server.Health
	require.NoError(t, json.Unmarshal(body, &h))
	require.Equal(t, "ok", h.Status)
	require.NotEmpty(t, h.PolicyRevision)
	for i := 0; i < 3; i++ {
		status, body = rs.post(t, "/v1/decide", []byte(`{"history": `+testHistory+`, "context": {"user": "ada"}}`))
		require.Equal(t, 200, status, string(body))
	}
	status, body = rs.do(t, http.MethodGet, "/metrics", nil)
	require.Equal(t, 200, status)
	m := string(body)
	for _, want := range []string{
		`policycheck_decisions_total{endpoint="decide"} 3`,
		`policycheck_verdicts_total{verdict="execute"} 3`,
		`policycheck_decision_duration_seconds_count{endpoint="decide"} 3`,
		`policycheck_policy_revision_info{bundle="",bundle_revision="",policy_revision="` + h.PolicyRevision + `"} 1`,
		"policycheck_filter_cache_hits ",
		"policycheck_filter_cache_misses ",
		// Three equal requests: the policy is evaluated once.
		"policycheck_decision_cache_hits 2\n",
		"policycheck_decision_cache_misses 1\n",
		"policycheck_decision_cache_entries 1\n",
		// One context, converted once.
		"policycheck_context_cache_hits 2\n",
		"policycheck_context_cache_misses 1\n",
		"policycheck_context_cache_entries 1\n",
		"policycheck_ready 1",
	} {
		require.Contains(t, m, want)
	}
}

// TestDecisionCacheOff: with the engine's decision memo off (serve
// --decision-cache 0) every request evaluates the policy.
func TestDecisionCacheOff(t *testing.T) {
	rs := start(t, testReg(t), withEngine(engine.DecisionCache(0)))
	for range 2 {
		status, body := rs.post(t, "/v1/decide", []byte(`{"history": `+testHistory+`}`))
		require.Equal(t, 200, status, string(body))
	}
	_, body := rs.do(t, http.MethodGet, "/metrics", nil)
	for _, want := range []string{"policycheck_decision_cache_hits 0\n", "policycheck_decision_cache_misses 0\n", "policycheck_decision_cache_entries 0\n"} {
		require.Contains(t, string(body), want)
	}
}

// TestTimeoutFailsClosed: a decision that runs out of time denies every
// call and says why.
func TestTimeoutFailsClosed(t *testing.T) {
	slow := engine.Source{File: "slow.rego", Text: `package policycheck.capabilities.vault

prepare_tools contains t.name if {
	some t in input.tools
	some i in numbers.range(1, 100000000)
	i < 0
}
`}
	rs := start(t, testReg(t), withEngine(engine.Modules(slow)), withTimeout(1))
	status, body := rs.post(t, "/v1/decide", []byte(`{"history": `+testHistory+`}`))
	require.Equal(t, 200, status, string(body))
	var d engine.Decision
	require.NoError(t, json.Unmarshal(body, &d))
	require.NotEmpty(t, d.Errors)
	require.Empty(t, d.Available)
	require.Equal(t, engine.Denied, d.Calls[0].Verdict)
	_, body = rs.do(t, http.MethodGet, "/metrics", nil)
	require.Contains(t, string(body), `policycheck_fail_closed_decisions_total{endpoint="decide"} 1`)
}

// splitHistory returns the messages of a history document.
func splitHistory(t testing.TB, raw []byte) []json.RawMessage {
	t.Helper()
	var msgs []json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &msgs))
	return msgs
}

func joinMessages(msgs []json.RawMessage) []byte {
	out := []byte{'['}
	for i, m := range msgs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	return append(out, ']')
}

// TestRunsEqualFullHistory: on every prefix of the longest conformance
// histories, the incremental endpoint (one message per request) answers
// exactly what deciding the whole prefix answers.
func TestRunsEqualFullHistory(t *testing.T) {
	cases := conformance.Cases(t)
	sort.SliceStable(cases, func(i, j int) bool { return len(cases[i].History) > len(cases[j].History) })
	for _, c := range cases[:6] {
		name := filepath.Base(c.File)
		rs := start(t, withEngine(engine.Modules(runner.FilterModules(c)...)))
		msgs := splitHistory(t, c.History)
		ctxDoc := json.RawMessage(`{"user": "u1"}`)
		for k := 1; k <= len(msgs); k++ {
			full := mustJSON(t, map[string]json.RawMessage{"registry": c.Registry, "history": joinMessages(msgs[:k]), "context": ctxDoc})
			status, want := rs.post(t, "/v1/decide", full)
			require.Equal(t, 200, status, "%s: %s", name, want)
			inc := map[string]any{"offset": k - 1, "messages": msgs[k-1 : k], "context": ctxDoc}
			if k == 1 {
				inc["registry"] = c.Registry
			}
			status, got := rs.post(t, "/v1/runs/"+name+"/decide", mustJSON(t, inc))
			require.Equal(t, 200, status, "%s prefix %d: %s", name, k, got)
			// The run's answer is the decision plus its retry accounting.
			var step map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(got, &step))
			require.Contains(t, step, "step")
			require.Contains(t, step, "retries")
			require.Contains(t, step, "generation")
			delete(step, "step")
			delete(step, "retries")
			delete(step, "generation")
			var decision map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(want, &decision))
			require.Equal(t, decision, step, "%s prefix %d", name, k)
		}
	}
}

// TestRunConflicts: an unknown or evicted run, or an offset the server
// does not hold, is a 409 that asks for the whole history; offset 0
// restarts the run.
func TestRunConflicts(t *testing.T) {
	rs := start(t, testReg(t), withRuns(2, 0))
	msgs := splitHistory(t, []byte(testHistory))
	first := mustJSON(t, map[string]any{"offset": 0, "messages": msgs[:1]})
	next := mustJSON(t, map[string]any{"offset": 1, "messages": msgs[1:]})
	for _, id := range []string{"a", "b"} {
		status, body := rs.post(t, "/v1/runs/"+id+"/decide", first)
		require.Equal(t, 200, status, string(body))
	}
	// Offset mismatch.
	status, body := rs.post(t, "/v1/runs/a/decide", mustJSON(t, map[string]any{"offset": 5, "messages": msgs[1:]}))
	require.Equal(t, 409, status, string(body))
	require.Contains(t, decodeError(t, body).Error.Message, `"offset": 0`)
	// A third run evicts the least recently used one (b: a was touched).
	status, _ = rs.post(t, "/v1/runs/c/decide", first)
	require.Equal(t, 200, status)
	status, body = rs.post(t, "/v1/runs/b/decide", next)
	require.Equal(t, 409, status, string(body))
	status, body = rs.post(t, "/v1/runs/a/decide", next)
	require.Equal(t, 200, status, string(body))
	// Replaying the same append is an offset mismatch now.
	status, _ = rs.post(t, "/v1/runs/a/decide", next)
	require.Equal(t, 409, status)
	// Restart with the whole history.
	status, body = rs.post(t, "/v1/runs/b/decide", mustJSON(t, map[string]any{"offset": 0, "messages": msgs}))
	require.Equal(t, 200, status, string(body))
	// Deleted runs are unknown.
	status, _ = rs.do(t, http.MethodDelete, "/v1/runs/b", nil)
	require.Equal(t, 204, status)
	status, _ = rs.post(t, "/v1/runs/b/decide", mustJSON(t, map[string]any{"offset": 2, "messages": []any{}}))
	require.Equal(t, 409, status)
	_, body = rs.do(t, http.MethodGet, "/metrics", nil)
	require.Contains(t, string(body), `policycheck_run_lookups_total{result="conflict"} `+strconv.Itoa(4))
}

// TestRunIDs: a run id is 1 to 256 bytes of printable UTF-8. One with a
// NUL, another control or format character, or bytes that are not UTF-8
// is refused with a 400 stating the rule, on both run endpoints, and
// starts no run; a printable one, in any script, with spaces or an
// escaped slash, is a run like any other.
func TestRunIDs(t *testing.T) {
	rs := start(t, testReg(t))
	first := []byte(`{"offset": 0, "messages": ` + testHistory + `}`)
	refused := map[string]string{
		"NUL":               "%00",
		"NUL inside":        "run%00x",
		"not UTF-8":         "%ff",
		"truncated UTF-8":   "run%c3",
		"escape":            "%1b%5b2K",
		"carriage return":   "ok%0d",
		"newline":           "a%0ab",
		"tab":               "a%09b",
		"DEL":               "a%7f",
		"C1 control":        "a%c2%85",
		"bidi override":     "a%e2%80%aeb",
		"zero-width space":  "a%e2%80%8bb",
		"line separator":    "a%e2%80%a8b",
		"over 256 bytes":    strings.Repeat("a", 257),
		"over 256 in UTF-8": strings.Repeat("%c3%a9", 129),
		"no-break space":    "a%c2%a0b",
	}
	for note, id := range refused {
		for _, req := range []struct {
			method, path string
			body         []byte
		}{{http.MethodPost, "/v1/runs/" + id + "/decide", first}, {http.MethodDelete, "/v1/runs/" + id, nil}} {
			status, out := rs.do(t, req.method, req.path, req.body)
			require.Equal(t, http.StatusBadRequest, status, "%s: %s %s: %s", note, req.method, req.path, out)
			e := decodeError(t, out).Error
			require.Equal(t, server.CodeSchema, e.Code, note)
			require.Contains(t, e.Message, "a run id is 1 to 256 bytes of UTF-8 whose characters are all printable", note)
			require.NotContains(t, e.Message, "\x00", note)
			require.NotContains(t, e.Message, "\x1b", note)
		}
	}
	_, out := rs.do(t, http.MethodGet, "/metrics", nil)
	require.True(t, strings.Contains(string(out), "\npolicycheck_runs 0\n"), "a refused id starts no run")

	for _, id := range []string{"r1", "a%20b", "%c3%a9t%c3%a9", "%e6%97%a5%e6%9c%ac", "a%2Fb", "run:1.step?", strings.Repeat("a", 256), strings.Repeat("%c3%a9", 128)} {
		path := "/v1/runs/" + strings.ReplaceAll(id, "?", "%3F")
		status, out := rs.post(t, path+"/decide", first)
		require.Equal(t, http.StatusOK, status, "%s: %s", id, out)
		status, out = rs.post(t, path+"/decide", []byte(`{"offset": 2, "messages": []}`))
		require.Equal(t, http.StatusOK, status, "%s: the run is held: %s", id, out)
		status, out = rs.do(t, http.MethodDelete, path, nil)
		require.Equal(t, http.StatusNoContent, status, "%s: %s", id, out)
	}
}

// TestRunIdleTTL: a run idle for longer than its TTL is gone.
func TestRunIdleTTL(t *testing.T) {
	rs := start(t, testReg(t), withRuns(10, time.Millisecond))
	msgs := splitHistory(t, []byte(testHistory))
	status, body := rs.post(t, "/v1/runs/idle/decide", mustJSON(t, map[string]any{"offset": 0, "messages": msgs[:1]}))
	require.Equal(t, 200, status, string(body))
	time.Sleep(20 * time.Millisecond) // well past the TTL
	status, body = rs.post(t, "/v1/runs/idle/decide", mustJSON(t, map[string]any{"offset": 1, "messages": msgs[1:]}))
	require.Equal(t, 409, status, string(body))
}

// TestRunConcurrentAppends: clients racing to append at the same offset
// of one run: exactly one wins, the others are told to resend.
func TestRunConcurrentAppends(t *testing.T) {
	rs := start(t, testReg(t))
	msgs := splitHistory(t, []byte(testHistory))
	status, body := rs.post(t, "/v1/runs/race/decide", mustJSON(t, map[string]any{"offset": 0, "messages": msgs[:1]}))
	require.Equal(t, 200, status, string(body))
	var first struct{ Generation string }
	require.NoError(t, json.Unmarshal(body, &first))
	next := mustJSON(t, map[string]any{"offset": 1, "messages": msgs[1:], "generation": first.Generation})
	const n = 8
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := rs.client.Post(rs.url+"/v1/runs/race/decide", "application/json", bytes.NewReader(next))
			if err != nil {
				statuses <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	require.Equal(t, map[int]int{200: 1, 409: n - 1}, count)
}

// TestErrorsAreWrittenAsDecisions: an error body is written as a
// decision is (two-space indentation, no HTML escaping, a final newline,
// its length declared), and both carry X-Content-Type-Options: nosniff.
func TestErrorsAreWrittenAsDecisions(t *testing.T) {
	rs := start(t, testReg(t))
	for _, tc := range []struct {
		note, body string
		status     int
	}{
		{"an error", `{"history": [], "<b>": 1}`, http.StatusBadRequest},
		{"a decision", `{"history": []}`, http.StatusOK},
	} {
		resp, err := rs.client.Post(rs.url+"/v1/decide", "application/json", strings.NewReader(tc.body))
		require.NoError(t, err, tc.note)
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err, tc.note)
		require.Equal(t, tc.status, resp.StatusCode, "%s: %s", tc.note, out)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), tc.note)
		require.Equal(t, strconv.Itoa(len(out)), resp.Header.Get("Content-Length"), tc.note)
		var compact, indented bytes.Buffer
		require.NoError(t, json.Compact(&compact, out), tc.note)
		require.NoError(t, json.Indent(&indented, compact.Bytes(), "", "  "), tc.note)
		indented.WriteByte('\n')
		require.Equal(t, indented.String(), string(out), "%s: indented as policycheck eval prints", tc.note)
	}
	_, out := rs.post(t, "/v1/decide", []byte(`{"history": [], "<b>": 1}`))
	require.Contains(t, string(out), `"\"<b>\" is not a member`)
}
