//lint:file-ignore SA1019 the gateway relays logging, sampling and elicitation of protocol versions before 2026-07-28, which deprecates logging and sampling (SEP-2577).

package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/internal/ground/wire"
)

// version is the gateway's MCP implementation version.
const version = "1"

// listChangedProbe is the tool added and removed at once to make the SDK
// send notifications/tools/list_changed to one client: the gateway's
// listing never shows it.
const listChangedProbe = "policycheck_list_changed"

// newServer is the MCP server of one client connection (one per stateful
// session, one per stateless request, one for stdio): tools/list and
// tools/call are the gateway's; resources, prompts and completions are
// forwarded to the upstreams when Config.Forward turns them on
// (forward.go). m, when not nil, is the one stateful MCP session the
// server serves (the caps count it by its id before the SDK creates it:
// serveNewMCP): its requests in flight are cancelled when the gateway
// ends it (mcpSession.ended).
func (g *Gateway) newServer(principalOf func(mcp.Request) (Principal, error), m *mcpSession) *mcp.Server {
	opts := &mcp.ServerOptions{
		// Logging: the upstreams' log messages during a call are
		// relayed to its client (relay.go).
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}},
	}
	if m != nil {
		opts.GetSessionID = func() string { return m.id }
	}
	g.serverOptions(opts)
	srv := mcp.NewServer(&mcp.Implementation{Name: "policycheck-gateway", Version: version}, opts)
	notify := func() {
		srv.AddTool(&mcp.Tool{Name: listChangedProbe, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return nil, errors.New("not a tool")
			})
		srv.RemoveTools(listChangedProbe)
	}
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if m != nil {
				// The SDK's close of an MCP session (a DELETE, the
				// caps) waits for its requests in flight: a call
				// waiting for its upstream or for a person's answer
				// would hold the close, and the session's lease,
				// until its timeout.
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
				defer context.AfterFunc(m.ended, cancel)()
			}
			switch method {
			case "tools/list":
				lr, ok := req.(*mcp.ListToolsRequest)
				if !ok {
					return nil, errors.New("tools/list: unexpected request")
				}
				var meta mcp.Meta
				if lr.Params != nil {
					meta = lr.Params.Meta
				}
				s, err := g.sessionOf(ctx, req, meta, principalOf)
				if err != nil {
					return nil, err
				}
				s.notifier.Store(&notify)
				return g.listTools(ctx, s)
			case "tools/call":
				cr, ok := req.(*mcp.CallToolRequest)
				if !ok || cr.Params == nil {
					return nil, errors.New("tools/call: unexpected request")
				}
				s, err := g.sessionOf(ctx, req, cr.Params.Meta, principalOf)
				if err != nil {
					return nil, err
				}
				s.notifier.Store(&notify)
				caps := &clientCaps{read: cr.ClientCapabilities}
				env := callEnv{meta: cr.Params.Meta, notify: notify,
					requestState: cr.Params.RequestState, inputResponses: cr.Params.InputResponses, relay: relayFor(ctx, cr, caps),
					asking: func() (inputRequired bool, elicit elicitFunc) {
						if caps := caps.get(); caps == nil || caps.Elicitation == nil {
							return false, nil
						}
						if cr.ProtocolVersion() >= "2026-07-28" {
							return true, nil
						}
						if cr.Session != nil {
							return false, cr.Session.Elicit
						}
						return false, nil
					}}
				return g.callShared(ctx, s, cr.Params.Name, cr.Params.Arguments, env), nil
			}
			if res, ok, err := g.forwarded(ctx, method, req); ok {
				return res, err
			}
			return next(ctx, method, req)
		}
	})
	return srv
}

// sessionOf finds the session a request belongs to: (principal, the
// handle in _meta "policycheck/session") when the request sends one,
// else (principal, Mcp-Session-Id) on a stateful session, else the
// principal alone. A principal never reaches another's session: the principal is
// part of the key whatever the handle says.
func (g *Gateway) sessionOf(ctx context.Context, req mcp.Request, meta mcp.Meta, principalOf func(mcp.Request) (Principal, error)) (*session, error) {
	p, err := principalOf(req)
	if err != nil {
		return nil, err
	}
	handle := "principal"
	var mcpSession *mcp.ServerSession
	if h, ok := meta[metaHandle].(string); ok {
		// A handle the client sends names its session on any protocol
		// version: it outlives the MCP session, which the SDK keeps in
		// one replica (docs/gateway.md, "Several replicas").
		if !validHandle(h) {
			return nil, fmt.Errorf("_meta %q must be 1 to %d bytes of printable UTF-8", metaHandle, maxHandle)
		}
		handle = "meta:" + h
	} else if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss.ID() != "" {
		handle = "mcp-session-id:" + ss.ID()
		mcpSession = ss
	}
	return g.sessionFor(ctx, p, handle, mcpSession)
}

