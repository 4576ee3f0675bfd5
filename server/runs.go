package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// runTable is the bounded, evicting table of incremental runs. A miss
// (unknown, evicted or expired run) is answered 409: the client resends
// the whole history with offset 0.
type runTable struct {
	table *lru[*run]
}

func newRunTable(size int, ttl time.Duration, now func() time.Time) *runTable {
	return &runTable{table: newLRU[*run](size, ttl, now)}
}

// run is one agent run's incremental facts. Its mutex serializes the
// requests of one run; runs do not block each other.
type run struct {
	mu      sync.Mutex
	tracker *facts.Tracker
	reg     *facts.Registry
	regKey  string // digest of the request's registry; "" for the configured one
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
}

const maxRunID = 256

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
	if id == "" || len(id) > maxRunID {
		return nil, badRequest(CodeSchema, fmt.Sprintf("the run id must hold 1 to %d bytes", maxRunID), "")
	}
	env, herr := scanEnvelope(body, []string{"offset", "messages", "context", "registry"}, "messages")
	if herr != nil {
		return nil, herr
	}
	b := runBody{Messages: env.members["messages"], Context: env.members["context"], Registry: env.members["registry"]}
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
	ctxDoc, herr := parseContext(b.Context)
	if herr != nil {
		return nil, herr
	}
	msgs, herr := s.decodeMessages(b.Messages, env.elements["messages"], offset)
	if herr != nil {
		return nil, herr
	}

	var rn *run
	if offset == 0 {
		eng, herr := s.engineFor(r.Context(), st, b.Registry)
		if herr != nil {
			return nil, herr
		}
		rn = &run{tracker: facts.NewTracker(eng.Registry()), reg: eng.Registry()}
		if !isNull(b.Registry) {
			rn.regKey = registryKey(b.Registry)
		}
		s.runs.table.put(id, rn)
		s.metrics.run("new")
	} else {
		var ok bool
		if rn, ok = s.runs.table.get(id); !ok {
			s.metrics.run("conflict")
			return nil, conflict(fmt.Sprintf("run %q is unknown here (never started, evicted or expired)", id))
		}
	}
	rn.mu.Lock()
	if have := rn.tracker.Len(); have != offset {
		rn.mu.Unlock()
		s.metrics.run("conflict")
		return nil, conflict(fmt.Sprintf("run %q holds %d messages, the request's offset is %d", id, have, offset))
	}
	rn.tracker.Append(msgs...)
	f := rn.tracker.Facts()
	n := rn.tracker.Len()
	rn.mu.Unlock()
	if offset > 0 {
		s.metrics.run("hit")
	}

	eng, herr := s.runEngine(r, st, rn)
	if herr != nil {
		return nil, herr
	}
	d, err := eng.Decide(r.Context(), engine.Request{Facts: &f, Context: ctxDoc}, engine.WithDeadline(s.cfg.timeout))
	if err != nil {
		s.metrics.evalError(epRun)
		return nil, badRequest(CodeSchema, err.Error(), "/context")
	}
	s.observe(r, epRun, id, st, d, ctxDoc, n, start)
	return d, nil
}

// decodeMessages validates appended messages with the decoder and the
// JSON Schema; error pointers point into the request's messages array,
// and HistoryPointer into the whole history.
func (s *Server) decodeMessages(raw json.RawMessage, elems [][]byte, offset int) ([]facts.Message, *Error) {
	msgs, err := loader.DecodeMessages("request", raw, offset, s.cfg.limits)
	if err != nil {
		e := fromLoader(err, "")
		// Decoding again from 0 (errors only) gives the pointer into
		// the request whichever way the decoder counts.
		lim := s.cfg.limits
		lim.MaxMessages = 0
		if _, err0 := loader.DecodeMessages("request", raw, 0, lim); err0 != nil {
			e = fromLoader(err0, "")
		}
		e.HistoryPointer = shiftPointer(e.Pointer, -offset)
		e.Pointer = "/messages" + e.Pointer
		return nil, e
	}
	if s.cfg.schema {
		if err := s.schema.validate(elems, s.hash.keys(elems)); err != nil {
			e := fromLoader(err, "")
			e.Pointer = "/messages" + e.Pointer
			e.HistoryPointer = shiftPointer(e.Pointer[len("/messages"):], -offset)
			return nil, e
		}
	}
	return msgs, nil
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
	s.runs.table.delete(r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
}
