package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/internal/ground/wire"
	"github.com/policycheck/policycheck/loader"
)

// A session's history lives in the session store (--session-store), where
// every replica of the gateway reads it; each replica keeps the derived
// state of the sessions it served (the engine.Run) and, before it decides,
// takes from the store only the messages other replicas appended since it
// last saw the session, giving them to its run call by call as their
// writer did. A call holds the session's lease while it runs, is written
// to the store (checked against the length this replica saw) before it is
// carried out, and its answer after: a replica that decided on a state
// the store has passed carries out nothing.

// The kinds of note: a call (a response) or its answer (a request).
const (
	noteCall   = "r"
	noteAnswer = "q"
)

// note is what a replica that did not write a message needs to derive
// it as its writer did: the run's accounting of the call it answers
// (engine.Run.ReportSuccess, ReportFailure) and the approvals its call
// was decided with.
type note struct {
	Kind      string          `json:"k"`
	Success   string          `json:"s,omitempty"`
	Failure   string          `json:"f,omitempty"`
	Approvals facts.Approvals `json:"a,omitempty"`
	// Await, on a call, is the approval it waits for across requests (an
	// input-required result or a signed approval): the request that
	// answers it may reach another replica.
	Await *awaitNote `json:"w,omitempty"`
	// Abort, on an answer, is the abort message of a call that exceeded
	// its tool's retry budget: the session is stopped on every replica;
	// StoppedAt is when (Unix milliseconds), the same on every replica
	// (the stop ends SessionTTL after it).
	Abort     string `json:"x,omitempty"`
	StoppedAt int64  `json:"xt,omitempty"`
	// Calls, on a call, are the verdicts its writer's decision gave:
	// another replica gives its run the call with them (engine.Run.Replay)
	// instead of deciding it again. A note without them (a replica
	// before they were written), or of a call that waits for an
	// approval (whose whole decision the approval needs), is decided.
	Calls []recordedCall `json:"v,omitempty"`
}

// recordedCall is one call's verdict as a note keeps it.
type recordedCall struct {
	Tool       string `json:"t"`
	Part       int    `json:"p"`
	Verdict    string `json:"v"`
	FailClosed bool   `json:"c,omitempty"`
}

// recordedCalls are d's verdicts as a note keeps them.
func recordedCalls(d *engine.Decision) []recordedCall {
	out := make([]recordedCall, len(d.Calls))
	for i, c := range d.Calls {
		out[i] = recordedCall{Tool: c.Tool, Part: c.Part, Verdict: c.Verdict, FailClosed: c.FailClosed}
	}
	return out
}

// verdicts are calls as engine.Run.Replay takes them.
func verdicts(calls []recordedCall) []engine.CallVerdict {
	out := make([]engine.CallVerdict, len(calls))
	for i, c := range calls {
		out[i] = engine.CallVerdict{Tool: c.Tool, Part: c.Part, Verdict: c.Verdict, FailClosed: c.FailClosed}
	}
	return out
}

// awaitNote is an awaiting call as stored (its decision is the one its
// replay makes).
type awaitNote struct {
	State   string              `json:"state,omitempty"`
	Name    string              `json:"name"`
	Args    json.RawMessage     `json:"args"`
	ID      string              `json:"id"`
	TS      string              `json:"ts"`
	Kind    string              `json:"kind,omitempty"`
	Queries []string            `json:"queries,omitempty"`
	LoadID  string              `json:"load_id,omitempty"`
	Probs   []facts.ArgsProblem `json:"probs,omitempty"`
	Omitted int                 `json:"omitted,omitempty"`
}

func awaitOf(a *awaiting) *awaitNote {
	return &awaitNote{State: a.state, Name: a.name, Args: a.args, ID: a.id, TS: a.ts,
		Kind: a.call.kind, Queries: a.call.queries, LoadID: a.call.loadID, Probs: a.call.metaProbs, Omitted: a.call.metaOmitted}
}

