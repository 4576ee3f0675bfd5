package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

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
	srv, err := server.New(server.Registry(reg))
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
