package server

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
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/faults"
	"github.com/policycheck/policycheck/internal/ground/jsonout"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server/internal/opaplugins"
)

// Endpoint names, as they appear in metrics and decision logs.
const (
	epDecide  = "decide"
	epFacts   = "facts"
	epExplain = "explain"
	epRun     = "run_decide"
)

func (s *Server) routes() {
	mux := http.NewServeMux()
	mux.Handle("/v1/decide", s.post(epDecide, s.handleDecide))
	mux.Handle("/v1/facts", s.post(epFacts, s.handleFacts, "format"))
	mux.Handle("/v1/explain", s.post(epExplain, s.handleExplain))
	mux.Handle("/v1/runs/{id}/decide", s.post(epRun, s.handleRunDecide))
	mux.Handle("/v1/runs/{id}", s.method(http.MethodDelete, "run_delete", nil, s.handleRunDelete))
	health := s.method(http.MethodGet, "health", nil, s.handleHealth)
	metrics := s.method(http.MethodGet, "metrics", nil, s.metrics.handler().ServeHTTP)
	mux.Handle("/health", health)
	mux.Handle("/metrics", metrics)
	if s.cfg.Receipts != nil {
		mux.Handle("/v1/keys", s.method(http.MethodGet, "keys", nil, s.cfg.Receipts.ServeHTTP))
	}
	if s.cfg.Debug != nil {
		mux.Handle("/debug/", s.cfg.Debug)
	}
	mux.Handle("/", notFound(""))
	s.handler = s.refuseBrowsers(s.authenticate(mux))

	diag := http.NewServeMux()
	diag.Handle("/health", health)
	diag.Handle("/metrics", metrics)
	diag.Handle("/", notFound(" (a diagnostic address serves only /health and /metrics)"))
	s.diagnostic = s.refuseBrowsers(s.authenticate(diag))
}

// notFound answers 404 for any path, its message ending with more.
func notFound(more string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such endpoint: " + r.URL.Path + more})
	})
}

// method admits one HTTP method (GET also admits HEAD) and answers 405
// with an Allow header otherwise; a query parameter other than query, the
// ones the endpoint reads, is refused (400) rather than ignored:
// /v1/decide?format=input would otherwise answer a decision to a client
// that asked for the input document.
func (s *Server) method(m, route string, query []string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m && !(m == http.MethodGet && r.Method == http.MethodHead) {
			allow := m
			if m == http.MethodGet {
				allow += ", HEAD"
			}
			w.Header().Set("Allow", allow)
			s.metrics.request(route, http.StatusMethodNotAllowed)
			writeError(w, &Error{Status: http.StatusMethodNotAllowed, Code: CodeMethod,
				Message: r.Method + " is not allowed here; use " + m})
			return
		}
		if herr := refuseQuery(r, query); herr != nil {
			s.metrics.request(route, herr.Status)
			writeError(w, herr)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h(rec, r)
		s.metrics.request(route, rec.status)
	})
}

