package mcpinterop_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/mcpinterop"
)

// client is an MCP client that runs scripts: the Go SDK's, asking for a
// protocol version, or the TypeScript SDK's.
type client struct {
	name string
	// protocol is the version the client asks for and, here, gets: every
	// server it meets speaks it.
	protocol string
	run      func(ctx context.Context, deps string, s mcpinterop.Script) ([]mcpinterop.StepResult, error)
}

// goClient is the Go SDK's client asking for protocol (its latest when
// empty).
func goClient(name, protocol string) client {
	return client{name, protocol, func(ctx context.Context, _ string, s mcpinterop.Script) ([]mcpinterop.StepResult, error) {
		if protocol != "" {
			conns := map[string]mcpinterop.Connection{}
			for n, c := range s.Connections {
				c.Protocol = protocol
				conns[n] = c
			}
			s.Connections = conns
		}
		return mcpinterop.RunGo(ctx, s)
	}}
}

// clients are the MCP clients every script runs with: the Go SDK's at
// its latest protocol version (2026-07-28, stateless: no session, no
// notifications, approval by an input-required result) and at the two
// before it (sessions by Mcp-Session-Id, approval by elicitation), and
// the TypeScript SDK's (2025-11-25, its latest).
var clients = []client{
	goClient("go-sdk", ""),
	goClient("go-sdk-2025-11-25", "2025-11-25"),
	goClient("go-sdk-2025-06-18", "2025-06-18"),
	{"typescript-sdk", "2025-11-25", mcpinterop.RunTS},
}

// stateless says the protocol version has no sessions (2026-07-28 and
// later).
func stateless(protocol string) bool { return protocol >= "2026-07-28" }

// TestUpstreamsDirect: with no gateway between them, both clients list
// and call each npm reference server over stdio. It is the baseline the
// gateway's tests stand on: the upstreams, the Node 22 they run on and
// both clients work here as they do through the gateway.
func TestUpstreamsDirect(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the npm reference servers")
	}
	deps := mcpinterop.Deps(t)
	for _, client := range []client{clients[0], clients[len(clients)-1]} {
		t.Run(client.name, func(t *testing.T) {
			root := t.TempDir()
			memory := filepath.Join(t.TempDir(), "memory.jsonl")
			script := mcpinterop.Script{
				Connections: map[string]mcpinterop.Connection{
					"everything": {Command: mcpinterop.Upstream(deps, "everything")},
					"files":      {Command: mcpinterop.Upstream(deps, "filesystem", root)},
					"memory":     {Command: mcpinterop.Upstream(deps, "memory"), Env: map[string]string{"MEMORY_FILE_PATH": memory}},
				},
				Steps: []mcpinterop.Step{
					{Connection: "everything", Op: "list"},
					{Connection: "everything", Op: "call", Name: "echo", Arguments: map[string]any{"message": "hello from " + client.name}},
					{Connection: "files", Op: "list"},
					{Connection: "files", Op: "call", Name: "write_file", Arguments: map[string]any{"path": filepath.Join(root, "note.txt"), "content": "written by " + client.name}},
					{Connection: "files", Op: "call", Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(root, "note.txt")}},
					{Connection: "memory", Op: "list"},
					{Connection: "memory", Op: "call", Name: "create_entities", Arguments: map[string]any{"entities": []any{
						map[string]any{"name": "policycheck", "entityType": "project", "observations": []any{"gates tool calls"}},
					}}},
					{Connection: "memory", Op: "call", Name: "read_graph"},
				},
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := client.run(ctx, deps, script)
			require.NoError(t, err)
			require.Len(t, res, len(script.Steps))
			for i, r := range res {
				require.Empty(t, r.Error, "step %d (%s %s)", i, r.Op, r.Name)
				if r.Result != nil {
					require.False(t, r.Result.IsError, "step %d (%s): %s", i, r.Name, r.Result.Text())
				}
			}
			assert.Subset(t, res[0].Names(), []string{"echo", "get-env", "get-sum"})
			assert.Contains(t, res[1].Result.Text(), "hello from "+client.name)
			assert.Subset(t, res[2].Names(), []string{"read_text_file", "write_file", "move_file", "list_directory"})
			assert.Contains(t, res[4].Result.Text(), "written by "+client.name)
			written, err := os.ReadFile(filepath.Join(root, "note.txt"))
			require.NoError(t, err)
			assert.Equal(t, "written by "+client.name, string(written))
			assert.Subset(t, res[5].Names(), []string{"create_entities", "read_graph", "delete_entities"})
			assert.True(t, strings.Contains(res[7].Result.Text(), "gates tool calls"), "read_graph: %s", res[7].Result.Text())
		})
	}
}
