package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bundleplugin "github.com/open-policy-agent/opa/v1/plugins/bundle"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// openAPI is docs/openapi.yaml, read for the tests that hold it to the
// server.
type openAPI struct {
	url      string // where the document is, as a file URL its references resolve against
	doc      map[string]any
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
}

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "docs", "openapi.yaml"))
	require.NoError(t, err)
	var y any
	require.NoError(t, yaml.Unmarshal(raw, &y))
	// A null is a slip of YAML's flow style: a comma in an unquoted
	// {description: a, b} makes "b" a key with no value.
	requireNoNull(t, y, "")
	js, err := json.Marshal(y)
	require.NoError(t, err, "docs/openapi.yaml must be JSON-compatible YAML (string keys)")
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	require.NoError(t, err)
	abs, err := filepath.Abs(filepath.Join("..", "docs", "openapi.yaml"))
	require.NoError(t, err)
	url := (&neturl.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// The history and registry schemas are referred to by their paths
	// beside the document (../loader/schema/), which the compiler reads.
	require.NoError(t, c.AddResource(url, doc))
	m, ok := doc.(map[string]any)
	require.True(t, ok)
	require.Equal(t, "3.1.0", m["openapi"])
	return &openAPI{url: url, doc: m, compiler: c, schemas: map[string]*jsonschema.Schema{}}
}

// operation returns the operation of method on path (a template such as
// /v1/runs/{id}/decide), or nil.
func (o *openAPI) operation(path, method string) map[string]any {
	p, _ := o.doc["paths"].(map[string]any)[path].(map[string]any)
	op, _ := p[strings.ToLower(method)].(map[string]any)
	return op
}

