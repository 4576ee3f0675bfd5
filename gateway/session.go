package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/internal/ground/wire"
	"github.com/policycheck/policycheck/loader"
)

// session is one principal's conversation through the gateway: the
// history the gateway wrote from what it saw, kept as an engine.Run so
// that each call is decided incrementally (a call never derives the
// whole session again).
type session struct {
	mu        sync.Mutex
	id        string // public: decision logs, GET /v1/sessions/{id}/history
	principal string
	ctxDoc    any
	run       *engine.Run
	// msgs are the history's messages as JSON, in order; the last one is
	// pending when pending is true: a request the run has not been given
	// yet (it is given with the next call or listing).
	msgs    [][]byte
	pending bool
	// answered is the frame of the latest answer (frame): msgs holds its
	// inner message.
	answered []byte
	seq      int
	// list is the decision for the next request, while no message came
	// since.
	list     *engine.Decision
	lastUsed time.Time
	// awaiting is the call waiting for a person's answer, if any.
	awaiting *awaiting
	// bytes is the size of msgs.
	bytes int64
	// full is set when the session store refused to append an answer
	// past MaxSessionBytes: every later call is refused before anything
	// is added (an answer it cannot write would drop the derived state,
	// and each call would derive the whole session again). It outlives
	// reset; the session ends as any other.
	full bool
	// eng is the engine the run decides with.
	eng *engine.Engine
	// notifier sends notifications/tools/list_changed to the session's
	// latest connection.
	notifier atomic.Pointer[func()]

	// key is the session's key in the table and in the session store.
	key string
	// saved is how many of msgs the session store holds; notes are the
	// notes of msgs[saved:], written by flush (shared.go).
	saved int
	notes []note
	// approved are the approvals the current call was decided with,
	// noted with its answer.
	approved facts.Approvals

	// Its life (lifecycle.go): mcp is the MCP session its handle is the
	// id of, if any; dropped is set when it left the table (a call that
	// reaches it then fails closed); aborted is the abort message once a
	// call exceeded its tool's retry budget (every later call is refused
	// with it), and stoppedAt when: the session ends SessionTTL after it,
	// whatever is sent meanwhile (restartStopped); lostAt is when the
	// session was marked lost in the store (its calls fail closed), once
	// this replica found it so: it ends SessionTTL after it, likewise.
	mcp     *mcp.ServerSession
	dropped bool
	// fresh is the session that took its key when its stop or its loss
	// lapsed (restartStopped): a request that reached s meanwhile is
	// served by it (liveLocked).
	fresh     *session
	aborted   string
	stoppedAt time.Time
	lostAt    time.Time
}

func newSessionID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "gs_" + hex.EncodeToString(b[:])
}

// historyLimits bound what a session's messages may hold.
func (g *Gateway) historyLimits() loader.Limits {
	return loader.Limits{MaxDepth: g.cfg.MaxDepth}
}

// step gives the run the pending request (if any) and extra (a response,
// or nothing), and decides. On an error nothing changes.
func (s *session) step(ctx context.Context, g *Gateway, extra []byte, opts ...engine.DecideOption) (*engine.Decision, error) {
	return s.stepWith(ctx, g, extra, true, opts...)
}