// refuseQuery refuses a request with a query parameter other than
// query, naming the first in sorted order.
func refuseQuery(r *http.Request, query []string) *Error {
	if r.URL.RawQuery == "" {
		return nil // the usual request: nothing to parse
	}
	params := r.URL.Query()
	names := make([]string, 0, len(params))
	for name := range params {
		if !slices.Contains(query, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	reads := "no query parameters"
	if len(query) > 0 {
		reads = "only " + strings.Join(query, ", ")
	}
	return &Error{Status: http.StatusBadRequest, Code: CodeQuery,
		Message: "query parameter " + strconv.Quote(names[0]) + " is not read by " + r.URL.Path + ", which reads " + reads}
}

// post admits POST requests whose handler returns either a response
// value or an *Error. The intake reads the body; from then on the
// request's context carries the server's timeout, so that scanning,
// decoding and deciding all count against it, and a decision reached
// past it fails closed.
//
// The stateless endpoints' bodies may be pooled (intake.read): such a
// body is reused once the answer is written, unless the handler marked
// it kept (keepBody). The run endpoint keeps the messages it appends, so
// its bodies are never pooled.
func (s *Server) post(route string, h func(*http.Request, []byte) (any, *Error), query ...string) http.Handler {
	return s.method(http.MethodPost, route, query, func(w http.ResponseWriter, r *http.Request) {
		body, pooled, herr := s.intake.read(w, r, route != epRun)
		if herr == nil {
			s.intake.hold(len(body))
			defer s.intake.release(len(body))
			ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
			defer cancel()
			if pooled {
				use := &bodyUse{}
				ctx = context.WithValue(ctx, bodyUseKey{}, use)
				defer func() {
					if !use.kept {
						s.intake.reuse(body)
					}
				}()
			}
			if s.cfg.faults != nil {
				ctx = faults.With(ctx, s.cfg.faults)
			}
			var out any
			var dd decided
			ctx = context.WithValue(ctx, decidedKey{}, &dd)
			out, herr = s.recovering(route, h, r.WithContext(ctx), body)
			if dd.rev != "" && herr == nil {
				w.Header().Set("Policycheck-Policy-Revision", dd.rev)
			}
			if dd.id != "" {
				w.Header().Set("Policycheck-Decision-Id", dd.id)
			}
			if page, ok := out.(htmlPage); ok && herr == nil {
				page.write(w)
				return
			}
			if herr == nil {
				writeJSON(w, http.StatusOK, out)
				return
			}
		}
		writeError(w, herr)
	})
}

// recovering calls h, answering a panic on its path (a bug outside the
// engine's decision, which recovers its own) with a 500 that says so,
// counted in policycheck_recovered_panics_total and logged with its
// stack. A run step is left as it was (engine.Run.Step), so the client
// may send it again.
func (s *Server) recovering(route string, h func(*http.Request, []byte) (any, *Error), r *http.Request, body []byte) (out any, herr *Error) {
	defer func() {
		if v := recover(); v != nil {
			s.metrics.panicked(route)
			s.cfg.Logger.Error("recovered a panic on a request's path: the request is answered 500, nothing was decided",
				"endpoint", route, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			out, herr = nil, &Error{Status: http.StatusInternalServerError, Code: CodeInternal,
				Message: fmt.Sprintf("internal error: the request could not be decided (a bug: the sidecar recovered from a panic); nothing was decided and a run is as it was: %v", v)}
		}
	}()
	return h(r, body)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

// Unwrap lets http.ResponseController reach the connection (the intake
// sets the body's read deadline through it).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// writeJSON writes v as policycheck eval does: two-space indentation, no
// HTML escaping, a final newline. Errors are written so too (writeError).
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := jsonout.Encode(&buf, v); err != nil {
		writeError(w, &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// request is a validated stateless request.
type request struct {
	st      *policyState
	eng     *engine.Engine
	history *history
	// historyJSON is the body's history member, as the history decoder
	// read it.
	historyJSON []byte
	context     any
	// approvals are DeferredToolResults.approvals with each call's
	// digest (loader.ParseApprovalsMap); /v1/facts refuses them.
	approvals facts.Approvals
}

// engineRequest is the engine's request for r.
func (r *request) engineRequest() engine.Request {
	if r.history.facts != nil {
		return engine.Request{Facts: r.history.facts, Context: r.context, Approvals: r.approvals}
	}
	return engine.Request{History: r.history.messages, Context: r.context, Approvals: r.approvals}
}

func isNull(raw []byte) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// parse validates a stateless request through the intake: the registry
// (or the configured one), the history and the context. With resume, a
// history that begins with a remembered prefix resumes from it.
func (s *Server) parse(ctx context.Context, body []byte, resume bool) (*request, *Error) {
	st := s.state.Load()
	if !st.ready {
		return nil, notReady()
	}
	env, eng, h, herr := s.intake.stateless(body, resume, func(raw []byte) (*engine.Engine, *Error) {
		return s.engineFor(ctx, st, raw)
	})
	if h != nil && h.keptBody {
		keepBody(ctx) // the prefix cache holds it
	}
	if herr != nil {
		return nil, herr
	}
	c, herr := s.parseContext(env.Members["context"])
	if herr != nil {
		return nil, herr
	}
	approvals, herr := parseApprovals(env.Members["approvals"])
	if herr != nil {
		return nil, herr
	}
	return &request{st: st, eng: eng, history: h, historyJSON: env.Members["history"], context: c, approvals: s.checkApprovals(approvals, "")}, nil
}

// contextError is the 400 of an engine's refusal of a request: at the
// context, and at the JSON pointer inside it of a context that fails the
// registry's context_schema.
func contextError(err error) *Error {
	var ce *engine.ContextError
	if errors.As(err, &ce) {
		return badRequest(CodeSchema, ce.Detail(), "/context"+ce.Pointer())
	}
	return badRequest(CodeSchema, err.Error(), "/context")
}

// parseApprovals reads a request's approvals (null or absent: none).
func parseApprovals(raw []byte) (facts.Approvals, *Error) {
	a, err := loader.ParseApprovalsMap("request", "/approvals", raw)
	if err != nil {
		return nil, fromLoader(err, "")
	}
	return a, nil
}

func notReady() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeNotReady,
		Message: "policies are not loaded yet (waiting for the first bundle activation); see GET /health"}
}

// parseContext checks a request's context: absent, null or a JSON
// object. The envelope scan has checked its syntax, so it is passed on as
// its bytes and the engine converts it, once, to a Rego value.
func (s *Server) parseContext(raw []byte) (any, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	if s.cfg.MaxContext > 0 && len(raw) > s.cfg.MaxContext {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeLimit, Pointer: "/context",
			Message: "the context is " + strconv.Itoa(len(raw)) + " bytes, over the limit of " + strconv.Itoa(s.cfg.MaxContext)}
	}
	if raw[0] != '{' {
		return nil, badRequest(CodeSchema, "the context must be a JSON object", "/context")
	}
	return json.RawMessage(raw), nil
}

// engineFor returns the engine for a request's registry: the configured
// one when the request carries none, otherwise one compiled for the
// registry and kept in an LRU keyed by the policy generation and the
// digest of the registry's bytes.
func (s *Server) engineFor(ctx context.Context, st *policyState, raw []byte) (*engine.Engine, *Error) {
	if isNull(raw) {
		if st.eng == nil {
			return nil, badRequest(CodeRegistryRequired, "the server has no registry configured: send one in \"registry\"", "/registry")
		}
		return st.eng, nil
	}
	key := strconv.FormatUint(st.gen, 10) + "/" + sha256Hex(raw)
	return s.registryEngine(ctx, st, key, func() (*facts.Registry, *Error) { return parseRegistry(raw) })
}

// registryEngine returns the engine compiled for a request's registry,
// kept in the LRU under key (the policy generation and the digest of the
// registry's bytes). Concurrent requests with one new registry share one
// compilation: the first compiles, the others wait for its result,
// instead of each spending a compilation's CPU at once.
func (s *Server) registryEngine(ctx context.Context, st *policyState, key string,
	registry func() (*facts.Registry, *Error)) (*engine.Engine, *Error) {
	if e, ok := s.engines.Get(key); ok {
		s.metrics.engineCache(true)
		return e, nil
	}
	s.metrics.engineCache(false)
	v, err, _ := s.compiling.Do(key, func() (any, error) {
		if e, ok := s.engines.Get(key); ok {
			return e, nil // compiled while this request waited for the lock
		}
		reg, herr := registry()
		if herr != nil {
			return nil, herr
		}
		// The compilation serves every request waiting on it: one client
		// going away must not fail the others.
		e, err := s.newEngine(context.WithoutCancel(ctx), st, reg)
		if err != nil {
			return nil, fromPolicy(err)
		}
		s.metrics.engineCompiled()
		s.engines.Put(key, e)
		return e, nil
	})
	if err != nil {
		return nil, err.(*Error)
	}
	return v.(*engine.Engine), nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// parseRegistry reads a registry given as a JSON object or as a string of
// YAML or JSON.
func parseRegistry(raw []byte) (*facts.Registry, *Error) {
	data := []byte(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, badRequest(CodeSyntax, err.Error(), "/registry")
		}
		data = []byte(text)
	}
	reg, err := loader.ParseRegistry("request", data)
	if err != nil {
		return nil, fromRegistry(err)
	}
	return reg, nil
}

func (s *Server) handleDecide(r *http.Request, body []byte) (any, *Error) {
	start := time.Now()
	// Verified evidence derives each request's facts afresh: a receipt
	// that verified for a remembered prefix may have expired since.
	req, herr := s.parse(r.Context(), body, !s.cfg.VerifiedEvidence)
	if herr != nil {
		return nil, herr
	}
	var claim *approvalClaim
	req.approvals, claim = s.claimApprovals(req.approvals, "")
	defer claim.release()
	d, err := req.eng.Decide(r.Context(), req.engineRequest(), append(s.evidence(), s.receipts(""))...)
	if err != nil {
		return nil, s.decideError(epDecide, err)
	}
	claim.settle(d)
	s.observe(r, epDecide, "", req.st, d, req.context, req.history.count, len(body), start)
	return d, nil
}

// handleFacts answers the facts as `policycheck facts` prints them, or,
// with ?format=input, the Rego input document.
func (s *Server) handleFacts(r *http.Request, body []byte) (any, *Error) {
	req, herr := s.parse(r.Context(), body, !s.cfg.VerifiedEvidence)
	if herr != nil {
		return nil, herr
	}
	if s.cfg.VerifiedEvidence {
		// The facts the decision would be made on.
		f := facts.Derive(req.history.messages, req.eng.Registry(), req.eng.FactOptions(), facts.VouchedBy(engine.EvidenceVoucher(s.cfg.Receipts)))
		req.history.facts = &f
	}
	if req.approvals != nil {
		return nil, badRequest(CodeSchema, "approvals are not read by /v1/facts: send them to /v1/decide, /v1/explain or a run", "/approvals")
	}
	switch format := r.URL.Query().Get("format"); format {
	case "", "facts":
		f := req.history.facts
		if f == nil {
			derived := facts.Derive(req.history.messages, req.eng.Registry())
			f = &derived
		}
		return engine.ReportFacts(f), nil
	case "input":
		doc, err := req.eng.Input(r.Context(), req.engineRequest())
		if err != nil {
			return nil, contextError(err)
		}
		return doc, nil
	default:
		return nil, badRequest(CodeSchema, "format must be facts or input, not "+strconv.Quote(format), "")
	}
}

func (s *Server) handleExplain(r *http.Request, body []byte) (any, *Error) {
	start := time.Now()
	media, herr := explainMedia(r)
	if herr != nil {
		return nil, herr
	}
	req, herr := s.parse(r.Context(), body, false)
	if herr != nil {
		return nil, herr
	}
	// Explain reads whether a signature is used, and uses none.
	approvals, claim := s.claimApprovals(req.approvals, "")
	defer claim.release()
	x, err := req.eng.Explain(r.Context(), engine.Request{History: req.history.messages, Context: req.context, Approvals: approvals}, s.evidence()...)
	if err != nil {
		s.metrics.evalError(epExplain)
		return nil, contextError(err)
	}
	s.observe(r, epExplain, "", req.st, x.Decision, req.context, req.history.count, len(body), start)
	if media == mediaHTML {
		return explainPage(x, req.historyJSON, s.intake.reader.Limits)
	}
	return x, nil
}

// observe records a decision in the metrics and the decision log; size is
// the bytes of the request's body.
func (s *Server) observe(r *http.Request, endpoint, run string, st *policyState, d *engine.Decision, ctxDoc any, messages int, size int, start time.Time) {
	s.metrics.decision(endpoint, d, time.Since(start))
	if d.Panicked() {
		s.cfg.Logger.Error("the engine recovered from a panic while deciding: the decision failed closed",
			"endpoint", endpoint, "error", d.Errors[0], "stack", string(d.PanicStack()))
	}
	id := "" // the decision log event's; the response names it
	if s.decisionLogs() {
		id = newDecisionID()
	}
	// The shadow worker logs a shadowed decision, with the shadow's result.
	if !s.shadowed(r.RemoteAddr, id, endpoint, run, st, d, ctxDoc, messages, int64(size)) &&
		!s.logDecision(r, id, endpoint, run, st, d, ctxDoc, messages) {
		id = ""
	}
	noteDecided(r, decided{rev: d.PolicyRevision, id: id})
}

// Health is the body of GET /health.
type Health struct {
	// Status is "not_ready" (503) until the policies are loaded, then
	// "ok", or "degraded" (still 200: decisions are made) when a bundle's
	// last download or activation was refused, a bundle server has
	// stopped answering, the decision-log sink is degraded, the last
	// reload of the policies (LastReload) or of the receipt key
	// (ReceiptKeyReload) was refused.
	Status string `json:"status"`
	// Reasons says why Status is degraded, one line per cause.
	Reasons          []string                `json:"reasons,omitempty"`
	PolicyRevision   string                  `json:"policy_revision"`
	RegistryRevision string                  `json:"registry_revision,omitempty"`
	Bundles          map[string]BundleHealth `json:"bundles,omitempty"`
	// Plugins is the state of each of OPA's plugins (decision_logs,
	// bundle, status, discovery) as its manager reports it: OK,
	// NOT_READY, ERROR or WARN, with the plugin's message.
	Plugins map[string]PluginHealth `json:"plugins,omitempty"`
	// LastReload is the outcome of the last Reload (serve --watch), if
	// any: a refused one, and one that dropped packages or rules, show
	// here while the server keeps answering.
	LastReload *ReloadHealth `json:"last_reload,omitempty"`
	// ReceiptKeyReload is the outcome of the last reload of the receipt
	// key (serve --watch on --receipt-key), if any: a refused one shows
	// here (and makes Status degraded) while the current key keeps signing.
	ReceiptKeyReload *KeyReloadHealth `json:"receipt_key_reload,omitempty"`
	// DecisionLogs is the decision-log sink's state, when decision logs
	// are configured.
	DecisionLogs *DecisionLogHealth `json:"decision_logs,omitempty"`
}

// PluginHealth is one OPA plugin's state.
type PluginHealth struct {
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
}

// BundleHealth is one configured bundle's state (its fields are
// documented in server/internal/opaplugins).
type BundleHealth = opaplugins.BundleHealth

// DecisionLogHealth is the state of the decision-log sink (OPA's
// decision-log plugin and the service it uploads to); its fields are
// documented in server/internal/opaplugins.
type DecisionLogHealth = opaplugins.DecisionLogHealth

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	st := s.state.Load()
	h := Health{Status: "ok", PolicyRevision: st.rev, Bundles: s.bundles.Health(st.served), LastReload: s.lastReload.Load(),
		ReceiptKeyReload: s.lastKeyReload.Load()}
	degraded := func(why string) {
		h.Status = "degraded"
		h.Reasons = append(h.Reasons, why)
	}
	if st.eng != nil {
		_, h.RegistryRevision = st.eng.Revision()
	}
	if s.mgr != nil {
		h.Plugins = map[string]PluginHealth{}
		for name, ps := range s.mgr.PluginStatus() {
			if ps != nil {
				h.Plugins[name] = PluginHealth{State: string(ps.State), Message: ps.Message}
			}
		}
		if lp := logs.Lookup(s.mgr); lp != nil && lp.Config().Service != "" {
			h.DecisionLogs = s.logSink.Health()
			if h.DecisionLogs.State != "ok" {
				degraded("decision-log sink degraded: " + h.DecisionLogs.Message)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(h.Bundles)) {
		switch b := h.Bundles[name]; {
		case b.Error != "":
			degraded(fmt.Sprintf("bundle %s: %s", name, b.Error))
		case b.Stale:
			degraded(fmt.Sprintf("bundle %s: its server has stopped answering", name))
		}
	}
	if r := h.LastReload; r != nil && r.Result == "refused" {
		degraded("policy reload refused (the last good policies keep serving): " + r.Error)
	}
	if r := h.ReceiptKeyReload; r != nil && r.Result == "refused" {
		degraded("receipt key reload refused (the current key keeps signing): " + r.Error)
	}
	status := http.StatusOK
	if !st.ready {
		h.Status, status = "not_ready", http.StatusServiceUnavailable
	}
	writeJSON(w, status, h)
}