func (w *awaitNote) awaiting(sd *engine.Decision) *awaiting {
	return &awaiting{state: w.State, name: w.Name, args: w.Args, id: w.ID, ts: w.TS, sd: sd,
		call: pendingCall{kind: w.Kind, queries: w.Queries, loadID: w.LoadID, metaProbs: w.Probs, metaOmitted: w.Omitted}}
}

// await records a as the call the session waits on, in the call's note.
func (s *session) await(a *awaiting) {
	s.awaiting = a
	s.notes[len(s.notes)-1].Await = awaitOf(a)
}

func (n note) encode() string {
	if n.Success == "" && n.Failure == "" && n.Approvals == nil && n.Await == nil && n.Abort == "" && n.Calls == nil {
		return n.Kind
	}
	b, _ := json.Marshal(n) // plain fields always marshal
	return string(b)
}

func decodeNote(s string) (note, error) {
	switch s {
	case noteCall, noteAnswer:
		return note{Kind: s}, nil
	}
	var n note
	if err := json.Unmarshal([]byte(s), &n); err != nil || (n.Kind != noteCall && n.Kind != noteAnswer) {
		return note{}, errors.New("a stored entry's note cannot be read")
	}
	return n, nil
}

// reportSuccess records an executed call's success in the run and in its
// answer's note.
func (s *session) reportSuccess(name string) {
	s.run.ReportSuccess(name)
	s.notes[len(s.notes)-1].Success = name
}

// Messages that fail a call closed for the store's sake.
const (
	lostMessage = "This session's history is no longer in the gateway's session store (it expired after being idle, or the store lost it); " +
		"the call was not run. Start a new session."
	storeDownMessage = "The gateway's session store cannot be reached; the call was not run."
	conflictMessage  = "This session changed on another gateway replica while this one decided the call; the call was not run. Call it again."
	busyMessage      = "Another call of this session is still running; the call was not run. Call it again."
	danglingMessage  = "The gateway lost this call's answer (the replica that held it stopped before it answered); it may or may not have run."
)

var (
	errLost  = errors.New("the session's history is no longer in the session store")
	errEnded = errors.New("the session has ended")
	// errLostEnded: a session this replica found lost is no longer lost
	// in the store: its mark expired (SessionTTL after it), or another
	// replica began a fresh session of its key.
	errLostEnded = errors.New("the session's loss has ended")
)

// storeMessage is the model-facing message of a store error.
func storeMessage(g *Gateway, err error) string {
	switch {
	case errors.Is(err, errLost):
		return lostMessage
	case errors.Is(err, errEnded):
		return endedMessage
	case errors.Is(err, sessionstore.ErrConflict):
		return conflictMessage
	case errors.Is(err, sessionstore.ErrBusy):
		return busyMessage
	case errors.Is(err, sessionstore.ErrTooLarge):
		return fmt.Sprintf("This session's history has reached %d bytes, the most the gateway keeps; the call was not run. Start a new session.", g.cfg.MaxSessionBytes)
	}
	return storeDownMessage
}

// storeFailure answers a call the store refused: closed, the session's
// derived state dropped (the next call takes it from the store again).
func (g *Gateway) storeFailure(s *session, err error) *mcp.CallToolResult {
	g.metrics.storeErrors.Add(1)
	g.log.Warn("the session store refused a call", "session", s.id, "error", err)
	s.reset(g)
	return toolError(storeMessage(g, err))
}

// reset drops what the replica derived: the next sync takes the whole
// history from the store again.
func (s *session) reset(g *Gateway) {
	s.eng = g.Engine()
	s.run = s.eng.NewRun()
	s.msgs, s.notes, s.saved, s.bytes = nil, nil, 0, 0
	s.pending, s.seq, s.list, s.awaiting, s.approved = false, 0, nil, nil, nil
	s.aborted, s.stoppedAt = "", time.Time{}
}

