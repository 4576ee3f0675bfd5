package mcpinterop_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/mcpinterop"
)

// The principals of the scripted session's token file.
const (
	aliceToken    = "alice-token-0123456789abcdef"
	bobToken      = "bob-token-0123456789abcdef"
	operatorToken = "operator-token-0123456789abcdef"
)

// hiddenTools are tools the upstreams list that the session's registry
// does not map: the gateway never lists them and refuses them without
// naming them.
var hiddenTools = []string{"get-env", "get-sum", "edit_file", "delete_entities", "search_nodes"}

// The steps of the scripted session, by index, so that the assertions
// read as the script does.
const (
	stepList = iota
	stepHidden
	stepNonexistent
	stepBeforeSearch
	stepBeforeLoad
	stepSearch
	stepRevealed
	stepListAgain
	stepDenied
	stepApproved
	stepUnapproved
	stepLoad
	stepLoaded
	stepBobList
	stepBobRevealed
	stepBobLoaded
	stepEcho
)

// sharedHandle is the session handle alice and bob both send in _meta:
// on 2026-07-28, which has no Mcp-Session-Id, it names the session; the
// principal still keeps their sessions apart.
var sharedHandle = map[string]any{"policycheck/session": "the-same-handle"}

// sessionScript is the scripted session of issue 45 item 8, against the
// gateway at url, with files under root: alice lists (hidden tools
// absent, meta-tools present), calls a hidden tool (refused exactly as a
// tool no upstream has: nothing tells it exists), a deferred one before
// any search and a deferred capability's before its load (refused),
// searches,
// calls the revealed tool (it executes on the upstream), is denied by the
// operator's rule, has a call approved by elicitation (the client
// accepts), has the same call refused on a connection that cannot be
// asked, loads a capability and calls its tool; then bob, another
// principal, sees nothing of alice's session, though he sends the session
// handle she sends.
func sessionScript(url, root string) mcpinterop.Script {
	return mcpinterop.Script{
		Connections: map[string]mcpinterop.Connection{
			"alice":        {URL: url, Token: aliceToken, Elicit: "accept", Meta: sharedHandle},
			"alice-no-ask": {URL: url, Token: aliceToken},
			"bob":          {URL: url, Token: bobToken, Elicit: "accept", Meta: sharedHandle},
		},
		Steps: []mcpinterop.Step{
			stepList:         {Connection: "alice", Op: "list"},
			stepHidden:       {Connection: "alice", Op: "call", Name: "get-env"},
			stepNonexistent:  {Connection: "alice", Op: "call", Name: "no-such-tool"},
			stepBeforeSearch: {Connection: "alice", Op: "call", Name: "read_graph"},
			stepBeforeLoad: {Connection: "alice", Op: "call", Name: "create_entities", Arguments: map[string]any{"entities": []any{
				map[string]any{"name": "early", "entityType": "component", "observations": []any{"before the load"}}}}},
			stepSearch:    {Connection: "alice", Op: "call", Name: "search_tools", Arguments: map[string]any{"queries": []any{"knowledge graph"}}},
			stepRevealed:  {Connection: "alice", Op: "call", Name: "read_graph"},
			stepListAgain: {Connection: "alice", Op: "list"},
			stepDenied: {Connection: "alice", Op: "call", Name: "move_file", Arguments: map[string]any{
				"source": filepath.Join(root, "a.txt"), "destination": filepath.Join(root, "b.txt")}},
			stepApproved: {Connection: "alice", Op: "call", Name: "write_file", Arguments: map[string]any{
				"path": filepath.Join(root, "approved.txt"), "content": "approved by a person"}},
			stepUnapproved: {Connection: "alice-no-ask", Op: "call", Name: "write_file", Arguments: map[string]any{
				"path": filepath.Join(root, "unapproved.txt"), "content": "nobody approved this"}},
			stepLoad: {Connection: "alice", Op: "call", Name: "load_capability", Arguments: map[string]any{"id": "notes"}},
			stepLoaded: {Connection: "alice", Op: "call", Name: "create_entities", Arguments: map[string]any{"entities": []any{
				map[string]any{"name": "gateway", "entityType": "component", "observations": []any{"decides every call"}}}}},
			stepBobList:     {Connection: "bob", Op: "list"},
			stepBobRevealed: {Connection: "bob", Op: "call", Name: "read_graph"},
			stepBobLoaded: {Connection: "bob", Op: "call", Name: "create_entities", Arguments: map[string]any{"entities": []any{
				map[string]any{"name": "intruder", "entityType": "component", "observations": []any{"should not be here"}}}}},
			stepEcho: {Connection: "bob", Op: "call", Name: "echo", Arguments: map[string]any{"message": "bob was here"}},
		},
	}
}

