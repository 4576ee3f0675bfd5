package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/engine"
)

// A session's life (docs/gateway.md, "Sessions and principals"): it is
// created by its principal's first listing or call under a handle; it
// ends when its MCP session ends (the client's DELETE, the SDK's idle
// timeout), when it is idle past SessionTTL, or when its principal opens
// one more than MaxSessionsPerPrincipal (its least recently used session
// is dropped); a session whose call exceeded the tool's retry budget is
// stopped: every later call is refused with the abort message, as the
// reference ends the run there (spec X8).

// errTooManySessions refuses a new session when MaxSessions are held and
// none is idle past SessionTTL.
var errTooManySessions = errors.New("the gateway holds as many sessions as it may; try again later")

// errPrincipalFull refuses a new session when its principal holds
// MaxSessionsPerPrincipal sessions and every one is in a call.
var errPrincipalFull = errors.New("this principal holds as many sessions as it may and every one of them is in a call; try again later")

// errClosing refuses a request of an MCP session the gateway is closing
// (its session was evicted): it must not begin a new session.
var errClosing = errors.New("this MCP session was ended by the gateway (its principal opened more sessions than it may hold); initialize a new one")

// endedMessage answers a call that reached a session as it was dropped.
const endedMessage = "This session has ended (its MCP session closed, or the gateway dropped it to keep its principal within its session limit); the call was not run. Start a new session."

// stoppedSuffix follows the reference's abort text (engine.ExceededError)
// in what a stopped session's calls answer.
const stoppedSuffix = " The gateway stopped this session: none of its calls runs any more. Start a new session."

// verdictAborted is the decision-log verdict of a session's abort and of
// each call refused because of it.
const verdictAborted = "aborted"

// sessionFor returns the session of (principal, handle), creating it.
// ss is the MCP session the handle is the id of, when it is one: the
// session is dropped when it ends.
//
// The caps admit a new session before anything of it is written to the
// store: a request they refuse leaves nothing behind (a record there
// lasts the TTL, and a refused principal could add one per request).
// The admitted key holds its place (opening) while the store opens it,
// and a second request of the same key waits for the first rather than
// taking a second place.
func (g *Gateway) sessionFor(ctx context.Context, p Principal, handle string, ss *mcp.ServerSession) (*session, error) {
	key := p.Name + "\x00" + handle
	g.mu.Lock()
	for {
		if s, ok := g.sessions[key]; ok {
			g.mu.Unlock()
			return s, nil
		}
		if _, closing := g.closing[ss]; closing && ss != nil {
			g.mu.Unlock()
			return nil, errClosing
		}
		wait, ok := g.opening[key]
		if !ok {
			break
		}
		g.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		g.mu.Lock()
	}
	now := time.Now()
	evicted, err := g.makeRoomLocked(p.Name, now)
	if err != nil {
		g.mu.Unlock()
		g.forget(ctx, evicted)
		return nil, err
	}
	done := make(chan struct{})
	g.opening[key] = done
	g.openingBy[p.Name]++
	g.mu.Unlock()
	g.forget(ctx, evicted)
	// The session's public id is the one the store holds, the same on
	// every replica.
	id, err := g.store.Open(ctx, key, newSessionID())
	g.mu.Lock()
	delete(g.opening, key)
	if g.openingBy[p.Name]--; g.openingBy[p.Name] == 0 {
		delete(g.openingBy, p.Name)
	}
	close(done)
	if err != nil {
		g.mu.Unlock()
		g.metrics.storeErrors.Add(1)
		return nil, errors.New("the gateway's session store cannot be reached")
	}
	// While the key was opening no other request could add its session
	// or evict it (it was in no table): the place it holds is its own.
	// Its MCP session may have ended meanwhile; the watch below then
	// drops the session at once (ss.Wait returns).
	eng := g.Engine()
	s := &session{id: id, key: key, principal: p.Name, ctxDoc: p.Context, run: eng.NewRun(), eng: eng, lastUsed: now, mcp: ss}
	g.addLocked(s)
	g.metrics.sessions.Add(1)
	g.mu.Unlock()
	if ss != nil {
		go func() {
			// The MCP session ended: the client's DELETE of its
			// Mcp-Session-Id (the SDK lets only the principal that
			// created it), its idle timeout, or the gateway closed it.
			_ = ss.Wait()
			g.endMCPSessionOf(key, ss)
			g.mu.Lock()
			delete(g.closing, ss)
			g.mu.Unlock()
		}()
	}
	return s, nil
}

