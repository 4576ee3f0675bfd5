package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/bits"
	"net/http"
	"strconv"
	"time"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
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
	mux.Handle("/v1/facts", s.post(epFacts, s.handleFacts))
	mux.Handle("/v1/explain", s.post(epExplain, s.handleExplain))
	mux.Handle("/v1/runs/{id}/decide", s.post(epRun, s.handleRunDecide))
	mux.Handle("/v1/runs/{id}", s.method(http.MethodDelete, "run_delete", s.handleRunDelete))
	mux.Handle("/health", s.method(http.MethodGet, "health", s.handleHealth))
	mux.Handle("/metrics", s.method(http.MethodGet, "metrics", s.metrics.handler().ServeHTTP))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such endpoint: " + r.URL.Path})
	})
	s.mux = mux
	s.handler = s.authenticate(mux)
}

// method admits one HTTP method (GET also admits HEAD) and answers 405
// with an Allow header otherwise.
func (s *Server) method(m, route string, h http.HandlerFunc) http.Handler {
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
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h(rec, r)
		s.metrics.request(route, rec.status)
	})
}

// post admits POST requests whose handler returns either a response
// value or an *Error.
//
// A body is read into a pooled buffer. A handler that keeps nothing that
// aliases it (no decoded message, no cache entry) says so with
// releaseBody, and the buffer goes back to the pool once the response is
// written: at a megabyte per request, allocating and zeroing bodies and
// collecting them was a third of a resumed request's cost. Any other
// body is left to the garbage collector.
func (s *Server) post(route string, h func(*http.Request, []byte) (any, *Error)) http.Handler {
	return s.method(http.MethodPost, route, func(w http.ResponseWriter, r *http.Request) {
		body, herr := s.readBody(w, r)
		if herr == nil {
			var free bool
			r = r.WithContext(context.WithValue(r.Context(), bodyFreeKey{}, &free))
			var out any
			out, herr = h(r, body)
			if herr == nil {
				writeJSON(w, http.StatusOK, out)
				if free {
					s.putBody(body)
				}
				return
			}
		}
		writeError(w, herr)
	})
}

type bodyFreeKey struct{}

// releaseBody tells post that nothing the handler keeps aliases the body.
func releaseBody(ctx context.Context) {
	if free, ok := ctx.Value(bodyFreeKey{}).(*bool); ok {
		*free = true
	}
}

// Body buffers at least this large are pooled (smaller ones cost little).
const minPooledBody = 64 << 10

func (s *Server) getBody(n int) []byte {
	if n >= minPooledBody {
		if p, ok := s.bodies.Get().(*[]byte); ok {
			if cap(*p) >= n {
				return (*p)[:n]
			}
		}
	}
	// Room to grow: a client's next body is usually its last one plus a
	// message, and should fit the buffer this one returns to the pool.
	// Rounded up to an eighth of the next power of two: at most 1/8 spare.
	c := n
	if n >= minPooledBody {
		step := (1 << bits.Len(uint(n))) / 8
		c = (n + step) / step * step
	}
	return make([]byte, n, c)
}

func (s *Server) putBody(b []byte) {
	if cap(b) >= minPooledBody {
		b = b[:0]
		s.bodies.Put(&b)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Error) {
	if r.ContentLength > s.cfg.maxBody {
		return nil, tooLarge(s.cfg.maxBody)
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.maxBody)
	var data []byte
	var err error
	if n := r.ContentLength; n >= 0 {
		// The length is known: read into a buffer of exactly that size
		// (bytes.Buffer.ReadFrom would grow it, copying the whole body,
		// when it fills up), then make sure nothing follows.
		data = s.getBody(int(n))
		if _, err = io.ReadFull(body, data); err == nil {
			var one [1]byte
			if m, _ := body.Read(one[:]); m > 0 {
				err = errors.New("the body is longer than its Content-Length")
			}
		}
	} else {
		data, err = io.ReadAll(body)
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(s.cfg.maxBody)
		}
		return nil, badRequest(CodeSyntax, "reading the body: "+err.Error(), "")
	}
	return data, nil
}

func tooLarge(max int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeLimit,
		Message: "the body is over the limit of " + strconv.FormatInt(max, 10) + " bytes"}
}

// writeJSON writes v as policycheck eval does: two-space indentation, no
// HTML escaping, a final newline.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeError(w, &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// decideBody is the body of /v1/decide, /v1/facts and /v1/explain.
type decideBody struct {
	Registry json.RawMessage `json:"registry"`
	History  json.RawMessage `json:"history"`
	Context  json.RawMessage `json:"context"`
}

// request is a validated stateless request: its history decoded whole,
// or, when the prefix cache held its beginning, only the facts of the
// whole history.
type request struct {
	st       *policyState
	eng      *engine.Engine
	history  facts.History // nil when facts is set
	facts    *facts.Facts
	messages int
	context  any
}