// stepWith is step, signing receipts when sign is true and a signer is
// set.
func (s *session) stepWith(ctx context.Context, g *Gateway, extra []byte, sign bool, opts ...engine.DecideOption) (*engine.Decision, error) {
	msgs, extraFrame, err := s.stepMessages(g, extra)
	if err != nil {
		return nil, err
	}
	if g.cfg.DecisionDeadline > 0 {
		opts = append(opts, engine.WithDeadline(g.cfg.DecisionDeadline))
	}
	if eng := g.Engine(); eng != s.eng {
		// A late upstream's listing rebuilt the registry.
		s.run.Rebind(eng)
		s.eng = eng
	}
	if g.cfg.Receipts != nil && sign {
		opts = append(opts, engine.WithReceipts(g.cfg.Receipts, s.id))
	}
	var d *engine.Decision
	err = g.decide(ctx, func() (err error) {
		d, err = s.run.StepWith(ctx, msgs, s.ctxDoc, nil, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.stepped(g, len(msgs), extra, extraFrame, d)
	return d, nil
}

// stepMessages decodes the pending request (if any) and extra (a
// response, or nothing) for the run. Each message is decoded from its
// own frame, which the history then holds (inner): the run's messages
// alias the bytes they were decoded from, so the run and the history
// share one copy of each. extraFrame is extra's frame.
func (s *session) stepMessages(g *Gateway, extra []byte) (msgs []facts.Message, extraFrame []byte, err error) {
	if extra != nil {
		extraFrame = frame(extra)
	}
	for _, f := range [2][]byte{s.pendingFrame(), extraFrame} {
		if f == nil {
			continue
		}
		m, err := loader.DecodeMessages("gateway session "+s.id, f, s.run.Len()+len(msgs), g.historyLimits())
		if err != nil {
			return nil, nil, fmt.Errorf("writing the session's history: %w", err)
		}
		msgs = append(msgs, m...)
	}
	return msgs, extraFrame, nil
}

// stepped records that the run took n messages, the pending request and
// extra (a call, in its frame, decided as d), in the session's history.
func (s *session) stepped(g *Gateway, n int, extra, extraFrame []byte, d *engine.Decision) {
	g.metrics.derived.Add(int64(n))
	s.pending = false
	if extra != nil {
		s.msgs = append(s.msgs, inner(extraFrame))
		s.notes = append(s.notes, note{Kind: noteCall, Calls: recordedCalls(d)})
		s.bytes += int64(len(extra))
	}
}

// answer records the request that answers the current call: pending
// until the next call or listing gives it to the run.
func (s *session) answer(msg []byte) {
	s.notes = append(s.notes, note{Kind: noteAnswer, Approvals: s.approved})
	s.approved = nil
	s.answered = frame(msg)
	s.msgs = append(s.msgs, inner(s.answered))
	s.bytes += int64(len(msg))
	s.pending = true
	s.list = nil
}

// pendingFrame is the pending message framed (frame), nil when none is
// pending: the frame answer made when the message is its, else a new one
// (a message replayed from the store).
func (s *session) pendingFrame() []byte {
	if !s.pending {
		return nil
	}
	last := s.msgs[len(s.msgs)-1]
	if f := s.answered; len(last) > 0 && len(f) == len(last)+2 && &f[1] == &last[0] {
		return f
	}
	return frame(last)
}

// frame is msg as a JSON array of one message, the form a step decodes.
func frame(msg []byte) []byte {
	b := make([]byte, 0, len(msg)+2)
	b = append(b, '[')
	b = append(b, msg...)
	return append(b, ']')
}

// inner is the message a frame holds, sharing its bytes.
func inner(frame []byte) []byte { return frame[1 : len(frame)-1 : len(frame)-1] }

// listDecision is the decision for the session's next request.
func (s *session) listDecision(ctx context.Context, g *Gateway) (*engine.Decision, error) {
	if s.list != nil && !s.pending {
		return s.list, nil
	}
	sd, err := s.step(ctx, g, nil)
	if err != nil {
		return nil, err
	}
	s.list = sd
	return s.list, nil
}

// toolError is an isError result carrying msg for the model.
func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// callArgs returns the call's arguments as a JSON object: "{}" for none.
func (g *Gateway) callArgs(raw json.RawMessage) ([]byte, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return []byte("{}"), nil
	}
	if t[0] != '{' {
		return nil, errors.New("the arguments must be a JSON object")
	}
	end, serr := wire.Skip("arguments", t, 0, g.cfg.MaxDepth)
	if serr != nil {
		return nil, fmt.Errorf("the arguments: %s", serr.Msg)
	}
	if len(bytes.TrimSpace(t[end:])) > 0 {
		return nil, errors.New("the arguments: data after the JSON object")
	}
	return t, nil
}

// callEnv is what a call brings beside its name and arguments.
type callEnv struct {
	meta mcp.Meta
	// asking is how the client's person can be asked for an approval,
	// read from the client's capabilities only when a call needs it:
	// inputRequired, the client takes input-required results (2026-07-28
	// multi round-trip requests) and declared elicitation; elicit, the
	// client can be asked during the call (protocol versions before
	// 2026-07-28). Nil: neither.
	asking func() (inputRequired bool, elicit elicitFunc)
	// requestState and inputResponses are a retried call's answer to an
	// input-required result.
	requestState   string
	inputResponses mcp.InputResponseMap
	// notify tells the client that its tool list changed.
	notify func()
	// relay takes what the upstream sends during the call to the client.
	relay *relay
}

// awaiting is a call of the session that waits for a person's answer
// through an input-required result: the run's history ends with its
// response until the client retries it with the answer, or calls
// something else (then no one approved it).
type awaiting struct {
	state string
	name  string
	args  []byte
	id    string
	ts    string
	call  pendingCall
	sd    *engine.Decision
}

// pendingCall is what executing a call needs beside its decision.
type pendingCall struct {
	kind      string
	queries   []string
	loadID    string
	metaProbs []facts.ArgsProblem
	// metaOmitted counts the problems past metaProbs.
	metaOmitted int
}

// metaApproval is the _meta key of a signed approval.
const metaApproval = "policycheck/approval"

// noApprovalMessage answers a call left waiting for an approval.
const noApprovalMessage = "No person approved this call; it was not run."

// call decides and carries out one tools/call of the session; s.mu is
// held and the session is in step with the store (callShared).
func (g *Gateway) call(ctx context.Context, s *session, name string, rawArgs json.RawMessage, env callEnv) *mcp.CallToolResult {
	start := time.Now()
	s.lastUsed = start
	args, err := g.callArgs(rawArgs)
	if err != nil {
		g.metrics.refusedBeforeDecision.Add(1)
		return toolError(err.Error() + ".")
	}
	if len(name) > maxToolName {
		g.metrics.refusedBeforeDecision.Add(1)
		return toolError(fmt.Sprintf("A tool name is at most %d bytes.", maxToolName))
	}
	if s.bytes > g.cfg.MaxSessionBytes {
		g.metrics.refusedBeforeDecision.Add(1)
		return toolError(fmt.Sprintf("This session's history has reached %d bytes, the most the gateway keeps; start a new session.", g.cfg.MaxSessionBytes))
	}
	if env.requestState != "" {
		return g.resume(ctx, s, name, args, env, start)
	}
	if a := s.awaiting; a != nil {
		s.awaiting = nil
		if _, signed := env.meta[metaApproval]; signed && a.state == "" && a.name == name && bytes.Equal(a.args, args) {
			// The same call again, with a signed approval of the call
			// that waits.
			c, d := &a.sd.Calls[0], a.sd
			if ap := g.signedApproval(s, c, env.meta); ap != nil {
				c, d = g.approveWith(ctx, s, a.sd, ap)
			}
			return g.finish(ctx, s, d, c, name, args, a.id, a.ts, a.call, env, start)
		}
		s.answer(requestMessage(a.ts, retryPart(nil, a.ts, a.name, noApprovalMessage, a.id)))
	}
	reg := s.eng.Registry()
	var pc pendingCall
	switch name {
	case facts.SearchTool:
		var typed bool
		pc.queries, typed, pc.metaProbs, pc.metaOmitted = searchArgs(args)
		if typed && len(reg.SearchGatedTools()) > 0 {
			pc.kind = kindSearch
		}
	case facts.LoadCapabilityTool:
		var typed bool
		pc.loadID, typed, pc.metaProbs = loadArgs(args)
		if typed && reg.HasLoadCapability() {
			pc.kind = kindLoad
		}
	}
	s.seq++
	id := "gw_" + strconv.Itoa(s.seq)
	ts := timestamp(start)
	resp := callMessage(nil, ts, name, args, id, pc.kind)
	if s.bytes+int64(len(resp)) > g.cfg.MaxSessionBytes {
		// Refused before it is decided: a call the store would refuse
		// drops the derived state (flush), and the session's next call
		// derives it all again.
		s.seq--
		g.metrics.refusedBeforeDecision.Add(1)
		return g.historyFull("This call would take this session's history", "Call it with smaller arguments, or start a new session.")
	}
	sd, err := s.step(ctx, g, resp)
	if err != nil {
		s.seq--
		g.metrics.decideErrors.Add(1)
		g.log.Error("a call could not be decided", "session", s.id, "error", err)
		return toolError("The call could not be decided; it was not run.")
	}
	if len(sd.Calls) != 1 {
		g.metrics.decideErrors.Add(1)
		return toolError("The call could not be decided; it was not run.")
	}
	d, c := sd, &sd.Calls[0]
	if c.Verdict == engine.ApprovalRequired {
		var viaResult bool
		var elicit elicitFunc
		if env.asking != nil {
			viaResult, elicit = env.asking()
		}
		if viaResult && elicit == nil {
			// Ask through an input-required result; the run waits.
			a := &awaiting{state: newSessionID(), name: name, args: args, id: id, ts: ts, call: pc, sd: sd}
			s.await(a)
			if err := s.flush(ctx, g); err != nil {
				return g.storeFailure(s, err)
			}
			g.logDecision(s, d, c, time.Since(start))
			return inputRequired(a.state, approvalQuestion(c))
		}
		switch {
		case elicit != nil:
			c, d = g.approveWith(ctx, s, sd, g.elicitApproval(ctx, s, c, elicit))
		case g.cfg.Approvals != nil:
			// The call waits for the same call again carrying a signed
			// approval of this one (its tool_call_id and digest, for the
			// session as the run).
			s.await(&awaiting{name: name, args: args, id: id, ts: ts, call: pc, sd: sd})
			if err := s.flush(ctx, g); err != nil {
				return g.storeFailure(s, err)
			}
			g.logDecision(s, d, c, time.Since(start))
			g.metrics.verdict(c.Verdict)
			return toolError(fmt.Sprintf("%s A person must approve this call: call it again with the same arguments and, in _meta %q, "+
				"an approval signed for tool_call_id %s, digest %s, run %s.", c.Message, metaApproval, id, c.Digest, s.id))
		}
	}
	return g.finish(ctx, s, d, c, name, args, id, ts, pc, env, start)
}

// resume takes a retried call's answer to an input-required result.
func (g *Gateway) resume(ctx context.Context, s *session, name string, args []byte, env callEnv, start time.Time) *mcp.CallToolResult {
	a := s.awaiting
	if a == nil || a.state != env.requestState || a.name != name || !bytes.Equal(a.args, args) {
		return toolError("This answer is for no call waiting for approval in this session; call the tool again.")
	}
	s.awaiting = nil
	c := &a.sd.Calls[0]
	var approvals facts.Approvals
	if r, ok := env.inputResponses["approval"].(*mcp.ElicitResult); ok {
		approvals = elicited(s, c, r)
	}
	d := a.sd
	if approvals != nil {
		c, d = g.approveWith(ctx, s, a.sd, approvals)
	}
	return g.finish(ctx, s, d, c, name, args, a.id, a.ts, a.call, env, start)
}

// inputRequired is a 2026-07-28 input-required result asking question.
func inputRequired(state string, question *mcp.ElicitParams) *mcp.CallToolResult {
	var res mcp.CallToolResult
	// The result type is set by decoding: the SDK keeps it unexported.
	_ = json.Unmarshal([]byte(`{"content":[],"resultType":"input_required"}`), &res)
	res.InputRequests = mcp.InputRequestMap{"approval": question}
	res.RequestState = state
	return &res
}

// approvalQuestion is the elicitation that asks for a call's approval.
func approvalQuestion(c *engine.CallVerdict) *mcp.ElicitParams {
	args, _ := json.Marshal(c.Args)
	return &mcp.ElicitParams{
		Message:         fmt.Sprintf("%s\n\nTool: %s\nArguments: %s\nDigest: %s\n\nAccept to run this call once.", c.Message, c.Tool, args, c.Digest),
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{}}`),
	}
}

// elicited is the approval an elicitation answer gives: an accept
// approves this one call (its tool_call_id and digest), anything else
// denies it.
func elicited(s *session, c *engine.CallVerdict, r *mcp.ElicitResult) facts.Approvals {
	kind := facts.ToolDenied
	if r != nil && r.Action == "accept" {
		kind = facts.ToolApproved
	}
	return facts.Approvals{*c.ToolCallID: {Kind: kind, Digest: c.Digest, Approvers: []string{s.principal + " (elicitation)"}}}
}

// elicitFunc asks the client's person (mcp.ServerSession.Elicit).
type elicitFunc func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error)

// elicitApproval asks the client's person during the call.
func (g *Gateway) elicitApproval(ctx context.Context, s *session, c *engine.CallVerdict, elicit elicitFunc) facts.Approvals {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.ApprovalTimeout)
	defer cancel()
	res, err := elicit(ctx, approvalQuestion(c))
	if err != nil {
		g.log.Info("elicitation failed", "session", s.id, "error", err)
		return nil
	}
	return elicited(s, c, res)
}

// signedApproval is a signed approval the call carries in its _meta
// ("policycheck/approval"), checked against the approver keys; nil
// without one or without approver keys.
func (g *Gateway) signedApproval(s *session, c *engine.CallVerdict, meta mcp.Meta) facts.Approvals {
	raw, ok := meta[metaApproval]
	if !ok || g.cfg.Approvals == nil || c.ToolCallID == nil {
		return nil
	}
	b, err := json.Marshal(map[string]any{*c.ToolCallID: raw})
	if err != nil {
		return nil
	}
	approvals, err := loader.ParseApprovalsMap("_meta", "/policycheck~1approval", b)
	if err != nil {
		return nil
	}
	return g.cfg.Approvals.Check(approvals, s.id)
}

// approveWith decides the call again with approvals, as a same-step
// rebuild of the run.
func (g *Gateway) approveWith(ctx context.Context, s *session, sd *engine.Decision, approvals facts.Approvals) (*engine.CallVerdict, *engine.Decision) {
	c := &sd.Calls[0]
	if approvals == nil || !g.claimApprovals(ctx, s, approvals) {
		return c, sd
	}
	sd2, err := s.step(ctx, g, nil, engine.WithApprovals(approvals))
	if err != nil || len(sd2.Calls) != 1 {
		return c, sd
	}
	s.approved = approvals
	return &sd2.Calls[0], sd2
}

// finish carries out a decided call: a refusal is answered and recorded
// as a retry prompt; an execute runs a meta-tool or is forwarded.
func (g *Gateway) finish(ctx context.Context, s *session, d *engine.Decision, c *engine.CallVerdict, name string, args []byte, id, ts string, pc pendingCall, env callEnv, start time.Time) *mcp.CallToolResult {
	// The call is in the store before it is carried out: a replica that
	// decided on a state the store has passed carries out nothing.
	if err := s.flush(ctx, g); err != nil {
		return g.storeFailure(s, err)
	}
	g.logDecision(s, d, c, time.Since(start))
	g.metrics.verdict(c.Verdict)
	defer func() { g.metrics.observe(time.Since(start)) }()
	reg := s.eng.Registry()

	if c.Verdict != engine.Execute {
		if res := g.abortIfExceeded(s, d, ts, name, id); res != nil {
			return res
		}
		msg := c.Message
		if c.Verdict == engine.ApprovalRequired {
			msg += fmt.Sprintf(" A person must approve this call (digest %s); this client cannot be asked.", c.Digest)
		}
		// The run accounted for the refusal when it decided (spec X8).
		if c.Verdict == engine.Denied && c.Approval != nil && c.Approval.Applied && c.Approval.Kind == facts.ToolDenied {
			// A person's denial: the return pydantic-ai writes for it.
			content, _ := json.Marshal(msg)
			s.answer(requestMessage(ts, returnPart(nil, ts, name, content, id, pc.kind, "denied", "")))
		} else {
			s.answer(requestMessage(ts, retryPart(nil, ts, name, msg, id)))
		}
		return toolError(msg)
	}

	switch {
	case name == facts.SearchTool && pc.kind == kindSearch && pc.metaProbs == nil:
		names, ok := search(pc.queries, searchCorpus(reg, d), d.Facts.Discovered)
		if !ok {
			return g.retry(s, ts, name, id, emptyQueryMessage)
		}
		content := searchContent(names)
		s.answer(requestMessage(ts, returnPart(nil, ts, name, content, id, kindSearch, "success", c.Receipt)))
		s.reportSuccess(name)
		if len(names) > 0 && env.notify != nil {
			env.notify()
		}
		return metaResult(content)
	case name == facts.LoadCapabilityTool && pc.kind == kindLoad:
		retryMsg, content, added := loadOutcome(reg, d, pc.loadID)
		if retryMsg != "" {
			return g.retry(s, ts, name, id, retryMsg)
		}
		parts := [][]byte{returnPart(nil, ts, name, content, id, kindLoad, "success", c.Receipt)}
		if len(added) > 0 {
			parts = append(parts, deltaPart(nil, added, id))
		}
		s.answer(requestMessage(ts, parts...))
		s.reportSuccess(name)
		if env.notify != nil {
			env.notify()
		}
		return metaResult(content)
	case name == facts.SearchTool || name == facts.LoadCapabilityTool:
		probs := pc.metaProbs
		if probs == nil {
			probs = []facts.ArgsProblem{{Pointer: "", Reason: "the arguments do not have the tool's shape"}}
		}
		return g.retry(s, ts, name, id, engine.InvalidArgsMessage(probs, pc.metaOmitted))
	}
	return g.forward(ctx, s, c, name, args, id, ts, env.relay)
}

// maxToolName bounds a called name.
const maxToolName = 1024

// retry answers the call with a retry prompt: an argument-validation
// retry or a refused meta-tool call, charged as pydantic-ai charges it.
func (g *Gateway) retry(s *session, ts, name, id, msg string) *mcp.CallToolResult {
	if res := g.failCharged(s, ts, name, id, msg); res != nil {
		return res
	}
	return toolError(msg)
}

func metaResult(content []byte) *mcp.CallToolResult {
	var structured any
	_ = json.Unmarshal(content, &structured)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(content)}}, StructuredContent: structured}
}

// forward sends an executed call to its upstream and records the result.
func (g *Gateway) forward(ctx context.Context, s *session, c *engine.CallVerdict, name string, args []byte, id, ts string, r *relay) *mcp.CallToolResult {
	rt, ok := g.built.Load().routes[name]
	up := g.ups[rt.upstream]
	if !ok || up == nil {
		// Only a registry tool executes, and every one has a route.
		return g.failed(s, ts, name, id, "The tool has no server; it was not run.")
	}
	var sendArgs any = json.RawMessage(args)
	if c.Args != nil {
		// An approver's override_args.
		sendArgs = c.Args
	}
	p := &mcp.CallToolParams{Name: rt.tool, Arguments: sendArgs}
	if c.Receipt != "" {
		// What a tool service needs to verify the receipt
		// (trust.Verify): the call as the gateway judged it.
		p.Meta = mcp.Meta{"policycheck/receipt": c.Receipt, "policycheck/run": s.id, "policycheck/tool_call_id": id, "policycheck/tool": name}
	}
	cctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	res, err := up.call(cctx, p, r)
	cancel()
	if err != nil {
		g.metrics.upstreamErrors.Add(1)
		msg := fmt.Sprintf("The tool %s failed: %s.", pyQuote(name), upstreamFailure(err))
		return g.failed(s, ts, name, id, msg)
	}
	// The client gets the result, not the upstream's _meta (its identity,
	// its protocol's fields).
	out := &mcp.CallToolResult{Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError}
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	if res.IsError {
		// pydantic-ai's MCP client raises ModelRetry with the error text.
		// The client is answered with that text, which the history
		// records, within the bound on results, like a success.
		text := resultText(res)
		if int64(len(text)) > g.cfg.MaxResultBytes {
			g.metrics.upstreamErrors.Add(1)
			return g.failed(s, ts, name, id, fmt.Sprintf("The tool %s failed: its result is larger than %d bytes.", pyQuote(name), g.cfg.MaxResultBytes))
		}
		if stopped := g.failCharged(s, ts, name, id, text); stopped != nil {
			return stopped
		}
		return g.shown(ctx, s, toolError(text))
	}
	content, err := resultContent(res)
	if err == nil && int64(len(content)) > g.cfg.MaxResultBytes {
		err = fmt.Errorf("its result is larger than %d bytes", g.cfg.MaxResultBytes)
	}
	if err == nil {
		if _, serr := wire.Skip("result", content, 0, g.cfg.MaxDepth); serr != nil {
			err = fmt.Errorf("its result cannot be kept: %s", serr.Msg)
		}
	}
	if err != nil {
		g.metrics.upstreamErrors.Add(1)
		return g.failed(s, ts, name, id, fmt.Sprintf("The tool %s failed: %s.", pyQuote(name), err))
	}
	if res.StructuredContent != nil {
		// The history records the structured result (pydantic-ai's MCP
		// client returns it when there is one), so the client's model is
		// shown that too, as its text: never a content block beside it
		// that the flows and the window would not see.
		out.Content = []mcp.Content{&mcp.TextContent{Text: string(content)}}
	}
	s.answer(requestMessage(ts, returnPart(nil, ts, name, content, id, "", "success", c.Receipt)))
	s.reportSuccess(name)
	return g.shown(ctx, s, out)
}

// shown is res, an upstream's answer, once the session store holds it:
// the client is never shown a result the history does not record. An
// answer the store refuses (it passes --max-session-bytes, which a client
// can bring about by filling its session) is dropped with the replica's
// state, and the next call writes the call's answer as failed
// (answerDangling): the client is told that the result is withheld.
func (g *Gateway) shown(ctx context.Context, s *session, res *mcp.CallToolResult) *mcp.CallToolResult {
	err := s.flush(ctx, g)
	if err == nil {
		return res
	}
	g.metrics.storeErrors.Add(1)
	g.log.Warn("the session store refused a call's answer; the client is not shown it", "session", s.id, "error", err)
	if errors.Is(err, sessionstore.ErrTooLarge) {
		return g.historyFull("The tool ran, but its result would take this session's history", "It is not shown; start a new session.")
	}
	return toolError("The tool ran, but the gateway could not keep its result in the session's history, so it is not shown.")
}

// historyFull is the answer to a call refused, or a result withheld,
// at --max-session-bytes: what would pass it, then what to do.
func (g *Gateway) historyFull(what, then string) *mcp.CallToolResult {
	return toolError(fmt.Sprintf("%s past %d bytes, the most the gateway keeps. %s", what, g.cfg.MaxSessionBytes, then))
}

// failed records an executed call that did not complete (its upstream
// is down, crashed, timed out or answered what cannot be kept): a
// tool-return with outcome failed, not charged (spec X8).
func (g *Gateway) failed(s *session, ts, name, id, msg string) *mcp.CallToolResult {
	content, _ := json.Marshal(msg)
	s.answer(requestMessage(ts, returnPart(nil, ts, name, content, id, "", "failed", "")))
	return toolError(msg)
}

func upstreamFailure(err error) string {
	switch {
	case errors.Is(err, errUnavailable), errors.Is(err, errNotOffered):
		return err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "its server did not answer in time"
	case errors.Is(err, mcp.ErrConnectionClosed):
		return "its server stopped while running it"
	}
	return "its server failed while running it"
}