// flush writes the messages the store lacks, checked against the length
// this replica saw. On an error the session's derived state is dropped.
func (s *session) flush(ctx context.Context, g *Gateway) error {
	if len(s.notes) == 0 {
		return nil
	}
	entries := make([]sessionstore.Entry, len(s.notes))
	for i, n := range s.notes {
		entries[i] = sessionstore.Entry{Note: n.encode(), Msg: s.msgs[s.saved+i]}
	}
	if err := g.store.Append(ctx, s.key, s.saved, entries...); err != nil {
		s.reset(g)
		if errors.Is(err, sessionstore.ErrTooLarge) {
			s.full = true
		}
		return err
	}
	s.saved = len(s.msgs)
	s.notes = s.notes[:0]
	return nil
}

// sync takes what the store holds past what this replica saw and gives
// it to the run, call by call.
func (s *session) sync(ctx context.Context, g *Gateway) error {
	if s.dropped {
		return errEnded
	}
	if time.Since(s.lastUsed) > g.cfg.SessionTTL {
		// Idle here past the TTL: what this replica derived may be the
		// history of a session the store expired since; derive again
		// from what the store holds (nothing, for an expired session).
		s.reset(g)
		s.full = false
	}
	if len(s.notes) > 0 {
		// A flush that did not happen: derive again from the store.
		s.reset(g)
	}
	entries, st, err := g.store.Load(ctx, s.key, s.saved)
	if err != nil {
		return err
	}
	if !s.lostAt.IsZero() && !st.Lost {
		return errLostEnded
	}
	if st.Lost || st.Len < s.saved {
		// The store lost what this replica saw (or another replica said
		// so): the session fails closed on every replica for the TTL
		// after the first replica said so (lostAt, the store's, the same
		// on every replica), never goes on from a shorter history.
		at := st.LostAt
		if !st.Lost {
			// Not marked (the store cannot be reached): as before the
			// mark, the next call finds what the store holds.
			at, _ = g.store.MarkLost(ctx, s.key)
		}
		s.reset(g)
		s.lostAt = at
		return errLost
	}
	if len(entries) == 0 {
		return nil
	}
	s.list, s.awaiting = nil, nil
	var last *engine.Decision
	for _, e := range entries {
		d, err := s.replay(ctx, g, e)
		if err != nil {
			s.reset(g)
			return fmt.Errorf("deriving the session's history from the store: %w", err)
		}
		last = d
	}
	s.stopUnwritten(last, entries[len(entries)-1].Msg, g.cfg.MaxDepth)
	return nil
}

// stopUnwritten stops s when its history ends with a call (d, its
// decision; msg, its message) refused beyond its tool's retry budget
// that no answer follows and no approval awaits: the replica that
// decided it stopped the session (finish, abort), and the answer that
// carries the stop was not written (the store refused it, say over the
// size limit, which a client can bring about with a long tool name; or
// that replica stopped first). The stop dates from the call's
// timestamp (its message's, skimmed within maxDepth), else from now.
func (s *session) stopUnwritten(d *engine.Decision, msg []byte, maxDepth int) {
	if d == nil || s.aborted != "" || s.awaiting != nil || len(d.Calls) != 1 || d.Calls[0].Verdict == engine.Execute {
		return
	}
	var ee *engine.ExceededError
	if !errors.As(d.Err(), &ee) {
		return
	}
	s.aborted = ee.Error()
	s.stoppedAt = time.Now()
	// The message is the run's (decoded by the loader as it was given):
	// its timestamp is only skimmed here.
	env, werr := wire.SkimEnvelope(msg, wire.EnvelopeSpec{File: "message", Known: []string{"timestamp"}, MaxDepth: maxDepth})
	if werr != nil {
		return
	}
	if ts := env.Members["timestamp"]; len(ts) > 0 && ts[0] == '"' {
		if at, err := time.Parse(time.RFC3339Nano, wire.Unescape(ts)); err == nil {
			s.stoppedAt = at
		}
	}
}

