package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// A server decides a history sent over HTTP; Serve would listen on a
// port, Handler plugs into an http.Server of your own.
func ExampleServer_Handler() {
	reg, err := loader.ParseRegistry("registry.yaml", []byte(`
capabilities:
  - id: vault
    defer_loading: true
tools:
  - name: get_time
  - name: secret_op
    capability: vault
`))
	if err != nil {
		panic(err)
	}
	cfg := server.DefaultConfig()
	cfg.Registry = reg
	srv, err := server.New(cfg)
	if err != nil {
		panic(err)
	}
	body := `{"history": [
		{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "read the secret"}]},
		{"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "secret_op", "args": {}, "tool_call_id": "c1"}]}
	]}`
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/decide", strings.NewReader(body)))
	var d struct {
		Available []string `json:"available"`
		Calls     []struct {
			Tool, Verdict, Message string
		} `json:"calls"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
		panic(err)
	}
	fmt.Println(rec.Code, d.Available)
	fmt.Println(d.Calls[0].Tool, d.Calls[0].Verdict)
	// Output:
	// 200 [get_time load_capability]
	// secret_op not_available_yet
}

// A Config starts from DefaultConfig, whose values are the defaults of
// policycheck serve's flags; Validate reports every field New would
// refuse, each a *server.FieldError.
func ExampleConfig() {
	cfg := server.DefaultConfig()
	fmt.Println(cfg.MaxBody, cfg.Timeout, cfg.Runs, cfg.PrefixCacheBytes)
	cfg.Timeout = 0
	cfg.Runs = -1
	cfg.MaskContext = []string{"user/email"}
	fmt.Println(cfg.Validate())
	_, err := server.New(cfg)
	var fe *server.FieldError
	fmt.Println(errors.As(err, &fe), fe.Field)
	// Output:
	// 67108864 5s 10000 268435456
	// Runs must not be negative, not -1
	// Timeout must be positive, not 0s
	// MaskContext "user/email": a JSON pointer is empty (the whole context) or begins with '/'
	// true Runs
}

// Config.Debug mounts a handler of your own under /debug/, behind the
// bearer token (Config.Token) like every endpoint but /health
// (policycheck serve --pprof mounts net/http/pprof's handlers there).
func ExampleConfig_debug() {
	cfg := server.DefaultConfig()
	cfg.Token = "s3cret"
	cfg.Debug = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "debug", r.URL.Path)
	})
	srv, err := server.New(cfg)
	if err != nil {
		panic(err)
	}
	for _, token := range []string{"", "s3cret"} {
		req := httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			fmt.Println(rec.Code, rec.Header().Get("WWW-Authenticate"))
			continue
		}
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// 401 Bearer realm="policycheck"
	// 200 debug /debug/pprof/heap
}

// DiagnosticHandler answers health and metrics, and nothing else: an
// address for probes and scrapers that must not reach the decision API
// (Serve serves it on its diagnostic listeners).
func ExampleServer_DiagnosticHandler() {
	srv, err := server.New(server.DefaultConfig())
	if err != nil {
		panic(err)
	}
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/health"},
		{http.MethodGet, "/metrics"},
		{http.MethodPost, "/v1/decide"},
	} {
		rec := httptest.NewRecorder()
		srv.DiagnosticHandler().ServeHTTP(rec, httptest.NewRequest(r.method, r.path, strings.NewReader(`{"history": []}`)))
		fmt.Println(r.method, r.path, rec.Code)
	}
	// Output:
	// GET /health 200
	// GET /metrics 200
	// POST /v1/decide 404
}

// Reload takes in policy files changed since the server read them: the
// requests that follow are decided by the new policies.
func ExampleServer_Reload() {
	dir, err := os.MkdirTemp("", "policies")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	rule := filepath.Join(dir, "hide.rego")
	hide := func(tool string) {
		src := "package policycheck.rules.example\n\nhide contains \"" + tool + "\"\n"
		if err := os.WriteFile(rule, []byte(src), 0o600); err != nil {
			panic(err)
		}
	}
	reg, err := loader.ParseRegistry("registry.yaml", []byte("tools:\n  - name: get_time\n  - name: get_weather\n"))
	if err != nil {
		panic(err)
	}
	hide("get_time")
	cfg := server.DefaultConfig()
	cfg.Registry = reg
	cfg.Policies = []string{dir}
	srv, err := server.New(cfg)
	if err != nil {
		panic(err)
	}
	available := func() string {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/decide", strings.NewReader(`{"history": []}`)))
		var d struct{ Available []string }
		if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
			panic(err)
		}
		return strings.Join(d.Available, " ")
	}
	fmt.Println(available())
	hide("get_weather")
	swapped, err := srv.Reload(context.Background())
	fmt.Println(swapped, err)
	fmt.Println(available())
	// Output:
	// get_weather
	// true <nil>
	// get_time
}

// ExampleReplaceRegistry swaps in a new configured registry: requests
// that carry none decide with it from then on.
func ExampleReplaceRegistry() {
	parse := func(yaml string) *facts.Registry {
		reg, err := loader.ParseRegistry("registry.yaml", []byte(yaml))
		if err != nil {
			panic(err)
		}
		return reg
	}
	cfg := server.DefaultConfig()
	cfg.Registry = parse("tools:\n  - name: get_time\n")
	srv, err := server.New(cfg)
	if err != nil {
		panic(err)
	}
	available := func() string {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/decide", strings.NewReader(`{"history": []}`)))
		var d struct{ Available []string }
		if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
			panic(err)
		}
		return strings.Join(d.Available, " ")
	}
	fmt.Println(available())
	swapped, err := srv.Reload(context.Background(), server.ReplaceRegistry(parse("tools:\n  - name: get_time\n  - name: get_weather\n")))
	fmt.Println(swapped, err)
	fmt.Println(available())
	// Output:
	// get_time
	// true <nil>
	// get_time get_weather
}
