package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Upstream is one MCP server behind the gateway.
type Upstream struct {
	// Name is the name registry tools use for it (their upstream field or
	// NAME/ prefix): a letter or digit, then up to 63 letters, digits,
	// '_', '.' or '-'.
	Name string
	// Command, for a stdio server, is run by /bin/sh -c (as exec COMMAND),
	// again after every crash.
	Command string
	// URL, for a streamable HTTP server, is its endpoint.
	URL string
	// Transport, when set, makes the transport of each connection instead
	// (embedders, tests: mcp.NewInMemoryTransports).
	Transport func() (mcp.Transport, error)
}

var upstreamName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ParseUpstream reads --upstream NAME=COMMAND or NAME=URL (http:// or
// https://).
func ParseUpstream(s string) (Upstream, error) {
	name, target, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(target) == "" {
		return Upstream{}, fmt.Errorf("--upstream %q: want NAME=COMMAND or NAME=URL", s)
	}
	if !upstreamName.MatchString(name) {
		return Upstream{}, fmt.Errorf("--upstream %q: the name %q is not a letter or digit followed by up to 63 letters, digits, '_', '.' or '-'", s, name)
	}
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		return Upstream{Name: name, URL: target}, nil
	}
	return Upstream{Name: name, Command: target}, nil
}

// Upstream states, as /health shows them.
const (
	StateStarting = "starting"
	StateUp       = "up"
	StateDown     = "down"
)

// upstream is the gateway's live connection to one Upstream, restarted
// with backoff when it ends.
type upstream struct {
	spec Upstream
	log  *slog.Logger
	// onList, set before supervise, is called after a listing that
	// changed the tool set an earlier one read.
	onList func()

	mu       sync.Mutex
	state    string
	sess     *mcp.ClientSession
	tools    map[string]*mcp.Tool
	lastErr  string
	restarts int
	listed   chan struct{} // closed after the first listing
	once     sync.Once
}

// Backoff of restarts: from minBackoff, doubling, at most maxBackoff; a
// connection that stayed up for maxBackoff starts again from minBackoff.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
)

func newUpstream(spec Upstream, log *slog.Logger) *upstream {
	return &upstream{spec: spec, log: log, state: StateStarting, listed: make(chan struct{})}
}

func (u *upstream) transport() (mcp.Transport, error) {
	switch {
	case u.spec.Transport != nil:
		return u.spec.Transport()
	case u.spec.URL != "":
		return &mcp.StreamableClientTransport{Endpoint: u.spec.URL, MaxRetries: -1}, nil
	case u.spec.Command != "":
		return &mcp.CommandTransport{Command: exec.Command("/bin/sh", "-c", "exec "+u.spec.Command), TerminateDuration: 2 * time.Second}, nil
	}
	return nil, errors.New("no command, URL or transport")
}

// supervise keeps the upstream connected until ctx ends.
func (u *upstream) supervise(ctx context.Context) {
	backoff := minBackoff
	for ctx.Err() == nil {
		start := time.Now()
		err := u.connectOnce(ctx)
		u.mu.Lock()
		u.state, u.sess = StateDown, nil
		if err != nil {
			u.lastErr = err.Error()
		}
		u.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		u.log.Warn("upstream ended; restarting", "upstream", u.spec.Name, "error", err, "backoff", backoff)
		if time.Since(start) > maxBackoff {
			backoff = minBackoff
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
		u.mu.Lock()
		u.restarts++
		u.mu.Unlock()
	}
}

// connectOnce connects, lists and waits for the connection to end.
func (u *upstream) connectOnce(ctx context.Context) error {
	t, err := u.transport()
	if err != nil {
		return err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "policycheck-gateway", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) {
			s := req.Session
			go func() {
				lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if err := u.list(lctx, s); err != nil {
					u.log.Warn("upstream relisting failed", "upstream", u.spec.Name, "error", err)
				}
			}()
		},
	})
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	cs, err := client.Connect(cctx, t, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer cs.Close()
	stop := context.AfterFunc(ctx, func() { cs.Close() })
	defer stop()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = u.list(lctx, cs)
	cancel()
	if err != nil {
		return fmt.Errorf("listing its tools: %w", err)
	}
	u.mu.Lock()
	u.state, u.sess, u.lastErr = StateUp, cs, ""
	u.mu.Unlock()
	u.log.Info("upstream up", "upstream", u.spec.Name)
	return cs.Wait()
}

// maxUpstreamTools bounds one upstream's listing.
const maxUpstreamTools = 100_000

// list reads the upstream's whole tool list. What it lists only ever
// narrows what the gateway forwards: a tool reaches a session only
// through the registry (docs/gateway.md).
func (u *upstream) list(ctx context.Context, cs *mcp.ClientSession) error {
	tools := map[string]*mcp.Tool{}
	params := &mcp.ListToolsParams{}
	for {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return err
		}
		for _, t := range res.Tools {
			if t != nil {
				tools[t.Name] = t
			}
		}
		if len(tools) > maxUpstreamTools {
			return fmt.Errorf("more than %d tools", maxUpstreamTools)
		}
		if res.NextCursor == "" {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	u.mu.Lock()
	old := u.tools
	u.tools = tools
	u.mu.Unlock()
	u.once.Do(func() { close(u.listed) })
	if old != nil && u.onList != nil && !sameTools(old, tools) {
		u.onList()
	}
	return nil
}

// tool returns the upstream's current definition of name.
func (u *upstream) tool(name string) (*mcp.Tool, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.tools[name]
	return t, ok
}

// snapshot returns the upstream's tools as last listed.
func (u *upstream) snapshot() map[string]*mcp.Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tools
}

// errUnavailable is a call to an upstream that is not connected;
// errNotOffered one to a tool the upstream does not list now.
var (
	errUnavailable = errors.New("its server is not available right now")
	errNotOffered  = errors.New("its server does not offer it now")
)

// call forwards one call; the upstream must list the tool now.
func (u *upstream) call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	u.mu.Lock()
	cs, state := u.sess, u.state
	_, listed := u.tools[p.Name]
	u.mu.Unlock()
	if cs == nil || state != StateUp {
		return nil, errUnavailable
	}
	if !listed {
		return nil, errNotOffered
	}
	return cs.CallTool(ctx, p)
}

// UpstreamHealth is one upstream's line of /health.
type UpstreamHealth struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	Tools     int    `json:"tools"`
	Restarts  int    `json:"restarts"`
	LastError string `json:"last_error,omitempty"`
}

func (u *upstream) health() UpstreamHealth {
	u.mu.Lock()
	defer u.mu.Unlock()
	return UpstreamHealth{Name: u.spec.Name, State: u.state, Tools: len(u.tools), Restarts: u.restarts, LastError: u.lastErr}
}

// sameTools reports whether two listings hold the same definitions.
func sameTools(a, b map[string]*mcp.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for n, t := range a {
		u, ok := b[n]
		if !ok {
			return false
		}
		ta, _ := json.Marshal(t)
		tb, _ := json.Marshal(u)
		if !bytes.Equal(ta, tb) {
			return false
		}
	}
	return true
}