// makeRoomLocked makes room for a new session of principal: past
// MaxSessionsPerPrincipal its least recently used session not in a call
// is dropped (returned, for forget); then, when the table is full,
// sessions idle past SessionTTL leave it. Sessions being opened
// (opening) count as held. g.mu is held.
func (g *Gateway) makeRoomLocked(principal string, now time.Time) ([]*session, error) {
	var evicted []*session
	for len(g.byPrincipal[principal])+g.openingBy[principal] >= g.cfg.MaxSessionsPerPrincipal {
		v := lruLocked(g.byPrincipal[principal])
		if v == nil {
			g.metrics.sessionsRefused.Add(1)
			return evicted, errPrincipalFull
		}
		g.removeLocked(v)
		if v.mcp != nil {
			// Closed by forget; until it is, its requests begin no
			// session.
			g.closing[v.mcp] = struct{}{}
		}
		g.metrics.sessionsEvicted.Add(1)
		g.log.Info("a principal opened more sessions than it may hold; its least recently used one is dropped",
			"principal", principal, "session", v.id, "max_sessions_per_principal", g.cfg.MaxSessionsPerPrincipal)
		evicted = append(evicted, v)
	}
	if len(g.sessions)+len(g.opening) >= g.cfg.MaxSessions {
		for _, s := range g.sessions {
			if s.mu.TryLock() {
				idle := now.Sub(s.lastUsed) > g.cfg.SessionTTL
				if idle {
					// The store expired it too (or another replica
					// keeps it there): only this replica's state goes.
					s.dropped = true
					g.removeLocked(s)
				}
				s.mu.Unlock()
			}
		}
		if len(g.sessions)+len(g.opening) >= g.cfg.MaxSessions {
			g.metrics.sessionsRefused.Add(1)
			return evicted, errTooManySessions
		}
	}
	return evicted, nil
}

// lruLocked marks dropped and returns the least recently used session of
// m that is not in a call, or nil when every one is. g.mu is held.
func lruLocked(m map[string]*session) *session {
	var best *session
	for _, s := range m {
		if !s.mu.TryLock() {
			continue // in a call: used now
		}
		if best == nil || s.lastUsed.Before(best.lastUsed) {
			if best != nil {
				best.mu.Unlock()
			}
			best = s
			continue
		}
		s.mu.Unlock()
	}
	if best != nil {
		// Held since it was chosen: no call began on it since.
		best.dropped = true
		best.mu.Unlock()
	}
	return best
}

// addLocked records s in the tables; g.mu is held.
func (g *Gateway) addLocked(s *session) {
	g.sessions[s.key] = s
	g.byID[s.id] = s
	m := g.byPrincipal[s.principal]
	if m == nil {
		m = map[string]*session{}
		g.byPrincipal[s.principal] = m
	}
	m[s.key] = s
}

// removeLocked removes s from the tables when it is still its key's
// session, reporting whether it was; g.mu is held.
func (g *Gateway) removeLocked(s *session) bool {
	if g.sessions[s.key] != s {
		return false
	}
	delete(g.sessions, s.key)
	if g.byID[s.id] == s {
		delete(g.byID, s.id)
	}
	if m := g.byPrincipal[s.principal]; m != nil {
		delete(m, s.key)
		if len(m) == 0 {
			delete(g.byPrincipal, s.principal)
		}
	}
	return true
}

// forget drops what the store holds of sessions the principal's cap
// evicted, and closes their MCP sessions (their client's next request is
// answered 404 and it starts a new session).
func (g *Gateway) forget(ctx context.Context, evicted []*session) {
	for _, s := range evicted {
		g.deleteStored(ctx, s)
		if s.mcp != nil {
			// Close waits for the session's requests in flight: not
			// here.
			go func() { _ = s.mcp.Close() }()
		}
	}
}

// deleteStored deletes s's history from the store. A failure is logged
// and counted: the history then expires after the TTL.
func (g *Gateway) deleteStored(ctx context.Context, s *session) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := g.store.Delete(dctx, s.key); err != nil {
		g.metrics.storeErrors.Add(1)
		g.log.Warn("a dropped session's history could not be deleted from the session store; it expires after the TTL", "session", s.id, "error", err)
	}
}