// lostLapsed reports whether s was marked lost SessionTTL ago or more:
// it has ended. s.mu is held.
func (g *Gateway) lostLapsed(s *session) bool {
	return !s.lostAt.IsZero() && time.Since(s.lostAt) >= g.cfg.SessionTTL
}

// lostEnded reports whether sync's err says that s, lost, has ended: the
// store no longer marks it lost, or its mark lapsed.
func (g *Gateway) lostEnded(s *session, err error) bool {
	return errors.Is(err, errLostEnded) || errors.Is(err, errLost) && g.lostLapsed(s)
}

// staleRecord reports whether the store's session of s's key, whose
// public id Open returned as id, is still s's, to be deleted before a
// fresh session takes the key (else another replica began the fresh
// one). A store that lost the history may hold the lost mark alone,
// which a first Open gives an id: it is s's while the mark lapsed.
// s.mu and the key's lease are held.
func (g *Gateway) staleRecord(ctx context.Context, s *session, id string) (bool, error) {
	if id == s.id || s.lostAt.IsZero() {
		return id == s.id, nil
	}
	_, st, err := g.store.Load(ctx, s.key, math.MaxInt32)
	if err != nil {
		return false, err
	}
	return st.Lost && time.Since(st.LostAt) >= g.cfg.SessionTTL, nil
}

// replay gives the run one message another replica wrote, as its writer
// gave it; a call's decision is returned (nil for an answer).
func (s *session) replay(ctx context.Context, g *Gateway, e sessionstore.Entry) (*engine.Decision, error) {
	n, err := decodeNote(e.Note)
	if err != nil {
		return nil, err
	}
	var call *engine.Decision
	switch n.Kind {
	case noteCall:
		s.seq++
		var d *engine.Decision
		var err error
		counted := &g.metrics.decidedAgain
		if n.Calls != nil && n.Await == nil {
			d, err = s.replayCall(g, e.Msg, verdicts(n.Calls))
			counted = &g.metrics.replayed
		} else {
			d, err = s.stepQuiet(ctx, g, e.Msg)
		}
		if err != nil {
			return nil, err
		}
		counted.Add(1)
		call = d
		s.awaiting = nil
		if n.Await != nil && len(d.Calls) == 1 {
			s.awaiting = n.Await.awaiting(d)
		}
	case noteAnswer:
		s.awaiting = nil
		if n.Approvals != nil {
			if _, err := s.stepQuiet(ctx, g, nil, engine.WithApprovals(n.Approvals)); err != nil {
				return nil, err
			}
		}
		s.msgs = append(s.msgs, e.Msg)
		s.bytes += int64(len(e.Msg))
		s.pending = true
		if n.Success != "" {
			s.run.ReportSuccess(n.Success)
		}
		if n.Failure != "" {
			_ = s.run.ReportFailure(n.Failure)
		}
		if n.Abort != "" {
			s.aborted = n.Abort
			// A note without the time (a replica before it was
			// written): from now.
			s.stoppedAt = time.Now()
			if n.StoppedAt > 0 {
				s.stoppedAt = time.UnixMilli(n.StoppedAt)
			}
		}
	}
	s.notes = s.notes[:0]
	s.saved = len(s.msgs)
	return call, nil
}

// replayCall gives the run the pending request and call, which another
// replica decided with verdicts calls, without deciding it again.
func (s *session) replayCall(g *Gateway, call []byte, calls []engine.CallVerdict) (*engine.Decision, error) {
	msgs, callFrame, err := s.stepMessages(g, call)
	if err != nil {
		return nil, err
	}
	if eng := g.Engine(); eng != s.eng {
		s.run.Rebind(eng)
		s.eng = eng
	}
	d, err := s.run.Replay(msgs, calls)
	if err != nil {
		return nil, err
	}
	s.stepped(g, len(msgs), call, callFrame, d)
	return d, nil
}

