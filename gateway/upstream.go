//lint:file-ignore SA1019 the gateway relays logging, sampling and elicitation of protocol versions before 2026-07-28, which deprecates logging and sampling (SEP-2577).

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
	// relays are the calls in flight, by the progress token the upstream
	// was sent (relay.go).
	relays   map[string]*relay
	relaySeq uint64
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
		// Retries and the HTTP client resume a call's stream the
		// upstream closes for polling (ssepoll.go).
		return &mcp.StreamableClientTransport{Endpoint: u.spec.URL, HTTPClient: upstreamHTTPClient(), MaxRetries: upstreamSSERetries}, nil
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
		// Elicitation and sampling are relayed to the client of the call
		// that asks, when it declared them (relay.go).
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}, Sampling: &mcp.SamplingCapabilities{}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return u.relayElicit(req.Params)
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return u.relaySample(req.Params)
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			u.relayLog(req.Params)
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			u.relayProgress(ctx, req.Params)
		},
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
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if er, ok := req.(*mcp.ElicitRequest); ok && method == "elicitation/create" {
				// Straight to the client: it judges the schema, as it
				// would the upstream's own (the SDK's client accepts
				// fewer schemas than the protocol allows).
				return u.relayElicit(er.Params)
			}
			return next(ctx, method, req)
		}
	})
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	// 2025-11-25, not the SDK's latest: on 2026-07-28 a server cannot
	// log, elicit or sample during a call but through input-required
	// results, which the gateway does not relay (docs/gateway.md,
	// "Protocol versions").
	cs, err := client.Connect(cctx, t, &mcp.ClientSessionOptions{ProtocolVersion: upstreamProtocol})
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
	if ir := cs.InitializeResult(); ir != nil && ir.Capabilities != nil && ir.Capabilities.Logging != nil && ir.ProtocolVersion < "2026-07-28" {
		// Every message is asked for; each client gets those at or above
		// the level it set (relay.go). On 2026-07-28 and later the level
		// goes with each call.
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := cs.SetLoggingLevel(lctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			u.log.Warn("setting the upstream's log level failed", "upstream", u.spec.Name, "error", err)
		}
		cancel()
	}
	u.mu.Lock()
	u.state, u.sess, u.lastErr = StateUp, cs, ""
	u.mu.Unlock()
	u.log.Info("upstream up", "upstream", u.spec.Name)
	return cs.Wait()
}

// upstreamProtocol is the protocol version the gateway asks its
// upstreams for.
const upstreamProtocol = "2025-11-25"

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

// call forwards one call; the upstream must list the tool now. r, when
// set, is the calling client's: what the upstream sends during the call
// is relayed to it.
func (u *upstream) call(ctx context.Context, p *mcp.CallToolParams, r *relay) (*mcp.CallToolResult, error) {
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
	if r != nil {
		token, end := u.begin(r)
		defer end()
		meta := mcp.Meta{}
		for k, v := range p.Meta {
			meta[k] = v
		}
		meta["progressToken"] = token
		meta[mcp.MetaKeyLogLevel] = "debug"
		p.Meta = meta
		res, err := cs.CallTool(ctx, p)
		r.settle()
		return res, err
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