// serveStateful serves a request of a stateful MCP session with h (the
// SDK's handler). A POST without Mcp-Session-Id may create an MCP
// session: the caps admit it first (serveNewMCP). A POST of an MCP
// session marks it in a request while it runs (it is not dropped for
// another). A DELETE the SDK accepts (204: the session exists and the
// token's principal opened it) gives back the MCP session's place and
// ends the gateway's session of that MCP session before the client gets
// the answer; the SDK's session close would end it a moment later
// (sessionFor's watch).
func (g *Gateway) serveStateful(h http.Handler, w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	name := principalName(r)
	switch {
	case r.Method == http.MethodPost && sid == "":
		g.serveNewMCP(h, w, r, name)
		return
	case r.Method == http.MethodPost:
		done, ok := g.mcpRequest(sid, name)
		if !ok {
			// Closed by the caps, the SDK's close under way: it is
			// gone for its client, as the SDK answers one that ended.
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		defer done()
		h.ServeHTTP(w, r)
		if r.Context().Err() != nil {
			g.abandoned(h, r)
		}
		return
	case r.Method != http.MethodDelete || sid == "":
		h.ServeHTTP(w, r)
		return
	}
	g.mu.Lock()
	if m := g.mcpByID[sid]; m != nil && m.principal == name {
		// Its requests in flight end first: the SDK's close waits
		// for them (a call waiting for an approval, ten minutes).
		m.end()
	}
	g.mu.Unlock()
	rec := &heldResponse{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if rec.code == http.StatusNoContent {
		g.mu.Lock()
		if m := g.mcpByID[sid]; m != nil && m.principal == name {
			g.releaseMCPLocked(m)
		}
		s := g.sessions[name+"\x00mcp-session-id:"+sid]
		g.mu.Unlock()
		if s != nil {
			g.end(s)
		}
	}
	maps.Copy(w.Header(), rec.header)
	w.WriteHeader(rec.code)
	_, _ = w.Write(rec.body.Bytes())
}

// abandoned cancels the request of r, a POST of a stateful MCP session
// whose client went away before its answer: the SDK keeps no stream to
// resume (no event store), so the answer can never be delivered, yet
// the SDK runs the request on, and a call would hold its session's lease
// (its next call waits), its upstream call and, at the session's
// DELETE, the SDK's close until --call-timeout or --approval-timeout.
// The gateway sends the session the notifications/cancelled the client
// did not: the SDK reads a session's messages in order, so the request
// is known to it by then, and cancelling one that ended does nothing.
func (g *Gateway) abandoned(h http.Handler, r *http.Request) {
	body, _ := r.Context().Value(bodyKey{}).([]byte)
	id, method := g.skimHead(body)
	if id == nil || method == "" {
		return // a notification, or not a request
	}
	msg := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + string(id) +
		`,"reason":"the client's HTTP request ended before its answer"}}`)
	c := r.Clone(context.WithoutCancel(r.Context()))
	c.Body, c.ContentLength = io.NopCloser(bytes.NewReader(msg)), int64(len(msg))
	h.ServeHTTP(&heldResponse{header: http.Header{}}, c)
}

// principalName is the name of the principal of an HTTP request: its
// bearer token's, else anonymous.
func principalName(r *http.Request) string {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		if p, ok := ti.Extra["principal"].(Principal); ok {
			return p.Name
		}
	}
	return anonymous
}

// An MCP session of Handler's stateful SDK handler as the caps count it
// (docs/gateway.md, "A session's life"): from the initialize that may
// create it (a POST without Mcp-Session-Id) until it ends (the client's
// DELETE, the SDK's idle timeout, or the caps closing it). The SDK holds
// an MCP session's goroutines and state whether or not it ever makes a
// call, so an MCP session is counted whether or not a gateway session
// was begun in it. A stateless request (2026-07-28) creates none that
// outlives the request: nothing is counted or kept for it.
type mcpSession struct {
	id        string // its Mcp-Session-Id, chosen before the SDK creates it
	principal string
	// srv is the session's server (its one session is this MCP
	// session); nil until the SDK asks for it.
	srv      *mcp.Server
	lastUsed time.Time
	// busy counts its POSTs in flight (its initialize first): a busy
	// MCP session is never closed for another.
	busy int
	// closing: the caps closed it; it is no longer counted, and its
	// requests are answered 404 until the SDK's close ends it. gw is
	// its gateway session, dropped with it.
	closing bool
	gw      *session
	// ended is cancelled when the gateway ends the MCP session (its
	// client's DELETE, the caps) or it ended: its requests in flight are
	// cancelled with it (newServer), since the SDK's close waits for
	// them.
	ended context.Context
	end   context.CancelFunc
}

