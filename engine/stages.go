package engine

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/faults"
	"github.com/policycheck/policycheck/trust"
)

// decide runs the four stages of a decision (see the package doc) on req:
// Decide, Explain and Run.Step all call it. A panic on the way (a bug) is
// recovered as a decision failed closed (Decision.Panicked).
func (s *snapshot) decide(ctx context.Context, req Request, dc *decideConfig) (d *Decision, p *prepared, err error) {
	defer func() {
		if v := recover(); v != nil {
			d, p, err = s.panicked(req, dc, v, debug.Stack())
		}
	}()
	if dc.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dc.deadline)
		defer cancel()
	}
	if p, err = s.prepare(ctx, req, dc); err != nil {
		return nil, nil, err
	}
	faults.At(ctx, faults.EngineDecide)
	ev := s.evaluate(ctx, p, dc)
	o := s.check(p, ev)
	if ev.put != "" && ev.res != nil && !o.closed && ctx.Err() == nil {
		s.decisions.Put(ev.put, packEntry(ev.res, &s.known))
	}
	d, err = s.assemble(p, o, dc)
	return d, p, err
}

// config reads a decision's options.
func (s *snapshot) config(opts []DecideOption) decideConfig {
	dc := decideConfig{deadline: s.deadline}
	for _, o := range opts {
		o(&dc)
	}
	return dc
}

// prepared is a decision's input before evaluation.
type prepared struct {
	facts *facts.Facts
	// traced is the history the facts were derived from (vouched, with
	// verified evidence): an explanation reads its provenance there.
	traced         facts.History
	next, dispatch *filterResult
	filterErrors   []filterError
	// fingerprint: Decision.Fingerprint.
	fingerprint string
	input       ast.Value
	approvals   facts.Approvals
	binds       []*binding
	// invalid: why each call's arguments fail its tool's schema (nil
	// when all validate).
	invalid []*argsInvalid
	// missing says which optional fact the policies read that the
	// request could not give: the decision fails closed.
	missing string
	checked outcome // the check stage's (here: one allocation less)
}

// at is element i of a per-call slice, or nil when there is none.
func at[T any](s []*T, i int) *T {
	if s == nil {
		return nil
	}
	return s[i]
}

// derive is the facts of h, counting only the evidence v vouches for
// when v is set, and the history they were derived from: the one place
// the engine derives facts from a history.
func (s *snapshot) derive(h facts.History, v *evidenceVoucher) (*facts.Facts, facts.History) {
	var unv []facts.Unvouched
	if v != nil {
		h, unv = facts.VouchHistory(h, v)
	}
	f := facts.Derive(h, s.reg, s.opts)
	f.Unvouched = unv
	return &f, h
}

// notCarried ends the reason of a decision whose policies read an
// optional fact the request cannot give.
const notCarried = ", which the request's facts do not carry (a decision-log event logged without them, " +
	"or a facts.Tracker built without Engine.FactOptions) and no history gives"