// engineRequest is the engine's request for r.
func (r *request) engineRequest() engine.Request {
	if r.facts != nil {
		return engine.Request{Facts: r.facts, Context: r.context}
	}
	return engine.Request{History: r.history, Context: r.context}
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// parse validates a stateless request: the registry (or the configured
// one), the history (decoder and JSON Schema) and the context. With
// prefixes set, a history that begins with a prefix the cache holds is
// resumed from it (see prefixCache); explanations, which need every
// message, do not ask for that.
func (s *Server) parse(ctx context.Context, body []byte, prefixes bool) (*request, *Error) {
	st := s.state.Load()
	if !st.ready {
		return nil, notReady()
	}
	var hit *prefixEntry
	var resume func([]byte) int
	pc := s.prefixes
	if prefixes && pc != nil {
		resume = func(arr []byte) int {
			if hit = pc.find(arr); hit == nil {
				return 0
			}
			return len(hit.hist)
		}
	}
	env, herr := scanEnvelopeResume(body, []string{"registry", "history", "context"}, resume, "history")
	if herr != nil {
		return nil, herr
	}
	b := decideBody{Registry: env.members["registry"], History: env.members["history"], Context: env.members["context"]}
	if isNull(b.History) {
		return nil, badRequest(CodeSchema, "history is required (a JSON array of messages)", "/history")
	}
	eng, herr := s.engineFor(ctx, st, b.Registry)
	if herr != nil {
		return nil, herr
	}
	c, herr := parseContext(b.Context)
	if herr != nil {
		return nil, herr
	}
	if hit != nil && env.resumedN > 0 {
		if req := s.resumeHistory(hit, env, body, eng); req != nil {
			pc.hits.Add(1)
			// Nothing kept aliases the body: the new messages were decoded
			// from a copy and the cache holds its own copy of the bytes.
			releaseBody(ctx)
			req.st, req.context = st, c
			return req, nil
		}
		// Anything unusual in the new messages (an error to report, a
		// limit, a concurrent request that took the prefix): the full
		// path decides, and reports errors, exactly as without the cache.
		pc.fallbacks.Add(1)
		return s.parse(ctx, body, false)
	}
	elems := env.elements["history"]
	keys := s.hash.keys(elems)
	h, err := s.messages.decodeHistory(b.History, elems, keys, s.cfg.limits)
	if err != nil {
		return nil, fromLoader(err, "/history")
	}
	if s.cfg.schema {
		if err := s.schema.validate(elems, keys); err != nil {
			return nil, fromLoader(err, "/history")
		}
	}
	if pc != nil && len(h) > 0 {
		if prefixes {
			pc.misses.Add(1)
		}
		parts := 0
		for i := range h {
			parts += len(h[i].Parts)
		}
		e := newPrefixEntry(keys[0], body[env.arrStart:env.lastEnd])
		e.count, e.parts, e.reg, e.history = len(h), parts, eng.Registry(), h
		pc.put(e)
	}
	return &request{st: st, eng: eng, history: h, messages: len(h), context: c}, nil
}

// resumeHistory finishes a request whose history began with the cached
// prefix hit: it decodes and checks only the messages after the prefix,
// extends the prefix's facts with them and remembers the longer prefix.
// It returns nil, leaving the cache as it was, when the full path must
// decide instead: the registry differs, a new message is invalid, a limit
// is reached, or another request took the prefix first.
func (s *Server) resumeHistory(hit *prefixEntry, env *envelope, body []byte, eng *engine.Engine) *request {
	reg := eng.Registry()
	if hit.reg != reg {
		return nil
	}
	lim := s.cfg.limits
	elems := env.elements["history"]
	total := hit.count + len(elems)
	if (lim.MaxMessages > 0 && total > lim.MaxMessages) ||
		(lim.MaxBytes > 0 && int64(len(env.members["history"])) > lim.MaxBytes) {
		return nil
	}
	var msgs []facts.Message
	parts := hit.parts
	if len(elems) > 0 {
		all := make([]int, len(elems))
		for k := range all {
			all[k] = k
		}
		batch := joinArray(elems, all)
		blim := lim
		blim.MaxBytes, blim.MaxMessages, blim.MaxParts = 0, 0, 0
		var err error
		if msgs, err = loader.DecodeMessages("request", batch, hit.count, blim); err != nil || len(msgs) != len(elems) {
			return nil
		}
		for i := range msgs {
			parts += len(msgs[i].Parts)
		}
		if lim.MaxParts > 0 && parts > lim.MaxParts {
			return nil
		}
		if s.cfg.schema {
			if err := s.schema.validate(elems, s.hash.keys(elems)); err != nil {
				return nil
			}
		}
	}
	if !s.prefixes.take(hit) {
		return nil
	}
	tr := hit.tracker
	if tr == nil {
		tr = facts.NewTracker(reg)
		tr.Append(hit.history...)
	}
	tr.Append(msgs...)
	f := tr.Facts()
	// A new entry even for the same bytes: requests that found hit but
	// lost the race to take it still read its fields.
	next := newPrefixEntry(hit.first, hit.hist)
	next.owned = hit.owned
	if len(elems) > 0 {
		// The cache's own copy of the bytes, grown in place when it has
		// room (readers of hit only read below its length).
		tail := body[env.arrStart+len(hit.hist) : env.lastEnd]
		if hit.owned && cap(hit.hist)-len(hit.hist) >= len(tail) {
			next.hist = append(hit.hist, tail...)
		} else {
			n := len(hit.hist) + len(tail)
			buf := make([]byte, 0, n+n/2)
			next.hist = append(append(buf, hit.hist...), tail...)
		}
		next.owned = true
	}
	next.count, next.parts, next.reg, next.tracker, next.history = total, parts, reg, tr, nil
	s.prefixes.put(next)
	return &request{eng: eng, facts: &f, messages: total}
}

func notReady() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: CodeNotReady,
		Message: "policies are not loaded yet (waiting for the first bundle activation); see GET /health"}
}