// newMCPKey is the context key of the mcpSession a POST without
// Mcp-Session-Id may create (Handler's getServer reads it).
type newMCPKey struct{}

// errMCPPrincipalFull refuses an initialize when its principal holds
// MaxSessionsPerPrincipal MCP sessions and every one is in a request.
var errMCPPrincipalFull = errors.New("this principal holds as many MCP sessions as it may and every one of them is in a request; " +
	"try again later, or end one (HTTP DELETE of its Mcp-Session-Id)")

// errMCPNotInitialize refuses a request without Mcp-Session-Id that is
// not an initialize (it closes no MCP session) when its principal holds
// MaxSessionsPerPrincipal MCP sessions.
var errMCPNotInitialize = errors.New("this principal holds as many MCP sessions as it may; send the Mcp-Session-Id of one of them")

// errMCPTooMany refuses an initialize when the gateway holds MaxSessions
// MCP sessions and the principal has none of its own it could give up.
var errMCPTooMany = errors.New("the gateway holds as many MCP sessions as it may; try again later")

// serveNewMCP serves a POST without Mcp-Session-Id on the stateful
// handler h: the SDK creates an MCP session for it, and keeps it when it
// is an initialize. Its place is taken first: past its principal's cap,
// or with the table full, an initialize closes the principal's least
// recently used MCP session not in a request (never another
// principal's); when there is none, or for any other message, the
// request is refused (errMCPPrincipalFull: 429, errMCPTooMany: 503, each
// a JSON-RPC error with the request's id). The place is given back when
// the MCP session ends, or at once when the SDK kept no session.
func (g *Gateway) serveNewMCP(h http.Handler, w http.ResponseWriter, r *http.Request, principal string) {
	id, method := g.rpcHead(r)
	ended, end := context.WithCancel(context.Background())
	m := &mcpSession{id: rand.Text(), principal: principal, busy: 1, lastUsed: time.Now(), ended: ended, end: end}
	g.mu.Lock()
	evicted, err := g.admitMCPLocked(m, method == "initialize")
	g.mu.Unlock()
	g.closeMCP(r.Context(), evicted)
	if err != nil {
		status := http.StatusServiceUnavailable
		if !errors.Is(err, errMCPTooMany) {
			status = http.StatusTooManyRequests
		}
		g.log.Info("an MCP session was refused", "principal", principal, "reason", err.Error())
		writeRPCErrorStatus(w, status, id, -32000, err.Error())
		return
	}
	h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), newMCPKey{}, m)))
	g.mu.Lock()
	srv := m.srv
	g.mu.Unlock()
	var ss *mcp.ServerSession
	if srv != nil {
		for s := range srv.Sessions() {
			ss = s
		}
	}
	g.mu.Lock()
	m.busy--
	m.lastUsed = time.Now()
	if ss == nil {
		// No session (not an initialize, or it failed): nothing held.
		g.releaseMCPLocked(m)
	}
	g.mu.Unlock()
	if ss != nil {
		go func() {
			// Ended: the client's DELETE, the SDK's idle timeout, or
			// closeMCP.
			_ = ss.Wait()
			g.mu.Lock()
			g.releaseMCPLocked(m)
			g.mu.Unlock()
		}()
	}
}

// serverOf is the server of m, made by mk the first time.
func (g *Gateway) serverOf(m *mcpSession, mk func() *mcp.Server) *mcp.Server {
	g.mu.Lock()
	srv := m.srv
	g.mu.Unlock()
	if srv != nil {
		return srv
	}
	// Only m's request goroutine asks: no other makes one meanwhile.
	srv = mk()
	g.mu.Lock()
	m.srv = srv
	g.mu.Unlock()
	return srv
}

