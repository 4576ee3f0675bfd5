package mcpinterop_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/mcpinterop"
	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// TestMain shares one build of policycheck among the package's tests.
func TestMain(m *testing.M) { os.Exit(servetest.Main(m)) }

// gatewayPath is where the gateway serves MCP over streamable HTTP.
const gatewayPath = "/mcp"

// gatewayProc is `policycheck gateway` running in a process of its own.
type gatewayProc struct {
	// URL is the MCP endpoint; Base the server's root.
	URL, Base string
	log       *servetest.Log
}

// Logged is what the gateway wrote on standard error so far.
func (g *gatewayProc) Logged() string { return g.log.String() }

// startGateway runs `bin gateway --addr 127.0.0.1:PORT args...` and
// returns once it answers HTTP. It is killed when the test ends.
func startGateway(t *testing.T, bin string, args ...string) *gatewayProc {
	t.Helper()
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	log := &servetest.Log{}
	cmd := exec.Command(bin, append([]string{"gateway", "--addr", fmt.Sprintf("127.0.0.1:%d", port)}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("the gateway logged:\n%s", log.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- mcpinterop.WaitHTTP(ctx, base+"/health") }()
	select {
	case err := <-ready:
		require.NoError(t, err, "the gateway did not start:\n%s", log.String())
	case err := <-done:
		t.Fatalf("the gateway exited (%v):\n%s", err, log.String())
	}
	return &gatewayProc{URL: base + gatewayPath, Base: base, log: log}
}

// policycheckBin is the policycheck binary the tests run: built from
// this module (once for the package, servetest.Main), or the one
// $MCPINTEROP_POLICYCHECK names (to run these tests against another
// build).
func policycheckBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("MCPINTEROP_POLICYCHECK"); bin != "" {
		return bin
	}
	return servetest.Build(t)
}

// upstreamFlag is --upstream NAME=COMMAND with the command's words
// joined by spaces (the gateway runs it with /bin/sh -c; the paths here
// hold no space).
func upstreamFlag(name string, command []string) string {
	return "--upstream=" + name + "=" + strings.Join(command, " ")
}
