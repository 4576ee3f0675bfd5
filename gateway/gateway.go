package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/trust"
)

// Config configures a Gateway. Registry and Upstreams are required.
type Config struct {
	// Registry is the operator's registry: its tools name their upstream
	// (docs/gateway.md).
	Registry *facts.Registry
	// EngineOptions compile the policies (engine.PolicyPaths, ...); the
	// gateway adds engine.Registry with the effective registry.
	EngineOptions []engine.Option
	// Upstreams are the MCP servers behind the gateway.
	Upstreams []Upstream
	// Imports maps an upstream's name to a registry capability: the tools
	// it lists at start that no registry tool maps are imported into that
	// capability under their own names (--import NAME=CAPABILITY).
	Imports map[string]string
	// Principals maps bearer tokens to principals; nil: no tokens, every
	// HTTP client is the principal "anonymous" and no history is served.
	Principals *Principals
	// Receipts, when set, signs an execution receipt for every call judged
	// execute; it reaches the upstream in the call's _meta
	// ("policycheck/receipt") and the history in the return's metadata.
	Receipts *trust.Signer
	// Approvals, when set, checks signed approvals a call carries in its
	// _meta ("policycheck/approval").
	Approvals *trust.ApprovalVerifier
	// Forward turns on forwarding resources, prompts and completions to
	// the upstreams (--forward); none is by default. No policy judges
	// what they carry.
	Forward Forwarding
	// AllowedOrigins are the Origin header values accepted besides the
	// gateway's own loopback origin; a request with any other Origin is
	// refused 403.
	AllowedOrigins []string
	// MaxBodyBytes bounds an HTTP request's body (default 4 MiB).
	MaxBodyBytes int64
	// MaxDepth bounds the nesting of every JSON value the gateway reads
	// or keeps: bodies, arguments, results (default
	// loader.DefaultMaxDepth).
	MaxDepth int
	// MaxResultBytes bounds an upstream result as kept in the history
	// (default 4 MiB); a larger one fails the call.
	MaxResultBytes int64
	// CallTimeout bounds one forwarded call (default 60s).
	CallTimeout time.Duration
	// ApprovalTimeout bounds how long an elicitation waits for a person
	// (default 10m); no answer leaves the call unapproved.
	ApprovalTimeout time.Duration
	// DecisionDeadline bounds one decision (0: the engine's default).
	DecisionDeadline time.Duration
	// MaxSessionBytes bounds one session's history (default 64 MiB): a
	// call to a session past it is refused.
	MaxSessionBytes int64
	// MaxSessions bounds the sessions held (default 10,000), and apart
	// the stateful MCP sessions Handler holds, counted from their
	// initialize. SessionTTL (default 1h) drops a session idle for that
	// long, ends a stopped session that long after it stopped and a lost
	// one that long after it was marked lost (what its client sends
	// meanwhile renews neither), and is the SDK's idle timeout of an MCP
	// session.
	MaxSessions int
	SessionTTL  time.Duration
	// MaxSessionsPerPrincipal bounds the sessions one principal holds,
	// and apart its MCP sessions: its new session (initialize) past it
	// drops its least recently used one not in a call (request), and is
	// refused when every one is in one. 0: a tenth of
	// MaxSessions (at least 1) when Principals is set, else MaxSessions
	// (every client is the one principal anonymous). More than
	// MaxSessions, or negative, is an error.
	MaxSessionsPerPrincipal int
	// SessionStore is where sessions' histories are kept: "memory" (the
	// default: in this process), redis://HOST:PORT/DB or a Redis
	// Cluster, redis+cluster://HOST:PORT[?addr=HOST:PORT...], shared by
	// every replica that names it (docs/gateway.md, "Several
	// replicas"). Idle
	// sessions expire from it after SessionTTL; a session past
	// MaxSessionBytes fails its calls closed.
	SessionStore string
	// SessionLease bounds how long a replica that stopped mid-call keeps
	// its session from the others (default 10s): a call holds the
	// session's lease, renewed while it runs.
	SessionLease time.Duration
	// store, when set (tests), is used instead of opening SessionStore.
	store sessionstore.Store
	// StartTimeout is how long New waits for each upstream's first tool
	// list (default 30s); an upstream that has not listed by then keeps
	// starting in the background.
	StartTimeout time.Duration
	// DecisionLog, when set, receives one JSON line per decided call.
	DecisionLog io.Writer
	// Logger logs upstream and session events (default: discard).
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 4 << 20
	}
	if c.MaxDepth <= 0 {
		c.MaxDepth = loader.DefaultMaxDepth
	}
	if c.MaxResultBytes <= 0 {
		c.MaxResultBytes = 4 << 20
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 60 * time.Second
	}
	if c.MaxSessionBytes <= 0 {
		c.MaxSessionBytes = 64 << 20
	}
	if c.ApprovalTimeout <= 0 {
		c.ApprovalTimeout = 10 * time.Minute
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = 10_000
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = time.Hour
	}
	if c.MaxSessionsPerPrincipal == 0 {
		c.MaxSessionsPerPrincipal = c.MaxSessions
		if c.Principals != nil {
			c.MaxSessionsPerPrincipal = max(1, c.MaxSessions/10)
		}
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Gateway is an MCP server in front of upstream MCP servers that decides
// every tools/list and tools/call with the engine on the session's
// history. It is safe for concurrent use.
type Gateway struct {
	cfg   Config
	log   *slog.Logger
	store sessionstore.Store
	// ownStore: the gateway opened store and closes it.
	ownStore bool
	ups      map[string]*upstream
	upOrder  []string
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]*session // by principal NUL handle
	byID     map[string]*session
	// byPrincipal holds each principal's sessions by key.
	byPrincipal map[string]map[string]*session
	// closing are the MCP sessions of evicted sessions, until they end.
	closing map[*mcp.ServerSession]struct{}
	// opening are the keys of sessions the caps admitted that are being
	// opened in the store (closed when done), and openingBy their number
	// by principal: each holds its place under the caps (sessionFor).
	opening   map[string]chan struct{}
	openingBy map[string]int
	// mcpByID are Handler's stateful MCP sessions by Mcp-Session-Id
	// (closing ones too, until they end); mcpByPrincipal are those the
	// caps count, by principal, and mcpHeld their number (lifecycle.go).
	mcpByID        map[string]*mcpSession
	mcpByPrincipal map[string]map[string]*mcpSession
	mcpHeld        int

	logMu   sync.Mutex
	metrics metrics

	// jobs feeds the deciders (deciders.go).
	jobs chan deciderJob

	baseRoutes map[string]route
	gctx       context.Context
	built      atomic.Pointer[built]
	rebuildMu  sync.Mutex
}