// admitMCPLocked counts m, first closing what its principal must give
// up when evict is true (returned, for closeMCP). g.mu is held.
func (g *Gateway) admitMCPLocked(m *mcpSession, evict bool) ([]*mcpSession, error) {
	var evicted []*mcpSession
	own := g.mcpByPrincipal[m.principal]
	for len(own) >= g.cfg.MaxSessionsPerPrincipal || g.mcpHeld >= g.cfg.MaxSessions {
		var v *mcpSession
		if evict {
			v = lruMCP(own)
		}
		if v == nil {
			g.metrics.sessionsRefused.Add(1)
			switch {
			case len(own) < g.cfg.MaxSessionsPerPrincipal:
				return evicted, errMCPTooMany
			case !evict:
				return evicted, errMCPNotInitialize
			}
			return evicted, errMCPPrincipalFull
		}
		g.uncountMCPLocked(v)
		// Known until its close ends it: its requests meanwhile are
		// answered 404, and any still running (their client went
		// away) are cancelled.
		v.closing = true
		v.end()
		// Its gateway session goes with it, as one evicted: no
		// request of it is in flight.
		if s := g.sessions[v.principal+"\x00mcp-session-id:"+v.id]; s != nil && s.mu.TryLock() {
			s.dropped = true
			s.mu.Unlock()
			g.removeLocked(s)
			v.gw = s
		}
		g.metrics.sessionsEvicted.Add(1)
		g.log.Info("a principal opened more MCP sessions than it may hold, or the gateway holds as many as it may; its least recently used one is closed",
			"principal", m.principal, "mcp_session", v.id, "max_sessions_per_principal", g.cfg.MaxSessionsPerPrincipal, "max_sessions", g.cfg.MaxSessions)
		evicted = append(evicted, v)
	}
	g.mcpByID[m.id] = m
	if own == nil {
		own = map[string]*mcpSession{}
		g.mcpByPrincipal[m.principal] = own
	}
	own[m.id] = m
	g.mcpHeld++
	return evicted, nil
}

// lruMCP is the least recently used MCP session of m not in a request,
// nil when every one is.
func lruMCP(m map[string]*mcpSession) *mcpSession {
	var best *mcpSession
	for _, s := range m {
		if s.busy == 0 && (best == nil || s.lastUsed.Before(best.lastUsed)) {
			best = s
		}
	}
	return best
}

// mcpRequest marks MCP session sid in a request of principal until done
// is called; ok is false when the caps closed it. A session the caps do
// not know, or another principal's, is left to the SDK (404, 403).
func (g *Gateway) mcpRequest(sid, principal string) (done func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.mcpByID[sid]
	if m == nil || m.principal != principal {
		return func() {}, true
	}
	if m.closing {
		return nil, false
	}
	m.busy++
	m.lastUsed = time.Now()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		m.busy--
		m.lastUsed = time.Now()
	}, true
}

// releaseMCPLocked gives back m's place and forgets it (it ended, or was
// never created). g.mu is held; calling it again does nothing.
func (g *Gateway) releaseMCPLocked(m *mcpSession) {
	m.end()
	g.uncountMCPLocked(m)
	if g.mcpByID[m.id] == m {
		delete(g.mcpByID, m.id)
	}
}

// uncountMCPLocked gives back m's place. g.mu is held.
func (g *Gateway) uncountMCPLocked(m *mcpSession) {
	if own := g.mcpByPrincipal[m.principal]; own[m.id] == m {
		delete(own, m.id)
		if len(own) == 0 {
			delete(g.mcpByPrincipal, m.principal)
		}
		g.mcpHeld--
	}
}

// closeMCP closes the MCP sessions the caps evicted, and drops their
// gateway sessions' histories.
func (g *Gateway) closeMCP(ctx context.Context, evicted []*mcpSession) {
	for _, m := range evicted {
		g.mu.Lock()
		srv, gw := m.srv, m.gw
		g.mu.Unlock()
		if gw != nil {
			g.forget(ctx, []*session{gw})
		}
		if srv == nil {
			continue
		}
		for ss := range srv.Sessions() {
			// Close waits for the session's requests in flight: not
			// here.
			go func() { _ = ss.Close() }()
		}
	}
}

// heldResponse holds a response until it is sent on (a DELETE's: a
// status and at most an error's text).
type heldResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (h *heldResponse) Header() http.Header { return h.header }

func (h *heldResponse) WriteHeader(code int) {
	if h.code == 0 {
		h.code = code
	}
}

func (h *heldResponse) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	return h.body.Write(b)
}