// stepQuiet is step for a message another replica decided: no receipt
// is signed again.
func (s *session) stepQuiet(ctx context.Context, g *Gateway, extra []byte, opts ...engine.DecideOption) (*engine.Decision, error) {
	return s.stepWith(ctx, g, extra, false, opts...)
}

// responseSuffix ends every response the gateway writes (callMessage).
var responseSuffix = []byte(`"kind":"response","provider_name":null}`)

// answerDangling answers a call the history ends with when no call of
// this replica waits on it: the replica that ran it stopped before it
// wrote the answer. It is answered as failed (not charged): whether it
// ran is not known.
func (s *session) answerDangling() {
	if s.awaiting != nil || s.pending || len(s.msgs) == 0 || !bytes.HasSuffix(s.msgs[len(s.msgs)-1], responseSuffix) {
		return
	}
	last := s.msgs[len(s.msgs)-1]
	msgs, err := loader.DecodeMessages("gateway session "+s.id, append(append([]byte{'['}, last...), ']'), 0, loader.Limits{})
	if err != nil || len(msgs) != 1 || len(msgs[0].Parts) != 1 {
		return
	}
	p := msgs[0].Parts[0]
	ts := timestamp(time.Now())
	content, _ := json.Marshal(danglingMessage)
	s.answer(requestMessage(ts, returnPart(nil, ts, p.ToolName, content, p.ToolCallID, "", "failed", "")))
}

// claimApprovals makes approvals single use across every replica: each
// approval (the session's id, its tool_call_id and digest) is claimed in
// the store once. The id keeps a new session of the same key (its handle
// used again after the old one was dropped) from meeting the old one's
// claims: its tool_call_ids start again at gw_1.
func (g *Gateway) claimApprovals(ctx context.Context, s *session, approvals facts.Approvals) bool {
	for id, a := range approvals {
		ok, err := g.store.Claim(ctx, s.key, "approval\x00"+s.id+"\x00"+id+"\x00"+a.Digest)
		if err != nil || !ok {
			g.log.Warn("an approval was used already or could not be claimed", "session", s.id, "tool_call_id", id, "error", err)
			return false
		}
	}
	return true
}

// callShared runs one call of s holding the session's lease, in step
// with the store: the history is brought up to the store's, the call
// decided and carried out (written ahead to the store), its answer
// written after.
func (g *Gateway) callShared(ctx context.Context, s *session, name string, rawArgs json.RawMessage, env callEnv) *mcp.CallToolResult {
	s = liveLocked(s)
	defer s.mu.Unlock()
	if s.dropped {
		return toolError(endedMessage)
	}
	release, err := g.store.Lock(ctx, s.key)
	if err != nil {
		g.metrics.storeErrors.Add(1)
		return toolError(storeMessage(g, err))
	}
	defer release()
	cur, err := g.syncLive(ctx, s, nil)
	if cur != s {
		// The stop lapsed: a fresh session took the key.
		defer cur.mu.Unlock()
		s = cur
		if env.notify != nil {
			env.notify()
		}
	}
	if err != nil {
		return g.storeFailure(s, err)
	}
	if s.aborted != "" {
		return g.refuseStopped(s, name)
	}
	if s.full {
		g.metrics.refusedBeforeDecision.Add(1)
		return g.historyFull("This call was not run: nothing more is added to this session's history", "Start a new session.")
	}
	s.answerDangling()
	res := g.call(ctx, s, name, rawArgs, env)
	if err := s.flush(ctx, g); err != nil {
		// The call was carried out; its answer is not in the store: the
		// next call answers it as lost (answerDangling).
		g.metrics.storeErrors.Add(1)
		g.log.Error("a call's answer could not be written to the session store", "session", s.id, "error", err)
	}
	return res
}