// New starts the upstreams, waits for their first tool lists (at most
// cfg.StartTimeout each), builds the effective registry and compiles the
// policies. Close stops the upstreams.
func New(ctx context.Context, cfg Config) (*Gateway, error) {
	cfg.defaults()
	if cfg.Registry == nil {
		return nil, errors.New("gateway: a registry is required")
	}
	if len(cfg.Upstreams) == 0 {
		return nil, errors.New("gateway: at least one upstream is required")
	}
	if cfg.MaxSessionsPerPrincipal < 0 || cfg.MaxSessionsPerPrincipal > cfg.MaxSessions {
		return nil, fmt.Errorf("gateway: --max-sessions-per-principal %d: want 1 to --max-sessions (%d), or 0 for the default", cfg.MaxSessionsPerPrincipal, cfg.MaxSessions)
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, ups: map[string]*upstream{}, sessions: map[string]*session{}, byID: map[string]*session{},
		byPrincipal: map[string]map[string]*session{}, closing: map[*mcp.ServerSession]struct{}{},
		opening: map[string]chan struct{}{}, openingBy: map[string]int{},
		mcpByID: map[string]*mcpSession{}, mcpByPrincipal: map[string]map[string]*mcpSession{}}
	g.store = cfg.store
	if g.store == nil {
		st, err := sessionstore.Open(ctx, cfg.SessionStore, sessionstore.Options{TTL: cfg.SessionTTL, MaxBytes: cfg.MaxSessionBytes,
			Lease: cfg.SessionLease, LockWait: cfg.ApprovalTimeout + cfg.CallTimeout,
			Warn: func(msg string) { cfg.Logger.Warn(msg) }})
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		g.store, g.ownStore = st, true
	}
	closeStore := func() {
		if g.ownStore {
			_ = g.store.Close()
		}
	}
	for _, u := range cfg.Upstreams {
		if !upstreamName.MatchString(u.Name) {
			closeStore()
			return nil, fmt.Errorf("gateway: upstream name %q is not a letter or digit followed by up to 63 letters, digits, '_', '.' or '-'", u.Name)
		}
		if _, dup := g.ups[u.Name]; dup {
			closeStore()
			return nil, fmt.Errorf("gateway: upstream %q is defined twice", u.Name)
		}
		up := newUpstream(u, cfg.Logger)
		up.onList = g.notifyAll
		g.ups[u.Name] = up
		g.upOrder = append(g.upOrder, u.Name)
	}
	for name := range cfg.Imports {
		if _, ok := g.ups[name]; !ok {
			closeStore()
			return nil, fmt.Errorf("gateway: --import %s: no upstream is named %q", name, name)
		}
	}
	rt, err := routes(cfg.Registry, g.upOrder)
	if err != nil {
		closeStore()
		return nil, err
	}
	gctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	g.startDeciders(gctx)
	for _, name := range g.upOrder {
		u := g.ups[name]
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			u.supervise(gctx)
		}()
	}
	g.baseRoutes, g.gctx = rt, gctx
	listed := map[string]map[string]*mcp.Tool{}
	deadline := time.NewTimer(cfg.StartTimeout)
	defer deadline.Stop()
	timedOut := false
	for _, name := range g.upOrder {
		if timedOut {
			select {
			case <-g.ups[name].listed:
				listed[name] = g.ups[name].snapshot()
			default:
				g.log.Warn("upstream did not list its tools in time; the registry takes its schemas when it does", "upstream", name)
			}
			continue
		}
		select {
		case <-g.ups[name].listed:
			listed[name] = g.ups[name].snapshot()
		case <-deadline.C:
			timedOut = true
			g.log.Warn("upstream did not list its tools in time; the registry takes its schemas when it does", "upstream", name)
		case <-ctx.Done():
			g.Close()
			return nil, ctx.Err()
		}
	}
	b, err := g.build(ctx, listed)
	if err != nil {
		g.Close()
		return nil, err
	}
	g.built.Store(b)
	for _, name := range g.upOrder {
		if _, ok := listed[name]; ok {
			continue
		}
		u := g.ups[name]
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			select {
			case <-u.listed:
				g.rebuild(name)
			case <-gctx.Done():
			}
		}()
	}
	return g, nil
}

