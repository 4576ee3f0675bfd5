package mcpinterop_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/mcpinterop"
)

// freePort is a loopback port nothing listens on just now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// startEverythingServer runs the Go SDK's conformance everything-server
// on streamable HTTP with sessions (-stateless=false: the scenarios in
// which the server asks the client, sampling and elicitation, need a
// session, as the Go SDK's own scripts/server-conformance.sh runs it),
// and returns its URL.
func startEverythingServer(t *testing.T, bin string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(bin, fmt.Sprintf("-http=127.0.0.1:%d", port), "-stateless=false")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url := fmt.Sprintf("http://localhost:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(t, mcpinterop.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d", port)))
	return url
}

// runConformance runs the suite against url and fails the test when it
// cannot run.
func runConformance(t *testing.T, deps, url string) map[string]mcpinterop.ScenarioResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, log, err := mcpinterop.Conformance(ctx, deps, url, "")
	require.NoError(t, err, "%s", log)
	return res
}

// scenarios is res's scenario names, sorted.
func scenarios(res map[string]mcpinterop.ScenarioResult) []string {
	var out []string
	for name := range res {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// TestConformanceUpstreamAlone: the Go SDK's conformance everything-server,
// with nothing in front of it, passes every server scenario of the
// conformance suite's active suite for 2025-11-25. It is the reference
// the gateway is compared with.
func TestConformanceUpstreamAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance suite")
	}
	deps := mcpinterop.Deps(t)
	url := startEverythingServer(t, mcpinterop.BuildEverythingServer(t))
	res := runConformance(t, deps, url)
	require.NotEmpty(t, res)
	for _, name := range scenarios(res) {
		r := res[name]
		t.Logf("%s: %d passed, %d failed", name, r.Passed, r.Failed)
		require.True(t, r.OK(), "%s: %v", name, r.Failures)
	}
}