// principalHTTP is the principal of a request that came over HTTP: the
// bearer token's, or anonymous without a token file.
func (g *Gateway) principalHTTP(req mcp.Request) (Principal, error) {
	if g.cfg.Principals == nil {
		return Principal{Name: anonymous}, nil
	}
	ti := req.GetExtra()
	if ti == nil || ti.TokenInfo == nil {
		return Principal{}, errors.New("no principal")
	}
	p, ok := ti.TokenInfo.Extra["principal"].(Principal)
	if !ok {
		return Principal{}, errors.New("no principal")
	}
	return p, nil
}

// ServeStdio serves one client over t, or over stdin and stdout when t
// is nil (the principal "stdio", with no context), until the client
// leaves or ctx ends. On stdin a batched request, a message over
// MaxBodyBytes or JSON deeper than MaxDepth ends the connection.
func (g *Gateway) ServeStdio(ctx context.Context, t mcp.Transport) error {
	if t == nil {
		t = g.stdioTransport()
	}
	srv := g.newServer(func(mcp.Request) (Principal, error) { return Principal{Name: stdioPrincipal}, nil }, nil)
	return srv.Run(ctx, t)
}

// Connect serves one client on transport t as principal p (embedders,
// tests: mcp.NewInMemoryTransports).
func (g *Gateway) Connect(ctx context.Context, t mcp.Transport, p Principal) (*mcp.ServerSession, error) {
	srv := g.newServer(func(mcp.Request) (Principal, error) { return p, nil }, nil)
	return srv.Connect(ctx, t, nil)
}

// Handler is the gateway's HTTP interface: MCP over streamable HTTP at
// /mcp (stateful sessions for protocol versions up to 2025-11-25,
// stateless for 2026-07-28 and later), GET /health, GET /metrics and
// GET /v1/sessions/{id}/history (operator token).
//
// A stateful MCP session is counted against MaxSessionsPerPrincipal and
// MaxSessions from its initialize on (serveNewMCP); a stateless request
// creates no MCP session that outlives it.
func (g *Gateway) Handler() http.Handler {
	principalOf := g.principalHTTP
	probe := g.newServer(principalOf, nil)
	getServer := func(r *http.Request) *mcp.Server {
		if r.Header.Get("Mcp-Session-Id") != "" {
			// An existing session keeps its server; this one only
			// answers the SDK's protocol-version check.
			return probe
		}
		if m, ok := r.Context().Value(newMCPKey{}).(*mcpSession); ok {
			// A stateful session the caps admitted: one server, asked
			// for twice (the version check, the session).
			return g.serverOf(m, func() *mcp.Server { return g.newServer(principalOf, m) })
		}
		return g.newServer(principalOf, nil)
	}
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		SessionTimeout:      g.cfg.SessionTTL,
		MaxRequestBodyBytes: g.cfg.MaxBodyBytes,
	})
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: g.cfg.MaxBodyBytes,
		// A request whose client went away is cancelled: its answer
		// can no longer be delivered, and its call would hold its
		// session's lease until --call-timeout.
		PropagateRequestCancellation: true,
	})
	var mcpH http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= "2026-07-28" {
			stateless.ServeHTTP(w, r)
			return
		}
		g.serveStateful(stateful, w, r)
	})
	mcpH = g.guardBody(mcpH)
	if g.cfg.Principals != nil {
		mcpH = auth.RequireBearerToken(g.verifyToken, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(mcpH)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpH)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		h := g.Health()
		w.Header().Set("Content-Type", "application/json")
		if h.Status != "ok" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(h)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		g.writeMetrics(w)
	})
	mux.HandleFunc("GET /v1/sessions/{id}/history", g.handleHistory)
	return g.guardOrigin(mux)
}

// verifyToken maps a bearer token to its principal.
func (g *Gateway) verifyToken(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	p, ok := g.cfg.Principals.lookup(token)
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: p.Name, Extra: map[string]any{"principal": p}}, nil
}