// built is what the gateway decides with: the engine over the effective
// registry, the routes, and the first listing of each upstream it took
// (later listings never change it: they would widen it).
type built struct {
	eng    *engine.Engine
	routes map[string]route
	listed map[string]map[string]*mcp.Tool
}

// build compiles the policies over the effective registry of listed.
func (g *Gateway) build(ctx context.Context, listed map[string]map[string]*mcp.Tool) (*built, error) {
	reg, rt, err := effectiveRegistry(g.cfg.Registry, g.baseRoutes, listed, g.cfg.Imports, func(tool, reason string) {
		g.log.Warn("an upstream inputSchema does not compile: every call of the tool is refused until the registry gives it a parameters_json_schema",
			"tool", tool, "reason", reason)
	})
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(ctx, append(slices.Clone(g.cfg.EngineOptions), engine.Registry(reg))...)
	if err != nil {
		return nil, err
	}
	return &built{eng: eng, routes: rt, listed: listed}, nil
}

// rebuild takes the first listing of an upstream that listed after New:
// its schemas, hints and imports join the registry, and sessions decide
// with the new engine from their next step (engine.Run.Rebind). A
// failure keeps what the gateway had.
func (g *Gateway) rebuild(name string) {
	g.rebuildMu.Lock()
	defer g.rebuildMu.Unlock()
	cur := g.built.Load()
	if _, ok := cur.listed[name]; ok {
		return
	}
	listed := maps.Clone(cur.listed)
	listed[name] = g.ups[name].snapshot()
	b, err := g.build(g.gctx, listed)
	if err != nil {
		g.log.Error("the registry could not take a late upstream's listing; its tools keep what the registry says", "upstream", name, "error", err)
		return
	}
	g.built.Store(b)
	g.log.Info("the registry took a late upstream's listing", "upstream", name)
}