// prepare is the first stage: the facts (derived, or the request's with
// the optional facts the policies read), the filters of the active sets,
// the approvals bound to the calls, the calls' arguments read and
// validated, and the input document. An error is input the engine cannot
// represent (a context that is not JSON).
func (s *snapshot) prepare(ctx context.Context, req Request, dc *decideConfig) (*prepared, error) {
	if req.Approvals == nil {
		req.Approvals = dc.approvals
	}
	f, traced := req.Facts, req.History
	if f == nil {
		f, traced = s.derive(req.History, dc.evidence)
	}
	missing := ""
	if s.opts.ToolCalls && f.ToolCalls == nil {
		if req.History != nil {
			withCalls := *f
			withCalls.ToolCalls, withCalls.BuiltinReturns, withCalls.UnpairedReturns = facts.ToolCalls(req.History), facts.BuiltinReturns(req.History), facts.UnpairedReturns(req.History)
			f = &withCalls
		} else {
			// Nothing says what the calls were: the decision fails
			// closed rather than let the policies count none.
			missing = "the policies read input.facts.tool_calls" + notCarried
		}
	}
	if s.opts.ReturnsByTool && f.ReturnsByTool == nil && f.Dispatch != nil {
		withReturns := *f
		switch {
		case f.ToolCalls != nil:
			withReturns.ReturnsByTool = facts.ReturnsByToolOf(f.ToolCalls, f.BuiltinReturns, f.UnpairedReturns)
			f = &withReturns
		case req.History != nil:
			withReturns.ReturnsByTool = facts.ReturnsByToolOf(facts.ToolCalls(req.History), facts.BuiltinReturns(req.History), facts.UnpairedReturns(req.History))
			f = &withReturns
		case missing == "":
			missing = "the policies read input.call.window" + notCarried
		}
	}
	if s.opts.Flows && f.Dispatch != nil && slices.ContainsFunc(f.Dispatch.Calls, func(c facts.Call) bool { return c.Flows == nil }) {
		if req.History != nil {
			flows, truncated := facts.Flows(req.History, s.reg, s.opts)
			withFlows, d := *f, *f.Dispatch
			d.Calls = slices.Clone(d.Calls)
			for i := range d.Calls {
				if i < len(flows) {
					d.Calls[i].Flows = flows[i]
				}
			}
			withFlows.Dispatch, withFlows.FlowIndexTruncated = &d, truncated
			f = &withFlows
		} else if missing == "" {
			missing = "the policies read input.call.flows" + notCarried
		}
	}
	ctxTerm, ctxDigest, err := s.contextValue(req.Context)
	if err != nil {
		return nil, err
	}
	next := s.runFilters(ctx, f.ActiveCapabilities, ctxTerm, ctxDigest)
	dispatch := next
	if f.Dispatch != nil && !equalStrings(f.Dispatch.ActiveCapabilities, f.ActiveCapabilities) {
		dispatch = s.runFilters(ctx, f.Dispatch.ActiveCapabilities, ctxTerm, ctxDigest)
	}
	binds := bindApprovals(f, req.Approvals)
	reads, invalid := readCalls(s.reg, f, binds)
	p := &prepared{facts: f, traced: traced, next: next, dispatch: dispatch,
		input:     buildInput(f, next, dispatch, ctxTerm, &s.known, binds, reads, invalid, s.opts, labelInput{s.reg, s.labels, dc.windowTerms()}),
		approvals: req.Approvals, binds: binds, invalid: invalid, missing: missing,
		// The fingerprint of the filter keys used for dispatch, or for
		// the next request when there is none: each filter result
		// carries the one of the active set it was composed for.
		fingerprint:  next.fingerprint,
		filterErrors: append(slices.Clone(next.errors), dispatch.errors...),
	}
	if f.Dispatch != nil {
		p.fingerprint = dispatch.fingerprint
	}
	return p, nil
}

// evaluated is the evaluate stage's value: the policy's result, or why
// the decision fails closed (fault); put is the memo key under which a
// result evaluated now is remembered once it passes check.
type evaluated struct {
	res   *policyResult
	fault string
	put   string
}

