package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/policycheck/policycheck/internal/ground/faults"
	"github.com/policycheck/policycheck/internal/ground/lru"
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
// the retry accounting of spec X8), the registry it started with and its
// generation. Its mutex serializes the requests of one run; runs do not
// block each other.
type run struct {
	mu     sync.Mutex
	run    *engine.Run
	reg    *facts.Registry
	regKey string // digest of the request's registry; "" for the configured one
	// gen is the run's generation (runGeneration): a digest of the run's
	// id, registry and every step's messages as the client sent them,
	// answered with each step; the next step must send it back.
	gen string
	// size is the run's history against the limits of a whole history
	// (intake.grown): a run grows past them no more than /v1/decide
	// takes a history over them.
	size runSize
}

// runGeneration is the generation of a run after a step that sent
// messages (the raw JSON array of the request's "messages"): for a step
// at offset 0, a digest of the run's id, its registry's digest (regKey)
// and the messages; for a later step, a digest of the previous
// generation and the messages. Two replicas hold the same generation of
// a run only when the same steps, with the same bytes, built it: a
// replica that holds the run as another client (or this client, before
// it started the run again elsewhere) left it holds another generation,
// even at the same length.
func runGeneration(prev, id, regKey string, messages []byte) string {
	h := sha256.New()
	if prev == "" {
		h.Write([]byte("policycheck run generation 1\x00"))
		h.Write([]byte(id))
		h.Write([]byte{0})
		h.Write([]byte(regKey))
	} else {
		h.Write([]byte(prev))
	}
	h.Write([]byte{0})
	h.Write(messages)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// runAnswer is a run step's answer: the step decision's JSON with the
// run's generation as its last member, "generation".
type runAnswer struct {
	*engine.Decision
	generation string
}

// MarshalJSON writes the step decision's members, then "generation".
func (a runAnswer) MarshalJSON() ([]byte, error) {
	raw, err := a.Decision.MarshalJSON()
	if err != nil {
		return nil, err
	}
	raw = bytes.TrimRight(raw, " \n")
	if len(raw) < 2 || raw[len(raw)-1] != '}' {
		return nil, fmt.Errorf("a step decision's JSON is not an object: %.40q", raw)
	}
	gen, err := json.Marshal(a.generation)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(raw)+len(gen)+16)
	out = append(out, raw[:len(raw)-1]...)
	if len(bytes.TrimSpace(raw[1:len(raw)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"generation":`...)
	out = append(out, gen...)
	return append(out, '}'), nil
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
	// Generation, required with an offset above 0, is the generation the
	// run's previous answer gave: the server decides only on the run
	// state the client built.
	Generation string `json:"generation"`
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

// The members of a run step's body, and the one whose elements the
// envelope keeps (package variables: the skim's spec does not let a list
// given to it stay on the stack).
var (
	runMembers = []string{"offset", "messages", "context", "registry", "approvals", "generation"}
	runArrays  = []string{"messages"}
)

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
	known := runMembers
	env, herr := scanEnvelope(body, known, runArrays...)
	if herr == nil {
		herr = refuseUnknown(env, known)
	}
	if herr != nil {
		return nil, herr
	}
	b := runBody{Messages: env.Members["messages"], Context: env.Members["context"], Registry: env.Members["registry"],
		Approvals: env.Members["approvals"]}
	if raw, ok := env.Members["offset"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &b.Offset); err != nil {
			return nil, badRequest(CodeSchema, "offset must be a whole number", "/offset")
		}
	}
	if b.Offset == nil {
		return nil, badRequest(CodeSchema, "offset is required: the number of messages already sent for this run (0 to start it)", "/offset")
	}
	if raw, ok := env.Members["generation"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &b.Generation); err != nil || b.Generation == "" {
			return nil, badRequest(CodeSchema, "generation must be the string the run's previous answer gave as its generation", "/generation")
		}
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
	if offset == 0 && b.Generation != "" {
		return nil, badRequest(CodeSchema, "generation is sent with an offset above 0 only: offset 0 starts the run afresh", "/generation")
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
	msgs, herr := s.intake.appended(b.Messages, env.Elements["messages"], offset)
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
	if offset > 0 && b.Generation == "" {
		// After the lookup: a run this server does not hold is a 409
		// (resend it all) whatever the request carries.
		return nil, badRequest(CodeSchema, "generation is required with an offset above 0: send the generation the run's previous answer gave, "+
			"so that the server decides only on the run you built", "/generation")
	}
	if offset > 0 && b.Generation != rn.gen {
		// Same length, other messages: this server holds the run as
		// another client, or this client before it started the run again
		// elsewhere, left it. Deciding on it would judge a history that
		// is not the client's.
		s.metrics.run("conflict")
		return nil, conflict(fmt.Sprintf("run %q holds %d messages, but not the ones this client sent: the run's generation here is %s, "+
			"the request's %s (the run was changed by another request, or started again elsewhere, since)", id, offset, rn.gen, b.Generation))
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
	size, herr := s.intake.grown(rn.size, env.Elements["messages"], msgs, offset)
	if herr != nil {
		return nil, herr
	}
	rn.run.Rebind(eng)
	approvals, claim := s.claimApprovals(approvals, id)
	defer claim.release()
	// The receipts are signed as the decision is assembled, before the run
	// records the step: a step answered with no decision (a receipt that
	// cannot be signed, or a failure in StepWith's last word) leaves the
	// run as it was (engine.Run.StepWith).
	d, err := rn.run.StepWith(r.Context(), msgs, ctxDoc, func(*engine.Decision) error {
		faults.At(r.Context(), faults.ServerStamp)
		return nil
	}, engine.WithApprovals(approvals), s.receipts(id))
	if err != nil {
		return nil, s.decideError(epRun, err)
	}
	rn.gen = runGeneration(rn.gen, id, rn.regKey, b.Messages)
	rn.size = size
	claim.settle(d)
	s.observe(r, epRun, id, st, d, ctxDoc, rn.run.Len(), len(body), start)
	return runAnswer{d, rn.gen}, nil
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