// responseSchema compiles the schema of the answer to method on path with
// status, failing the test when the document does not declare that
// status; nil when the answer has no body.
func (o *openAPI) responseSchema(t *testing.T, path, method string, status int) *jsonschema.Schema {
	t.Helper()
	op := o.operation(path, method)
	code := strconv.Itoa(status)
	if op == nil && status == http.StatusMethodNotAllowed {
		// A method the path does not list: its answer is described once.
		op = map[string]any{"responses": map[string]any{code: map[string]any{"$ref": "#/components/responses/MethodNotAllowed"}}}
	}
	require.NotNil(t, op, "%s %s is not in docs/openapi.yaml", method, path)
	resp, ok := op["responses"].(map[string]any)[code].(map[string]any)
	require.True(t, ok, "docs/openapi.yaml does not declare %d for %s %s", status, method, path)
	loc := "#/paths/" + pointerEscape(path) + "/" + strings.ToLower(method) + "/responses/" + code
	if ref, ok := resp["$ref"].(string); ok {
		loc = ref
		resp = o.doc["components"].(map[string]any)["responses"].(map[string]any)[strings.TrimPrefix(ref, "#/components/responses/")].(map[string]any)
	}
	content, ok := resp["content"].(map[string]any)
	if !ok {
		return nil
	}
	if _, ok := content["application/json"]; !ok {
		return nil
	}
	url := o.url + loc + "/content/application~1json/schema"
	if s, ok := o.schemas[url]; ok {
		return s
	}
	s, err := o.compiler.Compile(url)
	require.NoError(t, err, url)
	o.schemas[url] = s
	return s
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// requestSchema compiles the JSON schema of method's body on path.
func (o *openAPI) requestSchema(t *testing.T, path, method string) *jsonschema.Schema {
	t.Helper()
	url := o.url + "#/paths/" + pointerEscape(path) + "/" + strings.ToLower(method) + "/requestBody/content/application~1json/schema"
	s, err := o.compiler.Compile(url)
	require.NoError(t, err, url)
	return s
}

// exchange is one request of the corpus and the server's answer.
type exchange struct {
	template, method, target string
	body                     []byte
	header                   []string
	status                   int
	answer                   []byte
	contentType              string
}

// TestOpenAPIDescribesTheAnswers: every answer the server gives to a
// corpus of requests (each shipped example history on every endpoint,
// the shared conformance cases, approvals, runs, and an error of every
// kind the server answers without a network fault) has a status the
// document declares for its operation and a body its schema accepts;
// every body the corpus sends that the server decides is one the
// request schema accepts.
func TestOpenAPIDescribesTheAnswers(t *testing.T) {
	spec := loadOpenAPI(t)
	reg := filepath.Join("..", "examples", "registry.yaml")
	regBytes, err := os.ReadFile(reg)
	require.NoError(t, err)
	parsed, err := loader.ParseRegistry(reg, regBytes)
	require.NoError(t, err)
	withPolicies := withEngine(engine.PolicyPaths(filepath.Join("..", "examples", "policies")))
	main, err := newServer(withRegistry(parsed), withPolicies)
	require.NoError(t, err)
	noRegistry, err := newServer(withPolicies)
	require.NoError(t, err)
	guarded, err := newServer(withRegistry(parsed), withToken("s3cret"), withMaxBody(4<<10))
	require.NoError(t, err)
	// A log-only package: its hide and deny are reported (would_hide,
	// would_deny), not enforced.
	observed, err := newServer(withRegistry(parsed), withEngine(engine.PolicyPaths(filepath.Join("..", "examples", "policies")),
		engine.Modules(engine.Source{File: "observe.rego", Text: `# METADATA
# title: Observed
# custom:
#   policycheck: {enforcement: log_only}
package policycheck.rules.observe

deny contains {"reason": "watched", "message": "Watched."} if input.call.tool != ""

hide contains "search_docs"
`})))
	require.NoError(t, err)

	var corpus []*exchange
	add := func(h http.Handler, template, method, target string, body []byte, header ...string) *exchange {
		req := httptest.NewRequest(method, target, bytes.NewReader(body))
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		x := &exchange{template: template, method: method, target: target, body: body, header: header,
			status: rec.Code, answer: rec.Body.Bytes(), contentType: rec.Header().Get("Content-Type")}
		corpus = append(corpus, x)
		return x
	}
	h := main.Handler()
	histories, err := filepath.Glob(filepath.Join("..", "examples", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, histories)
	ctx, err := os.ReadFile(filepath.Join("..", "examples", "context", "admin.json"))
	require.NoError(t, err)
	for i, f := range histories {
		history, err := os.ReadFile(f)
		require.NoError(t, err)
		body := []byte(`{"history": ` + string(history) + `, "context": ` + string(ctx) + `}`)
		add(h, "/v1/decide", http.MethodPost, "/v1/decide", body)
		add(h, "/v1/explain", http.MethodPost, "/v1/explain", body)
		add(h, "/v1/facts", http.MethodPost, "/v1/facts", body)
		add(h, "/v1/facts", http.MethodPost, "/v1/facts?format=input", body)
		run := fmt.Sprintf("/v1/runs/ex%d", i)
		add(h, "/v1/runs/{id}/decide", http.MethodPost, run+"/decide", []byte(`{"offset": 0, "messages": `+string(history)+`}`))
		add(h, "/v1/runs/{id}/decide", http.MethodPost, run+"/decide", []byte(`{"offset": 0, "messages": `+string(history)+`}`))
		add(h, "/v1/runs/{id}", http.MethodDelete, run, nil)
		add(observed.Handler(), "/v1/decide", http.MethodPost, "/v1/decide", body)
	}
	// Labels: the integrity example explains its refused calls with the
	// flows' labels and the window (a tool return's and a provider's web
	// search's).
	intReg, err := loader.ReadRegistry(filepath.Join("..", "examples", "integrity", "registry.yaml"))
	require.NoError(t, err)
	labelled, err := newServer(withRegistry(intReg), withEngine(engine.PolicyPaths(filepath.Join("..", "examples", "policies", "integrity"))))
	require.NoError(t, err)
	for _, name := range []string{"pay-bill", "web-search"} {
		history, err := os.ReadFile(filepath.Join("..", "examples", "integrity", "histories", name+".json"))
		require.NoError(t, err)
		x := add(labelled.Handler(), "/v1/explain", http.MethodPost, "/v1/explain", []byte(`{"history": `+string(history)+`}`))
		require.Contains(t, string(x.answer), `"window"`, "the corpus holds an explanation with a window")
	}
	// Approvals: the transfer history asks for one; the example answers it.
	transfer, err := os.ReadFile(filepath.Join("..", "examples", "histories", "transfer.json"))
	require.NoError(t, err)
	var approvals struct{ Approvals json.RawMessage }
	raw, err := os.ReadFile(filepath.Join("..", "examples", "approvals", "transfer.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &approvals))
	x := add(h, "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"history": `+string(transfer)+`, "approvals": `+string(approvals.Approvals)+`}`))
	require.Contains(t, string(x.answer), `"approvals"`, "the corpus holds a decision with approvals")
	add(h, "/v1/runs/{id}/decide", http.MethodPost, "/v1/runs/appr/decide", []byte(`{"offset": 0, "messages": `+string(transfer)+`, "approvals": `+string(approvals.Approvals)+`}`))
	// Execution receipts and their keys (--receipt-key).
	signing, err := newServer(withRegistry(parsed), withPolicies, withReceipts(testSigner(t, 1, time.Now)))
	require.NoError(t, err)
	sh := signing.Handler()
	x = add(sh, "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"history": `+string(transfer)+`, "approvals": `+string(approvals.Approvals)+`, "context": `+string(ctx)+`}`))
	require.Contains(t, string(x.answer), `"receipt"`, "the corpus holds a signed decision")
	add(sh, "/v1/runs/{id}/decide", http.MethodPost, "/v1/runs/signed/decide", []byte(`{"offset": 0, "messages": `+string(transfer)+`, "context": `+string(ctx)+`}`))
	require.Equal(t, http.StatusOK, add(sh, "/v1/keys", http.MethodGet, "/v1/keys", nil).status)
	add(sh, "/v1/keys", http.MethodPost, "/v1/keys", nil)

	// Errors of every kind.
	add(h, "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"history": [`))                                // syntax
	add(h, "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"history": [{"kind": "nope", "parts": []}]}`)) // schema
	add(h, "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"history": [], "registry": {"tools": [{"name": 3}]}}`))
	add(h, "/v1/decide", http.MethodPost, "/v1/decide?format=input", []byte(`{"history": []}`))
	add(h, "/v1/facts", http.MethodPost, "/v1/facts?format=yaml", []byte(`{"history": []}`))
	add(h, "/v1/decide", http.MethodGet, "/v1/decide", nil)
	add(h, "/health", http.MethodPost, "/health", nil)
	add(h, "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"history": []}`), "Content-Type", "application/x-yaml")
	add(h, "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"history": []}`), "Content-Encoding", "br")
	add(h, "/v1/runs/{id}/decide", http.MethodPost, "/v1/runs/never/decide", []byte(`{"offset": 3, "messages": []}`))
	add(h, "/v1/runs/{id}/decide", http.MethodPost, "/v1/runs/x/decide", []byte(`{"messages": []}`))
	add(h, "/v1/runs/{id}/decide", http.MethodPost, "/v1/runs/%00/decide", []byte(`{"offset": 0, "messages": []}`))
	add(h, "/v1/runs/{id}", http.MethodDelete, "/v1/runs/%ff", nil)
	add(noRegistry.Handler(), "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"history": []}`))
	g := guarded.Handler()
	add(g, "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"history": []}`))
	add(g, "/metrics", http.MethodGet, "/metrics", nil)
	add(g, "/metrics", http.MethodGet, "/metrics", nil, "Authorization", "Bearer s3cret")
	add(g, "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"history": [], "context": {"x": "`+strings.Repeat("a", 8<<10)+`"}}`), "Authorization", "Bearer s3cret")
	add(h, "/health", http.MethodGet, "/health", nil)
	add(main.DiagnosticHandler(), "/health", http.MethodGet, "/health", nil)
	add(h, "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"history": []}`), "Origin", "https://example.com", "Content-Type", "text/plain")
	add(h, "/health", http.MethodGet, "/health", nil, "Sec-Fetch-Site", "cross-site")
	// /health after a reload refused for what it drops, and after one
	// taken with the drop allowed.
	guardDir := t.TempDir()
	guardFile := filepath.Join(guardDir, "guard.rego")
	require.NoError(t, os.WriteFile(guardFile, []byte(hideRule("get_time")), 0o600))
	reloaded, err := newServer(testReg(t), withEngine(engine.PolicyPaths(guardDir)))
	require.NoError(t, err)
	require.NoError(t, os.Remove(guardFile))
	_, err = reloaded.Reload(context.Background())
	require.Error(t, err)
	require.Contains(t, string(add(reloaded.Handler(), "/health", http.MethodGet, "/health", nil).answer), `"dropped_packages"`)
	_, err = reloaded.Reload(context.Background(), server.AllowDrops())
	require.NoError(t, err)
	add(reloaded.Handler(), "/health", http.MethodGet, "/health", nil)
	// A decision that fails closed (out of time) says why, in errors.
	slow, err := newServer(testReg(t), withTimeout(1), withEngine(engine.Modules(engine.Source{File: "slow.rego", Text: `package policycheck.capabilities.vault

prepare_tools contains t.name if {
	some t in input.tools
	some i in numbers.range(1, 100000000)
	i < 0
}
`})))
	require.NoError(t, err)
	for _, ep := range []string{"/v1/decide", "/v1/explain"} {
		add(slow.Handler(), ep, http.MethodPost, ep, []byte(`{"history": `+testHistory+`}`))
	}

	// Bundles: not ready (503, the bundle and the plugins' states in
	// /health) until the first revision is activated, then ready.
	bs := newBundleServer(t)
	bs.publish(t, "r1", map[string]string{"/vault.rego": filterKeeping("secret_op")})
	bundled := start(t, testReg(t), withOPAConfig(opaConfig(bs.URL, newCollector(t).URL), "test"))
	bh := bundled.srv.Handler()
	x = add(bh, "/health", http.MethodGet, "/health", nil)
	require.Equal(t, http.StatusServiceUnavailable, x.status, string(x.answer))
	add(bh, "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"history": `+testHistory+`}`))
	require.NoError(t, bundleplugin.Lookup(bundled.srv.Manager()).Trigger(context.Background()))
	x = add(bh, "/health", http.MethodGet, "/health", nil)
	require.Equal(t, http.StatusOK, x.status, string(x.answer))
	require.Contains(t, string(x.answer), `"plugins"`)
	require.Contains(t, string(x.answer), `"serving": "r1"`)

	// The shared corpus's histories, each with its own registry.
	t.Run("conformance", func(t *testing.T) {
		for _, c := range conformance.Cases(t) {
			if len(c.Filters) > 0 {
				continue // their filters are Rego the case's test harness writes
			}
			add(h, "/v1/decide", http.MethodPost, "/v1/decide", []byte(`{"registry": `+string(c.Registry)+`, "history": `+string(c.History)+`}`))
		}
	})

	statuses := map[int]int{}
	verdicts := map[string]bool{}
	for _, x := range corpus {
		statuses[x.status]++
		note := fmt.Sprintf("%s %s -> %d: %.300s", x.method, x.target, x.status, x.answer)
		s := spec.responseSchema(t, x.template, x.method, x.status)
		if s == nil {
			if x.template == "/metrics" && x.status == http.StatusOK {
				require.True(t, strings.HasPrefix(x.contentType, "text/plain"), note)
			}
			continue
		}
		require.Equal(t, "application/json", x.contentType, note)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(x.answer))
		require.NoError(t, err, note)
		require.NoError(t, s.Validate(v), note)
		if x.status == http.StatusOK && (x.template == "/v1/decide" || x.template == "/v1/runs/{id}/decide") {
			var d struct{ Calls []struct{ Verdict string } }
			require.NoError(t, json.Unmarshal(x.answer, &d))
			for _, c := range d.Calls {
				verdicts[c.Verdict] = true
			}
			// A body the server decided is one the request schema accepts.
			body, err := jsonschema.UnmarshalJSON(bytes.NewReader(x.body))
			require.NoError(t, err, note)
			require.NoError(t, spec.requestSchema(t, x.template, x.method).Validate(body), note)
		}
	}
	// The optional members of a decision the schema describes appear in
	// the corpus, so that the schema is tried on them.
	for _, key := range []string{`"would_hide"`, `"would_deny"`, `"approvals"`, `"approval"`, `"digest"`, `"dispatch"`, `"retries"`, `"errors"`, `"receipt"`} {
		seen := false
		for _, x := range corpus {
			seen = seen || (x.status == http.StatusOK && x.template != "/v1/facts" && bytes.Contains(x.answer, []byte(key)))
		}
		require.True(t, seen, "no decision of the corpus holds %s", key)
	}
	for _, want := range []int{200, 204, 400, 401, 403, 405, 409, 413, 415, 503} {
		require.Positive(t, statuses[want], "the corpus has a %d answer", want)
	}
	for _, v := range []string{engine.Execute, engine.NotAvailableYet, engine.UnknownTool, engine.Denied, engine.ApprovalRequired} {
		if !verdicts[v] {
			t.Logf("no %s verdict in the corpus", v)
		}
	}
	require.True(t, verdicts[engine.Execute] && verdicts[engine.UnknownTool], "verdicts seen: %v", verdicts)
}

// TestOpenAPIRoutesAndMethods: the document's paths are the server's
// routes (as handlers.go registers them; /debug/ only with --pprof, and
// the catch-all 404, aside), and on each path the server refuses with
// 405 exactly the methods the document does not list.
func TestOpenAPIRoutesAndMethods(t *testing.T) {
	spec := loadOpenAPI(t)
	src, err := os.ReadFile("handlers.go")
	require.NoError(t, err)
	var routes []string
	for _, m := range regexp.MustCompile(`mux\.Handle(?:Func)?\("([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		if m[1] != "/" && m[1] != "/debug/" && !slices.Contains(routes, m[1]) {
			routes = append(routes, m[1])
		}
	}
	var paths []string
	for p := range spec.doc["paths"].(map[string]any) {
		paths = append(paths, p)
	}
	slices.Sort(routes)
	slices.Sort(paths)
	require.Equal(t, routes, paths)

	// With --receipt-key, so that /v1/keys is served.
	srv, err := newServer(testReg(t), withReceipts(testSigner(t, 1, time.Now)))
	require.NoError(t, err)
	h := srv.Handler()
	for _, p := range paths {
		target := strings.ReplaceAll(p, "{id}", "r1")
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(m, target, strings.NewReader(`{"history": []}`)))
			listed := spec.operation(p, m) != nil
			require.Equal(t, !listed, rec.Code == http.StatusMethodNotAllowed, "%s %s -> %d (listed in docs/openapi.yaml: %v)", m, p, rec.Code, listed)
		}
	}
}

// TestOpenAPIRunIDRule: the schema of the RunID parameter accepts
// exactly the ids the server accepts. (An id of invalid UTF-8 is not a
// JSON string, so the schema cannot be asked about one; and JSON Schema
// counts characters, not bytes, so ids over 256 bytes but not 256
// characters are the description's alone.)
func TestOpenAPIRunIDRule(t *testing.T) {
	spec := loadOpenAPI(t)
	schema, err := spec.compiler.Compile(spec.url + "#/components/parameters/RunID/schema")
	require.NoError(t, err)
	srv, err := newServer(testReg(t))
	require.NoError(t, err)
	h := srv.Handler()
	for _, s := range []string{
		"r1", "a b", "été", "日本語", "a/b", "run:1.step?", "#%&*+=~^`|<>[]{}", "\uFFFD", "😀",
		strings.Repeat("a", 256), strings.Repeat("é", 128),
		"", " ", "\x00", "a\x00", "\x1b[2K", "\r", "\n", "\t", "\x7f", "\u0085", "\u00a0", "\u200b", "\u202e", "\u2028", "\ufeff", "\ue000",
		strings.Repeat("a", 257),
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/v1/runs/"+neturl.PathEscape(s), nil))
		if s == "" { // no id at all: no route
			require.Equal(t, http.StatusNotFound, rec.Code)
		} else {
			require.Contains(t, []int{http.StatusNoContent, http.StatusBadRequest}, rec.Code, "%q: %s", s, rec.Body)
		}
		accepted := rec.Code == http.StatusNoContent
		require.Equal(t, accepted, schema.Validate(s) == nil, "%q: the server answers %d, the schema says %v", s, rec.Code, schema.Validate(s))
	}
}

// TestOpenAPIErrorCodes: the document's error codes are the server's
// Code constants, no more and no fewer.
func TestOpenAPIErrorCodes(t *testing.T) {
	spec := loadOpenAPI(t)
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	require.NoError(t, err)
	var codes []string
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, name := range vs.Names {
				if strings.HasPrefix(name.Name, "Code") && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						s, err := strconv.Unquote(lit.Value)
						require.NoError(t, err)
						codes = append(codes, s)
					}
				}
			}
		}
		return true
	})
	require.NotEmpty(t, codes)
	enum := spec.doc["components"].(map[string]any)["schemas"].(map[string]any)["Error"].(map[string]any)["properties"].(map[string]any)["error"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any)
	var listed []string
	for _, c := range enum {
		listed = append(listed, c.(string))
	}
	slices.Sort(codes)
	slices.Sort(listed)
	require.Equal(t, codes, listed)
}

func requireNoNull(t *testing.T, v any, at string) {
	t.Helper()
	switch v := v.(type) {
	case nil:
		t.Fatalf("docs/openapi.yaml: a null at %s (an unquoted comma in a flow mapping?)", at)
	case map[string]any:
		for k, e := range v {
			requireNoNull(t, e, at+"/"+k)
		}
	case []any:
		for i, e := range v {
			requireNoNull(t, e, at+"/"+strconv.Itoa(i))
		}
	}
}