// sessionRegistry is the scripted session's registry.
func sessionRegistry() string {
	return filepath.Join(mcpinterop.Here(), "testdata", "session", "registry.yaml")
}

// startSessionGateway starts the gateway in front of the three npm
// reference servers, with the session's registry, policy and token file
// (alice, bob, and an operator who may read histories), its decision log
// written to decisionLog; files are served under root, the memory server
// keeps its graph in memoryFile.
func startSessionGateway(t *testing.T, deps, root, memoryFile, decisionLog string) *gatewayProc {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	require.NoError(t, os.WriteFile(tokens, []byte(`{"tokens": [
		{"token": "`+aliceToken+`", "principal": "alice"},
		{"token": "`+bobToken+`", "principal": "bob"},
		{"token": "`+operatorToken+`", "principal": "ops", "operator": true}
	]}`), 0o600))
	here := mcpinterop.Here()
	return startGateway(t, policycheckBin(t),
		"--decision-log", decisionLog,
		"--registry", sessionRegistry(),
		"--policy", filepath.Join(here, "testdata", "session", "policy"),
		"--token-file", tokens,
		upstreamFlag("everything", mcpinterop.Upstream(deps, "everything")),
		upstreamFlag("files", mcpinterop.Upstream(deps, "filesystem", root)),
		upstreamFlag("memory", append([]string{"/usr/bin/env", "MEMORY_FILE_PATH=" + memoryFile}, mcpinterop.Upstream(deps, "memory")...)),
	)
}

// assertRefusedQuietly: the call answered isError, and its message names
// none of the tools the session cannot see.
func assertRefusedQuietly(t *testing.T, r mcpinterop.StepResult, what string, unseen ...string) {
	t.Helper()
	require.Empty(t, r.Error, "%s: a tool error, not a protocol error", what)
	require.NotNil(t, r.Result, what)
	assert.True(t, r.Result.IsError, "%s: isError (%s)", what, r.Result.Text())
	text := r.Result.Text()
	assert.NotEmpty(t, text, "%s: the model-facing message", what)
	for _, name := range unseen {
		assert.NotContains(t, text, name, "%s: the message names a tool the session cannot see", what)
	}
}

// assertExecuted: the call reached the upstream and it answered without
// error.
func assertExecuted(t *testing.T, r mcpinterop.StepResult, what string) {
	t.Helper()
	require.Empty(t, r.Error, what)
	require.NotNil(t, r.Result, what)
	require.False(t, r.Result.IsError, "%s: %s", what, r.Result.Text())
}

// TestScriptedSessionThroughGateway: the Go SDK's client and the
// TypeScript SDK's client each drive the scripted session (sessionScript)
// through `policycheck gateway` in front of server-everything,
// server-filesystem and server-memory over stdio, and see the same
// outcomes.
func TestScriptedSessionThroughGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway in front of the npm reference servers")
	}
	deps := mcpinterop.Deps(t)
	for _, client := range clients {
		t.Run(client.name, func(t *testing.T) {
			root := t.TempDir()
			memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
			require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("stays put"), 0o600))
			decisionLog := filepath.Join(t.TempDir(), "decisions.jsonl")
			gw := startSessionGateway(t, deps, root, memoryFile, decisionLog)
			script := sessionScript(gw.URL, root)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := client.run(ctx, deps, script)
			require.NoError(t, err)
			require.Len(t, res, len(script.Steps))
			checkSession(t, client, res, root, memoryFile)
			checkHistories(t, gw, decisionLog, client.endsSessions())
		})
	}
}