// Close stops the upstreams and waits for them.
func (g *Gateway) Close() error {
	g.cancel()
	g.wg.Wait()
	if g.ownStore {
		return g.store.Close()
	}
	return nil
}

// Engine returns the engine the gateway decides with now (its registry is
// the effective one).
func (g *Gateway) Engine() *engine.Engine { return g.built.Load().eng }

// Health is what /health answers.
type Health struct {
	Status    string           `json:"status"`
	Upstreams []UpstreamHealth `json:"upstreams"`
	Sessions  int              `json:"sessions"`
}

// Health reports each upstream's state; Status is "ok" when every
// upstream is up, else "degraded".
func (g *Gateway) Health() Health {
	h := Health{Status: "ok", Upstreams: []UpstreamHealth{}}
	for _, name := range g.upOrder {
		uh := g.ups[name].health()
		if uh.State != StateUp {
			h.Status = "degraded"
		}
		h.Upstreams = append(h.Upstreams, uh)
	}
	g.mu.Lock()
	h.Sessions = len(g.sessions)
	g.mu.Unlock()
	return h
}

// The principal of requests that carry no token, when no token file is
// configured, and of stdio.
const (
	anonymous      = "anonymous"
	stdioPrincipal = "stdio"
)

// maxHandle bounds a session handle sent in _meta.
const maxHandle = 256

// metaHandle is the session handle a stateless request sends in _meta.
const metaHandle = "policycheck/session"

func validHandle(h string) bool {
	return h != "" && len(h) <= maxHandle && utf8.ValidString(h) && !containsFunc(h, func(r rune) bool { return !unicode.IsPrint(r) })
}

func containsFunc(s string, f func(rune) bool) bool {
	for _, r := range s {
		if f(r) {
			return true
		}
	}
	return false
}

// History returns a session's history as pydantic-ai JSON; ok is false
// for an unknown id.
func (g *Gateway) History(id string) (history []byte, ok bool) {
	return g.history(context.Background(), id)
}