// end drops s because its MCP session ended: its state here and its
// history in the store (the decision log keeps its decisions; its
// history is no longer served). A call in progress finishes first.
func (g *Gateway) end(s *session) {
	s.mu.Lock()
	s.dropped = true
	s.mu.Unlock()
	// The store first: once the session has left the table, its history
	// is served by no one.
	g.deleteStored(context.Background(), s)
	g.mu.Lock()
	removed := g.removeLocked(s)
	g.mu.Unlock()
	if removed {
		g.metrics.sessionsEnded.Add(1)
	}
}

// endMCPSessionOf ends the session of key while it is one of MCP
// session ss (which ended): the one sessionFor began, or the fresh one
// that took its place when its stop lapsed (restartStopped).
func (g *Gateway) endMCPSessionOf(key string, ss *mcp.ServerSession) {
	for {
		g.mu.Lock()
		s := g.sessions[key]
		g.mu.Unlock()
		if s == nil || s.mcp != ss {
			return
		}
		g.end(s)
	}
}

// stopLapsed reports whether s was stopped SessionTTL ago or more: it
// has ended. s.mu is held.
func (g *Gateway) stopLapsed(s *session) bool {
	return s.aborted != "" && time.Since(s.stoppedAt) >= g.cfg.SessionTTL
}

// syncLive brings s up to the store (sync) and ends it when its stop or
// its loss lapsed, as this replica knew it or as the store says: the
// session to serve is returned locked, s or the fresh one that took its
// key (the caller unlocks that one too; on an error, the one that
// failed). s.mu is held; lock takes the key's lease for a restart, nil
// when the caller holds it.
func (g *Gateway) syncLive(ctx context.Context, s *session, lock func() (func(), error)) (*session, error) {
	cur := s
	restart := func() error {
		release := func() {}
		if lock != nil {
			var err error
			if release, err = lock(); err != nil {
				return err
			}
		}
		fresh, err := g.restartStopped(ctx, cur)
		release()
		if err != nil {
			return err
		}
		if cur != s {
			cur.mu.Unlock()
		}
		cur = fresh
		return nil
	}
	// What this replica derived may be the stopped session whose key a
	// fresh session took on another replica: its stop lapsed here too
	// (the same time on every replica), so it is not synced as if the
	// store had lost its history. Likewise a lost session whose loss
	// lapsed (lostLapsed), or that the store no longer marks lost
	// (sync's errLostEnded).
	if g.stopLapsed(cur) || g.lostLapsed(cur) {
		if err := restart(); err != nil {
			return cur, err
		}
	}
	err := cur.sync(ctx, g)
	if err != nil && !g.lostEnded(cur, err) {
		return cur, err
	}
	if err != nil || g.stopLapsed(cur) {
		if err := restart(); err != nil {
			return cur, err
		}
		if err := cur.sync(ctx, g); err != nil {
			return cur, err
		}
	}
	return cur, nil
}

// restartStopped ends s, whose stop or loss lapsed (docs/gateway.md,
// "The retry budget", "Several replicas"), and returns the fresh session
// that takes its key (the same principal, handle and MCP session),
// locked. The store's session of the key is deleted when it is still s's
// (staleRecord; else another replica began the fresh one, which this one
// joins). s.mu and the key's lease are held.
func (g *Gateway) restartStopped(ctx context.Context, s *session) (*session, error) {
	id, err := g.store.Open(ctx, s.key, newSessionID())
	if err != nil {
		return nil, err
	}
	stale, err := g.staleRecord(ctx, s, id)
	if err != nil {
		return nil, err
	}
	if stale {
		if err := g.store.Delete(ctx, s.key); err != nil {
			return nil, err
		}
		if id, err = g.store.Open(ctx, s.key, newSessionID()); err != nil {
			return nil, err
		}
	}
	eng := g.Engine()
	fresh := &session{id: id, key: s.key, principal: s.principal, ctxDoc: s.ctxDoc, run: eng.NewRun(), eng: eng, lastUsed: time.Now(), mcp: s.mcp}
	if f := s.notifier.Load(); f != nil {
		fresh.notifier.Store(f)
	}
	fresh.mu.Lock()
	s.dropped = true
	g.mu.Lock()
	ok := g.removeLocked(s)
	if ok {
		g.addLocked(fresh)
		s.fresh = fresh
	}
	g.mu.Unlock()
	if !ok {
		// Dropped meanwhile (its MCP session ended): nothing takes
		// its place.
		fresh.mu.Unlock()
		return nil, errEnded
	}
	g.metrics.sessions.Add(1)
	what := "a stopped session ended --session-ttl after it stopped; its principal's next request began a fresh one"
	if !s.lostAt.IsZero() {
		what = "a lost session ended --session-ttl after it was marked lost; its principal's next request began a fresh one"
	}
	g.log.Info(what, "session", s.id, "fresh", id, "principal", s.principal)
	return fresh, nil
}