// checkSession asserts the scripted session's outcomes, whichever client
// ran it.
func checkSession(t *testing.T, client client, res []mcpinterop.StepResult, root, memoryFile string) {
	t.Helper()
	want := client.protocol
	if want == "" {
		want = "2026-07-28"
	}
	for i, r := range res {
		assert.Equal(t, want, r.Protocol, "step %d: the protocol version negotiated", i)
	}
	// The list: what the registry advertises, the meta-tools, and none of
	// the hidden, deferred or not-yet-loaded tools.
	require.Empty(t, res[stepList].Error)
	listed := res[stepList].Names()
	assert.Subset(t, listed, []string{"echo", "list_directory", "read_text_file", "move_file", "write_file", "search_tools", "load_capability"})
	for _, name := range append(slices.Clone(hiddenTools), "read_graph", "create_entities") {
		assert.NotContains(t, listed, name, "the first list")
	}
	for _, tool := range res[stepList].Tools {
		for _, name := range hiddenTools {
			assert.NotContains(t, tool.Description, name, "%s's description names a hidden tool", tool.Name)
		}
	}

	// A hidden tool: refused as unknown, in the very words a tool no
	// upstream has gets (the message says back the name the client sent,
	// as pydantic-ai's does, and nothing else of it: not that an upstream
	// serves it, not its description), naming no other hidden tool.
	assertRefusedQuietly(t, res[stepHidden], "the hidden get-env", hiddenTools[1:]...)
	assertRefusedQuietly(t, res[stepNonexistent], "a tool no upstream has", hiddenTools...)
	assert.Equal(t, res[stepNonexistent].Result.Text(),
		strings.ReplaceAll(res[stepHidden].Result.Text(), "get-env", "no-such-tool"),
		"a hidden tool's refusal tells it from a tool that does not exist")
	// A deferred tool before any search, a deferred capability's tool
	// before its load: refused, the file and the graph untouched.
	assertRefusedQuietly(t, res[stepBeforeSearch], "read_graph before the search", hiddenTools...)
	assertRefusedQuietly(t, res[stepBeforeLoad], "create_entities before the load", hiddenTools...)

	// The search reveals read_graph, which then executes on the upstream.
	assertExecuted(t, res[stepSearch], "search_tools")
	assert.Contains(t, res[stepSearch].Result.Text(), "read_graph", "the search's return")
	assertExecuted(t, res[stepRevealed], "read_graph after the search")
	assert.Contains(t, res[stepRevealed].Result.Text(), "entities", "the memory server's graph")
	require.Empty(t, res[stepListAgain].Error)
	assert.Contains(t, res[stepListAgain].Names(), "read_graph", "the list after the search")
	// A client on a session hears notifications/tools/list_changed after
	// the search and after the load (the count is taken at the step after
	// the notification arrives: the one after the search or later).
	if !stateless(want) {
		heard := 0
		for _, r := range res[stepRevealed:stepBobList] {
			if r.Connection == "alice" {
				heard += r.ListChanged
			}
		}
		assert.GreaterOrEqual(t, heard, 1, "list_changed after the search and the load")
	}

	// The operator's rule denies move_file: the policy's message, and the
	// file stays where it was.
	assertRefusedQuietly(t, res[stepDenied], "move_file", hiddenTools...)
	assert.Contains(t, res[stepDenied].Result.Text(), "Files cannot be moved here")
	assert.FileExists(t, filepath.Join(root, "a.txt"))
	assert.NoFileExists(t, filepath.Join(root, "b.txt"))

	// write_file requires approval: the client that declared elicitation
	// is asked once (the tool and its arguments), accepts, and the call
	// executes.
	assertExecuted(t, res[stepApproved], "write_file approved by elicitation")
	require.Len(t, res[stepApproved].Elicitations, 1, "one elicitation request")
	asked := res[stepApproved].Elicitations[0].Message
	assert.Contains(t, asked, "write_file", "the elicitation names the tool")
	assert.Contains(t, asked, "approved.txt", "the elicitation shows the arguments")
	written, err := os.ReadFile(filepath.Join(root, "approved.txt"))
	require.NoError(t, err)
	assert.Equal(t, "approved by a person", string(written))
	// The same tool on a connection that cannot be asked: refused, saying
	// a person must approve; nothing written.
	assertRefusedQuietly(t, res[stepUnapproved], "write_file with no elicitation", hiddenTools...)
	assert.Empty(t, res[stepUnapproved].Elicitations)
	assert.Contains(t, strings.ToLower(res[stepUnapproved].Result.Text()), "approv")
	assert.NoFileExists(t, filepath.Join(root, "unapproved.txt"))

	// load_capability("notes") makes create_entities callable.
	assertExecuted(t, res[stepLoad], "load_capability")
	assertExecuted(t, res[stepLoaded], "create_entities after the load")
	graph, err := os.ReadFile(memoryFile)
	require.NoError(t, err)
	assert.Contains(t, string(graph), "decides every call")
	assert.NotContains(t, string(graph), "before the load")

	// bob sees nothing of alice's session: not the tool her search
	// revealed, not the capability she loaded.
	require.Empty(t, res[stepBobList].Error)
	assert.Equal(t, res[stepList].Names(), res[stepBobList].Names(), "bob's list is alice's first")
	assert.NotContains(t, res[stepBobList].Names(), "read_graph", "bob's list")
	assert.NotContains(t, res[stepBobList].Names(), "create_entities", "bob's list")
	// Bob's calls of them are refused in the words alice's were before
	// her search and her load.
	assertRefusedQuietly(t, res[stepBobRevealed], "bob's read_graph", hiddenTools...)
	assert.Equal(t, res[stepBeforeSearch].Result.Text(), res[stepBobRevealed].Result.Text(), "bob's read_graph")
	assertRefusedQuietly(t, res[stepBobLoaded], "bob's create_entities", hiddenTools...)
	assert.Equal(t, res[stepBeforeLoad].Result.Text(), res[stepBobLoaded].Result.Text(), "bob's create_entities")
	graph, err = os.ReadFile(memoryFile)
	require.NoError(t, err)
	assert.NotContains(t, string(graph), "intruder")
	assertExecuted(t, res[stepEcho], "bob's echo")
	assert.Contains(t, res[stepEcho].Result.Text(), "bob was here")
}

