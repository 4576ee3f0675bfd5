// Package handlertest gives tests the sidecar's HTTP handler in process:
// a server.Server configured as server.DefaultConfig with a registry.
package handlertest

import (
	"net/http"
	"testing"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/server"
)

// Handler returns the handler of a server with server.DefaultConfig and
// the registry reg; the test fails if the server cannot be made.
func Handler(t testing.TB, reg *facts.Registry) http.Handler {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Registry = reg
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv.Handler()
}