// evaluate is the second stage: the policy's result for p's input, from
// the decision memo (memo.go) when it holds one, else by evaluating the
// decision query (percall.go when that errs).
func (s *snapshot) evaluate(ctx context.Context, p *prepared, dc *decideConfig) evaluated {
	if err := ctx.Err(); err != nil {
		// Past the deadline before evaluation. OPA notices a
		// cancellation only while it evaluates, so a quick query could
		// still finish: fail closed whether or not the memo holds the
		// result.
		return evaluated{fault: fmt.Sprintf("policy evaluation failed: the decision's deadline passed before evaluation: %v", err)}
	}
	if p.missing != "" {
		return evaluated{fault: p.missing}
	}
	if dc.beforeEval != nil {
		dc.beforeEval(ctx)
	}
	if dc.perCall {
		res, fault := s.evalPerCall(ctx, p, errForcedPerCall)
		return evaluated{res: res, fault: fault}
	}
	// A decision whose filters failed is not memoised: it fails closed
	// whatever the policy says, and a filter error may be a timeout.
	ev := evaluated{}
	if s.decisions != nil && len(p.filterErrors) == 0 {
		ev.put = inputKey(p.input)
		if e, hit := s.decisions.Get(ev.put); hit {
			// The name lists come out as new slices: no decision shares
			// them with another.
			return evaluated{res: e.unpack(&s.known)}
		}
	}
	ev.res, ev.fault = s.eval(ctx, p)
	return ev
}

// eval runs the decision query on p's input and returns the policy's result,
// decoded, or why the decision fails closed.
func (s *snapshot) eval(ctx context.Context, p *prepared) (*policyResult, string) {
	rs, err := s.decision.Eval(ctx, s.evalWith(p.input)...)
	switch {
	case err != nil:
		// An error in the rules about one call fails that call closed,
		// not the decision (percall.go).
		return s.evalPerCall(ctx, p, err)
	case len(rs) == 0 || len(rs[0].Expressions) == 0:
		return nil, "policy decision is undefined: " + s.query + " produced no result"
	}
	term, isTerm := rs[0].Expressions[0].Value.(*ast.Term)
	if !isTerm {
		return nil, "policy decision is not an object"
	}
	res, err := decodeResult(term, s.names)
	if err != nil {
		return nil, err.Error()
	}
	return res, ""
}

// outcome is the check stage's value: the policy's answer held to the
// invariants, or the fail-closed answer, from which assemble builds the
// Decision.
type outcome struct {
	available, advertised, wouldHide []string
	// dispatch: the facts have one, whose calls may execute dispatchAvailable.
	dispatch          bool
	dispatchAvailable []string
	calls             []CallVerdict
	errors            []string
	removal           *removal
	closed            bool
	panicStack        []byte
}

func newOutcome(p *prepared) *outcome {
	o := &p.checked
	*o = outcome{available: []string{}, advertised: []string{}, calls: []CallVerdict{}}
	if fd := p.facts.Dispatch; fd != nil {
		o.dispatch, o.dispatchAvailable = true, []string{}
		for _, c := range fd.Calls {
			o.calls = append(o.calls, CallVerdict{ToolCallID: c.ToolCallID, Tool: c.Tool, Part: c.Part})
		}
	}
	return o
}

// check is the third stage: the policy's result held to the invariants
// (fill). A fault (of evaluate, or a recovered panic), a broken invariant
// that fails the decision or a failed filter makes the outcome closed:
// the one place a decision fails closed.
func (s *snapshot) check(p *prepared, ev evaluated) *outcome {
	o := newOutcome(p)
	fault := ev.fault
	if ev.res != nil {
		if err := o.fill(s, p, ev.res); err != nil {
			fault = err.Error()
		} else {
			o.removal.input = p.input
		}
	}
	if fault != "" {
		o.errors = appendUnique(o.errors, fault)
	}
	for _, fe := range p.filterErrors {
		o.errors = appendUnique(o.errors, fmt.Sprintf("filter %s.%s (%s) failed: %s", filterRoot, fe.Capability, fe.File, fe.Message))
	}
	if fault != "" || len(p.filterErrors) > 0 {
		o.close()
	}
	return o
}

// close makes every registry tool unavailable and denies every call.
func (o *outcome) close() {
	o.closed = true
	o.available, o.advertised, o.wouldHide = []string{}, []string{}, nil
	if o.dispatch {
		o.dispatchAvailable = []string{}
	}
	for i := range o.calls {
		c := &o.calls[i]
		c.Verdict = Denied
		c.Message = failClosedMessage(c.Tool)
		c.Capability = ""
		c.FailClosed = true
		c.WouldDeny, c.ArgsErrors = nil, nil
		c.Reasons = append([]string{}, o.errors...)
	}
}