// liveLocked locks s and returns it, or, when a fresh session took its
// key because its stop or its loss lapsed (restartStopped), that one,
// locked: a request that reached s while it was restarted is served by
// the session that took its place, not answered as ended.
func liveLocked(s *session) *session {
	s.mu.Lock()
	for s.dropped && s.fresh != nil {
		next := s.fresh
		s.mu.Unlock()
		next.mu.Lock()
		s = next
	}
	return s
}

// refuseStopped answers a call of a stopped session: closed, with the
// abort message, nothing written to the history; the decision log says
// why. The refusal does not renew the session: it ends SessionTTL after
// it stopped (syncLive), however often its client calls meanwhile.
func (g *Gateway) refuseStopped(s *session, name string) *mcp.CallToolResult {
	g.metrics.callsRefusedStopped.Add(1)
	g.logAborted(s, "", name, s.aborted)
	return toolError(s.aborted + stoppedSuffix)
}

// stoppedList is a stopped session's tools/list: no tool.
func stoppedList() *mcp.ListToolsResult {
	res := &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
	res.Cacheable = mcp.Cacheable{TTLMs: 0, CacheScope: "private"}
	return res
}

// abortIfExceeded stops the session when the decided call's refusal
// exceeded its tool's retry budget (engine.Decision.Err): the reference
// aborts the run instead of sending the retry.
func (g *Gateway) abortIfExceeded(s *session, d *engine.Decision, ts, name, id string) *mcp.CallToolResult {
	var ee *engine.ExceededError
	if !errors.As(d.Err(), &ee) {
		return nil
	}
	return g.abort(s, ts, name, id, ee.Error())
}

// failCharged answers an executed call's charged failure (an upstream's
// error result, a refused meta-tool call) with the retry prompt msg, or,
// when the tool's retry budget is spent, stops the session.
func (g *Gateway) failCharged(s *session, ts, name, id, msg string) *mcp.CallToolResult {
	if err := s.run.ReportFailure(name); err != nil {
		return g.abort(s, ts, name, id, err.Error())
	}
	s.answer(requestMessage(ts, retryPart(nil, ts, name, msg, id)))
	s.notes[len(s.notes)-1].Failure = name
	return nil
}

// abort stops the session with the abort message msg: the call is
// answered with it (in the history too, as the retry prompt the model
// got), its note carries it to every replica, and every later call is
// refused with it.
func (g *Gateway) abort(s *session, ts, name, id, msg string) *mcp.CallToolResult {
	s.answer(requestMessage(ts, retryPart(nil, ts, name, msg+stoppedSuffix, id)))
	s.stoppedAt = time.Now()
	s.notes[len(s.notes)-1].Abort = msg
	s.notes[len(s.notes)-1].StoppedAt = s.stoppedAt.UnixMilli()
	s.aborted = msg
	g.metrics.sessionsStopped.Add(1)
	g.log.Info("a call exceeded its tool's retry budget; the session is stopped", "session", s.id, "principal", s.principal, "tool", name)
	g.logAborted(s, id, name, msg)
	return toolError(msg + stoppedSuffix)
}

// logAborted writes the decision-log line of a session's abort (id is
// the call that exceeded the budget) or of a call refused because of it
// (no id): verdict "aborted", the reason, no decision.
func (g *Gateway) logAborted(s *session, id, name, msg string) {
	if g.cfg.DecisionLog == nil {
		return
	}
	line, err := json.Marshal(struct {
		Time      string `json:"time"`
		Session   string `json:"session"`
		Principal string `json:"principal"`
		Call      string `json:"tool_call_id,omitempty"`
		Tool      string `json:"tool"`
		Verdict   string `json:"verdict"`
		Reason    string `json:"reason"`
	}{timestamp(time.Now()), s.id, s.principal, id, name, verdictAborted, msg})
	if err != nil {
		g.log.Error("decision log", "error", err)
		return
	}
	g.logMu.Lock()
	defer g.logMu.Unlock()
	_, _ = g.cfg.DecisionLog.Write(append(line, '\n'))
}