func parseContext(raw json.RawMessage) (any, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badRequest(CodeSyntax, "invalid JSON: "+err.Error(), "/context")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, badRequest(CodeSchema, "the context must be a JSON object", "/context")
	}
	return v, nil
}

// engineFor returns the engine for a request's registry: the configured
// one when the request carries none, otherwise one compiled for the
// registry and kept in an LRU keyed by the policy generation and the
// digest of the registry's bytes.
func (s *Server) engineFor(ctx context.Context, st *policyState, raw json.RawMessage) (*engine.Engine, *Error) {
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
	if e, ok := s.engines.get(key); ok {
		s.metrics.engineCache(true)
		return e, nil
	}
	s.metrics.engineCache(false)
	v, err, _ := s.compiling.Do(key, func() (any, error) {
		if e, ok := s.engines.get(key); ok {
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
		s.engines.put(key, e)
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
func parseRegistry(raw json.RawMessage) (*facts.Registry, *Error) {
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
	req, herr := s.parse(r.Context(), body, true)
	if herr != nil {
		return nil, herr
	}
	d, err := req.eng.Decide(r.Context(), req.engineRequest(), engine.WithDeadline(s.cfg.timeout))
	if err != nil {
		s.metrics.evalError(epDecide)
		return nil, badRequest(CodeSchema, err.Error(), "/context")
	}
	s.observe(r, epDecide, "", req.st, d, req.context, req.messages, start)
	return d, nil
}

// handleFacts answers the facts as `policycheck facts` prints them, or,
// with ?format=input, the Rego input document.
func (s *Server) handleFacts(r *http.Request, body []byte) (any, *Error) {
	req, herr := s.parse(r.Context(), body, true)
	if herr != nil {
		return nil, herr
	}
	switch format := r.URL.Query().Get("format"); format {
	case "", "facts":
		f := req.facts
		if f == nil {
			derived := facts.Derive(req.history, req.eng.Registry())
			f = &derived
		}
		return engine.ReportFacts(f), nil
	case "input":
		doc, err := req.eng.Input(r.Context(), req.engineRequest())
		if err != nil {
			return nil, badRequest(CodeSchema, err.Error(), "/context")
		}
		return doc, nil
	default:
		return nil, badRequest(CodeSchema, "format must be facts or input, not "+strconv.Quote(format), "")
	}
}

func (s *Server) handleExplain(r *http.Request, body []byte) (any, *Error) {
	start := time.Now()
	req, herr := s.parse(r.Context(), body, false)
	if herr != nil {
		return nil, herr
	}
	x, err := req.eng.Explain(r.Context(), engine.Request{History: req.history, Context: req.context})
	if err != nil {
		s.metrics.evalError(epExplain)
		return nil, badRequest(CodeSchema, err.Error(), "/context")
	}
	s.observe(r, epExplain, "", req.st, x.Decision, req.context, req.messages, start)
	return x, nil
}

// observe records a decision in the metrics and the decision log.
func (s *Server) observe(r *http.Request, endpoint, run string, st *policyState, d *engine.Decision, ctxDoc any, messages int, start time.Time) {
	s.metrics.decision(endpoint, d, time.Since(start))
	s.logDecision(r, endpoint, run, st, d, ctxDoc, messages)
}

// Health is the body of GET /health.
type Health struct {
	Status           string                  `json:"status"` // "ok" or "not_ready"
	PolicyRevision   string                  `json:"policy_revision"`
	RegistryRevision string                  `json:"registry_revision,omitempty"`
	Bundles          map[string]BundleHealth `json:"bundles,omitempty"`
}

// BundleHealth is one configured bundle's state.
type BundleHealth struct {
	// Serving is the revision decisions are made with ("" before the
	// first activation).
	Serving string `json:"serving"`
	// Active is the revision OPA's bundle plugin last activated.
	Active string `json:"active,omitempty"`
	// Error is why the last download or activation was refused, if it
	// was; the serving revision keeps serving.
	Error string `json:"error,omitempty"`
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	st := s.state.Load()
	h := Health{Status: "ok", PolicyRevision: st.rev, Bundles: s.bundles.health(st)}
	if st.eng != nil {
		_, h.RegistryRevision = st.eng.Revision()
	}
	status := http.StatusOK
	if !st.ready {
		h.Status, status = "not_ready", http.StatusServiceUnavailable
	}
	writeJSON(w, status, h)
}