// TestGatewayOverStdio: a desktop client runs `policycheck gateway
// --stdio` as its MCP server's command. Both SDKs' clients, over stdio,
// list (hidden and deferred tools absent, the meta-tools present), are
// refused a hidden tool, search, call the revealed tool on the upstream,
// and have a call approved by elicitation.
func TestGatewayOverStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway in front of the npm reference servers")
	}
	deps := mcpinterop.Deps(t)
	bin := policycheckBin(t)
	here := mcpinterop.Here()
	for _, client := range []client{clients[0], clients[len(clients)-1]} {
		t.Run(client.name, func(t *testing.T) {
			root := t.TempDir()
			memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
			command := []string{bin, "gateway", "--stdio",
				"--registry", filepath.Join(here, "testdata", "session", "registry.yaml"),
				"--policy", filepath.Join(here, "testdata", "session", "policy"),
				upstreamFlag("everything", mcpinterop.Upstream(deps, "everything")),
				upstreamFlag("files", mcpinterop.Upstream(deps, "filesystem", root)),
				upstreamFlag("memory", append([]string{"/usr/bin/env", "MEMORY_FILE_PATH=" + memoryFile}, mcpinterop.Upstream(deps, "memory")...)),
			}
			script := mcpinterop.Script{
				Connections: map[string]mcpinterop.Connection{"desktop": {Command: command, Elicit: "accept"}},
				Steps: []mcpinterop.Step{
					{Connection: "desktop", Op: "list"},
					{Connection: "desktop", Op: "call", Name: "get-env"},
					{Connection: "desktop", Op: "call", Name: "search_tools", Arguments: map[string]any{"queries": []any{"knowledge graph"}}},
					{Connection: "desktop", Op: "call", Name: "read_graph"},
					{Connection: "desktop", Op: "call", Name: "write_file", Arguments: map[string]any{
						"path": filepath.Join(root, "desktop.txt"), "content": "approved on the desktop"}},
				},
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := client.run(ctx, deps, script)
			require.NoError(t, err)
			require.Len(t, res, len(script.Steps))
			require.Empty(t, res[0].Error)
			assert.Subset(t, res[0].Names(), []string{"echo", "write_file", "search_tools", "load_capability"})
			for _, name := range append(slices.Clone(hiddenTools), "read_graph", "create_entities") {
				assert.NotContains(t, res[0].Names(), name, "the list")
			}
			assertRefusedQuietly(t, res[1], "the hidden get-env", hiddenTools[1:]...)
			assertExecuted(t, res[2], "search_tools")
			assert.Contains(t, res[2].Result.Text(), "read_graph")
			assertExecuted(t, res[3], "read_graph after the search")
			assertExecuted(t, res[4], "write_file approved by elicitation")
			assert.Len(t, res[4].Elicitations, 1)
			written, err := os.ReadFile(filepath.Join(root, "desktop.txt"))
			require.NoError(t, err)
			assert.Equal(t, "approved on the desktop", string(written))
		})
	}
}