// assemble is the last stage and the one place a Decision is built: the
// facts' views, the checked outcome, what became of the approvals, the
// receipts of the executing calls (WithReceipts) and, for a Run's step,
// its retry accounting. Nothing writes to the Decision once it is
// returned. An error is a receipt that cannot be signed.
func (s *snapshot) assemble(p *prepared, o *outcome, dc *decideConfig) (*Decision, error) {
	approvals := finishApprovals(p, o.calls)
	r := ReportFacts(p.facts)
	d := &Decision{
		Fingerprint: p.fingerprint, Window: r.Window, Facts: r.Facts,
		Available: o.available, Advertised: o.advertised, Calls: o.calls,
		Approvals: approvals, UnverifiedEvidence: unverified(p.facts.Unvouched),
		WouldHide: o.wouldHide, Errors: o.errors,
		PolicyRevision: s.rev, RegistryRevision: s.regRev,
		facts: p.facts, removal: o.removal, input: p.input, binds: p.binds,
		approvals: p.approvals, argsProblems: p.invalid, panicStack: o.panicStack,
	}
	if r.Dispatch != nil {
		dv := *r.Dispatch
		dv.Available = o.dispatchAvailable
		d.Dispatch = &dv
	}
	for i := 0; dc.signer != nil && i < len(d.Calls); i++ {
		if digest, ok := d.ExecutionDigest(i); ok {
			c := &d.Calls[i]
			cl := trust.Claims{RunID: dc.runID, ToolCallID: c.ToolCallID, Tool: c.Tool, Digest: digest,
				PolicyRevision: d.PolicyRevision, RegistryRevision: d.RegistryRevision}
			if c.Approval != nil && c.Approval.Applied {
				cl.Approvals = []ApprovalOutcome{*c.Approval}
			}
			var err error
			if c.Receipt, err = dc.signer.Sign(cl); err != nil {
				return nil, fmt.Errorf("%w (call %d): %w", ErrSign, i, err)
			}
		}
	}
	if dc.run != nil {
		*dc.plan = dc.run.plan(d)
		d.run, d.Step, d.Retries = true, dc.plan.step, dc.plan.retries
	}
	return d, nil
}

// panicked is the decision of a request whose decision panicked: failed
// closed, every call denied, the panic in Errors, assembled as any other.
// Its facts are the request's, derived again when it gave none; a
// derivation that panics too leaves them empty (no call is then listed,
// and none executes).
func (s *snapshot) panicked(req Request, dc *decideConfig, v any, stack []byte) (*Decision, *prepared, error) {
	p := &prepared{facts: req.Facts, traced: req.History}
	if p.facts == nil {
		p.facts = s.factsAfterPanic(req)
	}
	o := s.check(p, evaluated{fault: fmt.Sprintf("internal error: the engine panicked while deciding, so the decision fails closed (a bug: please report it): %v", v)})
	o.panicStack = stack
	d, err := s.assemble(p, o, dc)
	return d, p, err
}

// factsAfterPanic derives the request's facts, or none when that panics.
func (s *snapshot) factsAfterPanic(req Request) (f *facts.Facts) {
	defer func() {
		if recover() != nil {
			f = &facts.Facts{}
		}
	}()
	f, _ = s.derive(req.History, nil)
	return f
}

// Panicked reports whether the decision failed closed because the engine
// recovered from a panic on its path (a bug, said in Errors): the sidecar
// counts these in policycheck_recovered_panics_total.
func (d *Decision) Panicked() bool { return d.panicStack != nil }

// PanicStack is the stack of the panic a Panicked decision recovered
// from, for the operator's log; nil otherwise.
func (d *Decision) PanicStack() []byte { return d.panicStack }