// handleHistory serves a session's history to an operator token.
func (g *Gateway) handleHistory(w http.ResponseWriter, r *http.Request) {
	if g.cfg.Principals == nil {
		http.Error(w, "the history needs an operator token, and the gateway has no --token-file", http.StatusForbidden)
		return
	}
	fields := strings.Fields(r.Header.Get("Authorization"))
	if len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "no bearer token", http.StatusUnauthorized)
		return
	}
	p, ok := g.cfg.Principals.lookup(fields[1])
	if !ok {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "invalid token", http.StatusUnauthorized)
		return
	}
	if !p.Operator {
		http.Error(w, "the history needs an operator token", http.StatusForbidden)
		return
	}
	h, ok := g.history(r.Context(), r.PathValue("id"))
	if !ok {
		http.Error(w, "no such session", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(h)
}

// guardOrigin refuses a request whose Origin is not allowed (DNS
// rebinding: a browser page reaching a local gateway). Accepted: the
// gateway's own loopback origin (originAllowed) and AllowedOrigins.
func (g *Gateway) guardOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !slices.Contains(g.cfg.AllowedOrigins, o) && !sameLoopbackOrigin(r, o) {
			http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not allowed (--allow-origin)", o), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameLoopbackOrigin reports whether origin is the gateway's own loopback
// origin: its hostname is localhost, 127.0.0.1 or [::1] and its port is
// the one the gateway listens on (the connection's local port), or the
// request's Host port when the Host too names a loopback host (a port
// forwarded to the gateway). A non-loopback Origin is never accepted
// here, even one equal to the Host: in a DNS-rebinding attack both name
// the attacker's domain.
func sameLoopbackOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if !loopbackHost(u.Hostname()) {
		return false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, lp, err := net.SplitHostPort(la.String()); err == nil && lp == port {
			return true
		}
	}
	if hh, hp, err := net.SplitHostPort(r.Host); err == nil && loopbackHost(hh) && hp == port {
		return true
	}
	return false
}

// loopbackHost reports whether a URL hostname (brackets removed) is
// localhost, 127.0.0.1 or ::1.
func loopbackHost(h string) bool {
	return strings.EqualFold(h, "localhost") || h == "127.0.0.1" || h == "::1"
}

// guardBody reads a POST's body within MaxBodyBytes and refuses a
// batched JSON-RPC request and JSON that breaks the depth limit or is not
// strict JSON, before the SDK reads it.
func (g *Gateway) guardBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		t := bytes.TrimLeft(body, " \t\r\n")
		if len(t) > 0 && t[0] == '[' {
			g.metrics.refusedBatches.Add(1)
			writeRPCError(w, -32600, "batched JSON-RPC requests are refused by this gateway: send one request per message")
			return
		}
		if end, serr := wire.Skip("body", body, 0, g.cfg.MaxDepth); serr != nil {
			writeRPCError(w, -32700, "the body is not acceptable JSON: "+serr.Msg)
			return
		} else if len(bytes.TrimSpace(body[end:])) > 0 {
			writeRPCError(w, -32700, "the body holds data after its JSON value")
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, body))
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// bodyKey is the context key of a POST's body as guardBody read it
// (abandoned reads it again).
type bodyKey struct{}

func writeRPCError(w http.ResponseWriter, code int, msg string) {
	writeRPCErrorStatus(w, http.StatusBadRequest, nil, code, msg)
}

// writeRPCErrorStatus answers a JSON-RPC error with HTTP status status;
// id is the request's id (nil: null).
func writeRPCErrorStatus(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	var idv any
	if id != nil {
		idv = id
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": idv, "error": map[string]any{"code": code, "message": msg}})
}

// rpcHead is the id and the method of the JSON-RPC message r's body
// holds (guardBody read it: strict JSON within the limits), skimmed, not
// decoded; the id only when it is a string or a number, else nil. The
// body is left for the next reader.
func (g *Gateway) rpcHead(r *http.Request) (id json.RawMessage, method string) {
	if r.Body == nil {
		return nil, ""
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return nil, ""
	}
	return g.skimHead(body)
}

// skimHead is rpcHead of a body read already.
func (g *Gateway) skimHead(body []byte) (id json.RawMessage, method string) {
	env, werr := wire.SkimEnvelope(body, wire.EnvelopeSpec{File: "body", Known: []string{"id", "method"}, MaxDepth: g.cfg.MaxDepth})
	if werr != nil {
		return nil, ""
	}
	if m := env.Members["method"]; len(m) > 0 && m[0] == '"' {
		method = wire.Unescape(m)
	}
	if v := env.Members["id"]; len(v) > 0 {
		if c := v[0]; c == '"' || c == '-' || (c >= '0' && c <= '9') {
			id = v
		}
	}
	return id, method
}
