package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/lru"
)

// runTable is the bounded, evicting table of incremental runs. A miss
// (unknown, evicted or expired run) is answered 409: the client resends
// the whole history with offset 0.
type runTable struct {
	table *lru.Cache[*run]
}

func newRunTable(size int, ttl time.Duration, now func() time.Time) *runTable {
	return &runTable{table: lru.New[*run](size, ttl, now)}
}

// run is one agent run: an engine.Run (its facts kept incrementally, and
// the retry accounting of spec X8) and the registry it started with. Its
// mutex serializes the requests of one run; runs do not block each other.
type run struct {
	mu     sync.Mutex
	run    *engine.Run
	reg    *facts.Registry
	regKey string // digest of the request's registry; "" for the configured one
}

// runBody is the body of POST /v1/runs/{id}/decide.
type runBody struct {
	// Offset is the number of messages of the run the server already
	// holds: 0 starts (or restarts) the run with Messages as its whole
	// history; otherwise Messages are appended and Offset must equal the
	// length the server holds.
	Offset   *int            `json:"offset"`
	Messages json.RawMessage `json:"messages"`
	Context  json.RawMessage `json:"context"`
	// Registry is accepted with offset 0 only; the run keeps it.
	Registry json.RawMessage `json:"registry"`
	// Approvals answer calls of the response this request dispatches;
	// they are not kept for later requests.
	Approvals json.RawMessage `json:"approvals"`
}

// A run id is the client's name for a run: 1 to maxRunID bytes of UTF-8
// whose every character is printable (unicode.IsPrint: a letter, mark,
// number, punctuation, symbol or the ASCII space). Anything else (NUL,
// other control characters, invalid UTF-8, format characters such as a
// bidirectional override, line separators) is refused: an id is echoed in
// errors, written to decision logs and printed by replay, and no one
// means a run whose name cannot be shown. runIDRule states the rule in
// the 400 that refuses an id (README and docs/openapi.yaml say the same).
const (
	maxRunID  = 256
	runIDRule = "a run id is 1 to 256 bytes of UTF-8 whose characters are all printable (letters, marks, numbers, punctuation, symbols and the space; no control or format characters)"
)

// checkRunID refuses an id that breaks the rule for run ids (400).
func checkRunID(id string) *Error {
	if id != "" && len(id) <= maxRunID && utf8.ValidString(id) && !strings.ContainsFunc(id, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return nil
	}
	shown := "the run id " + strconv.Quote(id)
	if len(id) > maxRunID {
		shown = "a run id of " + strconv.Itoa(len(id)) + " bytes"
	}
	return badRequest(CodeSchema, shown+" is refused: "+runIDRule, "")
}

func conflict(msg string) *Error {
	return &Error{Status: http.StatusConflict, Code: CodeRunConflict,
		Message: msg + ": resend the whole history as \"messages\" with \"offset\": 0"}
}

func (s *Server) handleRunDecide(r *http.Request, body []byte) (any, *Error) {
	start := time.Now()
	st := s.state.Load()
	if !st.ready {
		return nil, notReady()
	}
	id := r.PathValue("id")
	if herr := checkRunID(id); herr != nil {
		return nil, herr
	}
	known := []string{"offset", "messages", "context", "registry", "approvals"}
	env, herr := scanEnvelope(body, known, "messages")
	if herr == nil {
		herr = env.refuseUnknown(known)
	}
	if herr != nil {
		return nil, herr
	}
	b := runBody{Messages: env.members["messages"], Context: env.members["context"], Registry: env.members["registry"],
		Approvals: env.members["approvals"]}
	if raw, ok := env.members["offset"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &b.Offset); err != nil {
			return nil, badRequest(CodeSchema, "offset must be a whole number", "/offset")
		}
	}
	if b.Offset == nil {
		return nil, badRequest(CodeSchema, "offset is required: the number of messages already sent for this run (0 to start it)", "/offset")
	}
	offset := *b.Offset
	if offset < 0 {
		return nil, badRequest(CodeSchema, "offset must not be negative", "/offset")
	}
	if isNull(b.Messages) {
		return nil, badRequest(CodeSchema, "messages is required (a JSON array of the messages appended since the last call)", "/messages")
	}
	if offset > 0 && !isNull(b.Registry) {
		return nil, badRequest(CodeSchema, "registry is accepted only when a run starts (offset 0)", "/registry")
	}
	ctxDoc, herr := s.parseContext(b.Context)
	if herr != nil {
		return nil, herr
	}
	approvals, herr := parseApprovals(b.Approvals)
	if herr != nil {
		return nil, herr
	}
	approvals = s.checkApprovals(approvals, id)
	msgs, herr := s.intake.appended(b.Messages, env.elements["messages"], offset)
	if herr != nil {
		return nil, herr
	}

	var rn *run
	if offset == 0 {
		eng, herr := s.engineFor(r.Context(), st, b.Registry)
		if herr != nil {
			return nil, herr
		}
		rn = &run{run: eng.NewRun(s.runEvidence(id)...), reg: eng.Registry()}
		if !isNull(b.Registry) {
			rn.regKey = registryKey(b.Registry)
		}
		s.runs.table.Put(id, rn)
		s.metrics.run("new")
	} else {
		var ok bool
		if rn, ok = s.runs.table.Get(id); !ok {
			s.metrics.run("conflict")
			return nil, conflict(fmt.Sprintf("run %q is unknown here (never started, evicted or expired)", id))
		}
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if have := rn.run.Len(); have != offset {
		s.metrics.run("conflict")
		return nil, conflict(fmt.Sprintf("run %q holds %d messages, the request's offset is %d", id, have, offset))
	}
	if offset > 0 {
		s.metrics.run("hit")
	}
	// The engine of the policies being served now: a bundle activated
	// since the run started decides its next step.
	eng, herr := s.runEngine(r, st, rn)
	if herr != nil {
		return nil, herr
	}
	rn.run.Rebind(eng)
	approvals, claim := s.claimApprovals(approvals, id)
	defer claim.release()
	d, err := rn.run.Step(r.Context(), msgs, ctxDoc, engine.WithApprovals(approvals))
	if err != nil {
		s.metrics.evalError(epRun)
		return nil, badRequest(CodeSchema, err.Error(), "/context")
	}
	if herr := s.stamp(d.Decision, id); herr != nil {
		return nil, herr
	}
	claim.settle(d.Decision)
	s.observe(r, epRun, id, st, d.Decision, ctxDoc, rn.run.Len(), len(body), start)
	return d, nil
}

func registryKey(raw json.RawMessage) string {
	sum := sha256Hex(raw)
	return sum
}

// runEngine returns the engine for a run's registry.
func (s *Server) runEngine(r *http.Request, st *policyState, rn *run) (*engine.Engine, *Error) {
	if rn.regKey == "" {
		if st.eng == nil {
			return nil, badRequest(CodeRegistryRequired, "the server has no registry configured", "/registry")
		}
		return st.eng, nil
	}
	key := strconv.FormatUint(st.gen, 10) + "/" + rn.regKey
	return s.registryEngine(r.Context(), st, key, func() (*facts.Registry, *Error) { return rn.reg, nil })
}

func (s *Server) handleRunDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if herr := checkRunID(id); herr != nil {
		writeError(w, herr)
		return
	}
	s.runs.table.Delete(id)
	w.WriteHeader(http.StatusNoContent)
}