// endsSessions says the client ends its MCP sessions when the script is
// done: the Go SDK's client sends DELETE with its Mcp-Session-Id when it
// closes (the TypeScript SDK's client does not unless asked, and a
// stateless version has no MCP session).
func (c client) endsSessions() bool {
	return strings.HasPrefix(c.name, "go-sdk") && c.protocol != "" && !stateless(c.protocol)
}

// checkHistories: the histories the gateway wrote from what the real
// upstreams answered are pydantic-ai histories the rest of policycheck
// reads. Each session in the decision log is served to the operator
// (GET /v1/sessions/{id}/history) and `policycheck facts` derives its
// facts: alice's session has read_graph discovered (by her search) and
// notes loaded, bob's neither, and his history holds server-everything's
// echo. When the client ended its MCP sessions (ended), the gateway
// dropped the session named by one (alice-no-ask's, which sends no
// handle): its history answers 404 (docs/gateway.md, "A session's
// life"); the sessions named by the handle in _meta outlive them.
func checkHistories(t *testing.T, gw *gatewayProc, decisionLog string, ended bool) {
	t.Helper()
	raw, err := os.ReadFile(decisionLog)
	require.NoError(t, err)
	sessions := map[string]string{} // session id -> principal
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var entry struct {
			Session   string `json:"session"`
			Principal string `json:"principal"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
		require.NotEmpty(t, entry.Session, line)
		sessions[entry.Session] = entry.Principal
	}
	var aliceSearched, bobEchoed bool
	dropped := 0
	for id, principal := range sessions {
		req, err := http.NewRequest(http.MethodGet, gw.Base+"/v1/sessions/"+id+"/history", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		history, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		if ended && resp.StatusCode == http.StatusNotFound {
			dropped++
			continue
		}
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", id, history)
		path := filepath.Join(t.TempDir(), "history.json")
		require.NoError(t, os.WriteFile(path, history, 0o600))
		cmd := exec.Command(policycheckBin(t), "facts", "--registry", sessionRegistry(), "--history", path)
		out, err := cmd.Output()
		require.NoError(t, err, "policycheck facts on %s's session %s: %s", principal, id, history)
		var doc struct {
			Facts struct {
				Discovered         []string `json:"discovered"`
				ActiveCapabilities []string `json:"active_capabilities"`
			} `json:"facts"`
		}
		require.NoError(t, json.Unmarshal(out, &doc), "%s", out)
		facts := doc.Facts
		switch principal {
		case "alice":
			if slices.Contains(facts.Discovered, "read_graph") {
				aliceSearched = true
				assert.Contains(t, facts.ActiveCapabilities, "notes", "alice's session that searched also loaded notes")
			}
		case "bob":
			assert.NotContains(t, facts.Discovered, "read_graph", "bob's session")
			assert.NotContains(t, facts.ActiveCapabilities, "notes", "bob's session")
			if strings.Contains(string(history), "Echo: bob was here") {
				bobEchoed = true
			}
		}
	}
	if ended {
		assert.Equal(t, 1, dropped, "sessions dropped when the client ended its MCP sessions: alice-no-ask's")
	}
	assert.True(t, aliceSearched, "no session of alice's has read_graph discovered")
	assert.True(t, bobEchoed, "no session of bob's holds the upstream's echo")
}