// history is the session's history as the store holds it (another
// replica's session too), else as this replica holds it.
func (g *Gateway) history(ctx context.Context, id string) ([]byte, bool) {
	if key, ok, err := g.store.Lookup(ctx, id); err == nil && ok {
		if entries, st, err := g.store.Load(ctx, key, 0); err == nil && !st.Lost && st.Len > 0 {
			msgs := make([][]byte, len(entries))
			for i, e := range entries {
				msgs[i] = e.Msg
			}
			return historyJSON(msgs), true
		}
	}
	g.mu.Lock()
	s, ok := g.byID[id]
	g.mu.Unlock()
	if !ok {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropped {
		return nil, false
	}
	return historyJSON(s.msgs), true
}

// logDecision writes the decision-log line of a call.
func (g *Gateway) logDecision(s *session, d *engine.Decision, c *engine.CallVerdict, took time.Duration) {
	if g.cfg.DecisionLog == nil {
		return
	}
	raw, err := d.MarshalJSON()
	if err != nil {
		g.log.Error("decision log", "error", err)
		return
	}
	line, err := json.Marshal(struct {
		Time      string          `json:"time"`
		Session   string          `json:"session"`
		Principal string          `json:"principal"`
		Call      string          `json:"tool_call_id"`
		Tool      string          `json:"tool"`
		Verdict   string          `json:"verdict"`
		Micros    int64           `json:"decision_us"`
		Decision  json.RawMessage `json:"decision"`
	}{timestamp(time.Now()), s.id, s.principal, deref(c.ToolCallID), c.Tool, c.Verdict, took.Microseconds(), raw})
	if err != nil {
		g.log.Error("decision log", "error", err)
		return
	}
	g.logMu.Lock()
	defer g.logMu.Unlock()
	_, _ = g.cfg.DecisionLog.Write(append(line, '\n'))
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// listTools answers tools/list: what the policy advertises to this
// session, each upstream tool as its upstream lists it now (under its
// registry name), the meta-tools as the gateway defines them.
func (g *Gateway) listTools(ctx context.Context, s *session) (*mcp.ListToolsResult, error) {
	s = liveLocked(s)
	defer s.mu.Unlock()
	cur, err := g.syncLive(ctx, s, func() (func(), error) { return g.store.Lock(ctx, s.key) })
	if cur != s {
		// The stop lapsed: a fresh session took the key.
		defer cur.mu.Unlock()
		s = cur
	}
	if err != nil {
		g.metrics.storeErrors.Add(1)
		return nil, errors.New(storeMessage(g, err))
	}
	if s.aborted != "" {
		// A stopped session's listing does not renew it.
		return stoppedList(), nil
	}
	s.lastUsed = time.Now()
	d, err := s.listDecision(ctx, g)
	if err != nil {
		g.metrics.decideErrors.Add(1)
		g.log.Error("a listing could not be decided", "session", s.id, "error", err)
		return nil, errors.New("the tool list could not be decided")
	}
	g.metrics.lists.Add(1)
	b := g.built.Load()
	reg := b.eng.Registry()
	res := &mcp.ListToolsResult{Tools: make([]*mcp.Tool, 0, len(d.Advertised))}
	res.Cacheable = mcp.Cacheable{TTLMs: 0, CacheScope: "private"}
	for _, name := range d.Advertised {
		switch name {
		case facts.SearchTool:
			res.Tools = append(res.Tools, searchToolDef())
			continue
		case facts.LoadCapabilityTool:
			res.Tools = append(res.Tools, loadToolDef(reg))
			continue
		}
		t, ok := g.toolDef(b, name)
		if ok {
			res.Tools = append(res.Tools, t)
		}
	}
	return res, nil
}

// toolDef is a registry tool's definition as listed: its upstream's,
// renamed, with the registry's description and schema where it gives
// them. A tool its upstream does not list now is left out.
func (g *Gateway) toolDef(b *built, name string) (*mcp.Tool, bool) {
	reg := b.eng.Registry()
	rt, ok := b.routes[name]
	if !ok {
		return nil, false
	}
	up, ok := g.ups[rt.upstream].tool(rt.tool)
	if !ok {
		return nil, false
	}
	t := *up
	t.Name = name
	// The registry's (effective) schema is the one calls are held to.
	if rt, _ := reg.Tool(name); rt.ParametersJSONSchema != nil {
		t.InputSchema = json.RawMessage(rt.ParametersJSONSchema)
	}
	if rt, _ := reg.Tool(name); rt.Description != "" {
		t.Description = rt.Description
	}
	if t.InputSchema == nil {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	return &t, true
}

// SessionIDs returns the ids of the sessions held, sorted.
func (g *Gateway) SessionIDs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.byID))
	for id := range g.byID {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// notifyAll tells every session's latest connection that its tool list
// may have changed (an upstream's listing changed).
func (g *Gateway) notifyAll() {
	g.mu.Lock()
	var fs []func()
	for _, s := range g.sessions {
		if f := s.notifier.Load(); f != nil {
			fs = append(fs, *f)
		}
	}
	g.mu.Unlock()
	for _, f := range fs {
		f()
	}
}
