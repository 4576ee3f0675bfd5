package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/faults"
)

// RunOption configures a Run.
type RunOption func(*runConfig)

type runConfig struct {
	defaultRetries int
	// evidence, when set, vouches for the run's evidence
	// (RunVerifiedEvidence).
	evidence *evidenceVoucher
}

// DefaultRetries sets the run's default retry budget (the reference
// agent's `retries`, default 1): the budget of registry tools without
// max_retries, of search_tools, and of names that resolve to no tool.
// A negative n is taken as 0.
func DefaultRetries(n int) RunOption {
	return func(c *runConfig) { c.defaultRetries = max(n, 0) }
}

// Run is the per-run state of one agent run whose service calls the engine
// step after step: the history seen so far, kept as an incremental
// facts.Tracker so that a step costs time proportional to the new messages
// and to the fact sets, not to the history's length; and the retry
// accounting of spec §8 X8, which the stateless Decide leaves out.
//
// # Steps
//
// A step is one dispatch: a call of Step whose history then ends with a
// response that no earlier Step judged. Calling Step again while the
// history still ends with that same response (no new messages, for
// example after Reload) re-decides the same step: a same-step rebuild
// (spec §9 M3–M4). It does not re-run the carry-over and does not charge
// again: a step's refusals are accounted from the state the step started
// with, so the latest decision of a step replaces the earlier ones, while
// the failures and successes reported for the step are kept. A Step whose
// history ends with a request decides the next request only and leaves
// the accounting alone; so does every response of a Step but the last
// (only the last one is dispatched).
//
// # Retry accounting (spec X8)
//
// The run keeps retries (name → count carried into the current step), the
// current step's failed and succeeded names, and the names that have had
// an availability refusal. The charged failures are: an unknown_tool
// refusal; a not_available_yet refusal except the first one of that name
// in the run, which is free (recorded, not charged); an operator denial
// (the counterpart of a hook's ModelRetry); and what the caller reports
// with ReportFailure (argument-validation errors, ModelRetry). A denial
// made because the decision failed closed is not charged: the fault is
// the policy's, not the model's. A tool-return with outcome failed
// (ToolFailed) is not charged: report neither. A charged failure of a name
// whose count has reached its budget exceeds it: the reference aborts the
// run with "Tool 'NAME' exceeded max retries count of BUDGET." (Retry and
// *ExceededError). Otherwise the name joins the step's failed set; several
// failures of one name in one step cost one unit. When the next step
// starts, names that succeeded are dropped and each failed name gets its
// old count plus one (a failure wins over a same-step success).
//
// Budgets: a registry tool's max_retries, or the run default when it has
// none; load_capability 1 (spec X9); search_tools and names that resolve to
// no tool the run default. An unknown_tool refusal is charged against the
// run default even when the name is a registry tool a filter dropped: the
// reference does not resolve it.
//
// Report the outcome of each executed call (ReportFailure, ReportSuccess)
// after the step's decision and before the Step that dispatches the next
// response: reports belong to the current step.
//
// The run keeps the messages it was given (not copies of their parts) so
// that it can derive its facts again when a Reload changes the registry;
// otherwise each step reads only the tracker.
//
// A Run is not safe for concurrent use. Runs are independent of each
// other: any number of them, on one Engine, may be used concurrently.
type Run struct {
	e   *Engine
	cfg runConfig

	reg     *facts.Registry
	tracker *facts.Tracker
	history facts.History // every appended message, to rebuild the tracker

	step       int // dispatches so far; the current step is step
	dispatched int // history index of the current step's response; -1 before any

	// window keeps the terms of the window's sources from step to step
	// (labels.go), for a policy set that reads the window.
	window sourceTerms

	retries map[string]int      // counts carried into the current step
	refused map[string]struct{} // availability-refused names of earlier steps

	// The current step. Verdict-derived sets are recomputed by every
	// decision of the step; reported ones accumulate.
	stepFree      map[string]struct{} // first availability refusals this step
	stepCharged   map[string]struct{} // charged refusals this step
	stepFailed    map[string]struct{} // failures reported this step
	stepSucceeded map[string]struct{} // successes reported this step
}

// NewRun starts a run with an empty history.
func (e *Engine) NewRun(opts ...RunOption) *Run {
	cfg := runConfig{defaultRetries: 1}
	for _, o := range opts {
		o(&cfg)
	}
	reg := e.Registry()
	if cfg.evidence != nil {
		// Each run its own judgements.
		ev := *cfg.evidence
		ev.judged = map[facts.Position]struct{}{}
		cfg.evidence = &ev
	}
	r := &Run{
		e:             e,
		cfg:           cfg,
		reg:           reg,
		dispatched:    -1,
		retries:       map[string]int{},
		refused:       map[string]struct{}{},
		stepFree:      map[string]struct{}{},
		stepCharged:   map[string]struct{}{},
		stepFailed:    map[string]struct{}{},
		stepSucceeded: map[string]struct{}{},
	}
	r.retrack(reg, e.FactOptions())
	return r
}

// retrack gives the run a tracker over reg keeping the optional facts o,
// holding the run's history.
func (r *Run) retrack(reg *facts.Registry, o facts.Options) {
	if r.cfg.evidence != nil {
		r.tracker = facts.NewTracker(reg, o, facts.VouchedBy(r.cfg.evidence))
	} else {
		r.tracker = facts.NewTracker(reg, o)
	}
	r.tracker.Append(r.history...)
}

// Rebind makes the run's later steps decide with e, an engine compiled
// from other policies (a newer bundle, say): the history and the retry
// accounting carry over. When e's registry is not the run's, the next
// step derives the facts again over e's registry, as after a Reload.
func (r *Run) Rebind(e *Engine) { r.e = e }

// Retry is the retry accounting of one call of the dispatched response.
type Retry struct {
	// Count is the tool name's count carried into this step.
	Count int `json:"count"`
	// Budget is the name's budget (see Run).
	Budget int `json:"budget"`
	// Charged is true when the call's refusal is a charged failure.
	Charged bool `json:"charged,omitempty"`
	// Free is true for the first availability refusal of the name in the
	// run: recorded, not charged.
	Free bool `json:"free,omitempty"`
	// Exceeded is true when the refusal is charged and Count has reached
	// Budget: the reference aborts the run instead of sending the retry.
	Exceeded bool `json:"exceeded,omitempty"`
	// Message is the abort text when Exceeded.
	Message string `json:"message,omitempty"`
}

// Err returns, for a Run's decision, an *ExceededError for the first
// call whose refusal exceeded its budget, or nil.
func (d *Decision) Err() error {
	for i, r := range d.Retries {
		if r.Exceeded {
			return &ExceededError{Tool: d.Calls[i].Tool, Budget: r.Budget}
		}
	}
	return nil
}

// ExceededError is a charged failure of a tool whose retry count has
// reached its budget: the reference aborts the run.
type ExceededError struct {
	Tool   string
	Budget int
}

func (e *ExceededError) Error() string { return exceededMessage(e.Tool, e.Budget) }

// exceededMessage is the prefix of the reference's abort text (spec X8:
// the docs link that follows it differs between versions).
func exceededMessage(tool string, budget int) string {
	return fmt.Sprintf("Tool %s exceeded max retries count of %d.", pyRepr(tool), budget)
}

// Step appends msgs to the run's history and decides on the whole of it,
// with ctxDoc as input.context (see Request.Context). When the history
// then ends with a response, the decision judges its calls and accounts
// for their refusals (see Run for steps and same-step rebuilds): its
// Step and Retries. The run keeps references to msgs: callers must not
// modify them afterwards.
//
// The decision equals Decide on the same history, made by the same
// stages; the error is Decide's. A Step that returns no decision (an
// error, or a panic it lets through) leaves the run as it was: its
// messages are not kept, so the client may send the same step again.
func (r *Run) Step(ctx context.Context, msgs []facts.Message, ctxDoc any, opts ...DecideOption) (*Decision, error) {
	return r.StepWith(ctx, msgs, ctxDoc, nil, opts...)
}

// StepWith is Step with a last word before the run records the step:
// before, when not nil, is called with the decision once it is made and
// assembled (its receipts signed with WithReceipts, its Step and Retries
// set) and before the run advances, accounts for its refusals or judges
// its evidence. before must not change the decision, which is final. An
// error from before is returned with no decision, and the run is as it
// was, as for any Step that returns no decision: the sidecar's last
// chance to refuse a step it cannot answer without changing the run.
func (r *Run) StepWith(ctx context.Context, msgs []facts.Message, ctxDoc any, before func(*Decision) error, opts ...DecideOption) (answered *Decision, err error) {
	n := len(r.history)
	defer func() {
		if answered == nil {
			// No decision came back (an error, or a panic on its way
			// up): the run is as it was, so the client's retry of the
			// same step is accepted.
			r.rewind(n)
		}
	}()
	r.history = append(r.history, msgs...)
	r.tracker.Append(r.history[n:]...)
	faults.At(ctx, faults.RunStep)

	var d *Decision
	var plan stepPlan
	// A Reload may swap the registry: derive over the one that decides.
	for attempt := 0; ; attempt++ {
		// Or the engine's policies read optional facts the tracker does
		// not keep (after a Rebind or Reload): track them from the start.
		if reg, fo := r.e.Registry(), r.e.FactOptions(); reg != r.reg || fo != r.tracker.Options() {
			r.reg = reg
			r.retrack(reg, fo)
		}
		f := r.tracker.FactsWith(r.tracker.Options())
		s := r.e.snap.Load()
		dc := s.config(opts)
		dc.run, dc.plan = r, &plan
		// The history too: a Reload between here and the decision may
		// bring policies that read optional facts the tracker lacks.
		if d, _, err = s.decide(ctx, Request{Facts: &f, History: r.history, Context: ctxDoc}, &dc); err != nil {
			return nil, err
		}
		if r.e.Registry() == r.reg || attempt == 2 {
			break
		}
	}
	if before != nil {
		if err := before(d); err != nil {
			return nil, err
		}
	}
	r.commit(plan, d)
	return d, nil
}

// stepPlan is a step's accounting, computed as its decision is
// assembled and recorded (commit) only once the step is answered.
type stepPlan struct {
	// last is the index of the response judged, -1 when the history
	// does not end with a response (nothing is accounted).
	last          int
	advance       bool // a new step: the carry-over runs first
	step          int
	retries       []Retry
	free, charged map[string]struct{}
}

// plan accounts for d's refusals without recording anything.
func (r *Run) plan(d *Decision) stepPlan { return r.planCalls(d.Dispatch != nil, d.Calls) }

// planCalls is plan for the verdicts calls of the dispatched response,
// when the facts have one (dispatch).
func (r *Run) planCalls(dispatch bool, calls []CallVerdict) stepPlan {
	last := len(r.history) - 1
	if !dispatch || last < 0 || r.history[last].Kind != facts.Response {
		return stepPlan{last: -1, retries: []Retry{}}
	}
	p := stepPlan{last: last, advance: last != r.dispatched, step: r.step}
	retries, freed := r.retries, map[string]struct{}(nil)
	if p.advance { // the carry-over first
		p.step++
		retries, freed = r.carry(), r.stepFree
	}
	p.retries, p.free, p.charged = r.account(calls, retries, freed)
	return p
}

// Replay appends msgs to the run's history as Step does, and records the
// step as a decision whose calls had the verdicts calls says did (the
// retry accounting, the evidence the run judged), without evaluating the
// policies: for a run that resumes a session another process decided,
// with that decision's verdicts (a gateway replica giving its run what
// another replica wrote). Each of calls needs the call's Tool, Part,
// Verdict and FailClosed, one per tool call of the dispatched response in
// order; none when the history then ends with no response. The verdicts
// are taken as given: only that they name the response's calls is
// checked, and an error (the run as it was) says when they do not. The
// decision returned holds calls, Step and Retries, nothing else; the
// next Step decides as after a Step that gave those verdicts.
func (r *Run) Replay(msgs []facts.Message, calls []CallVerdict) (*Decision, error) {
	n := len(r.history)
	r.history = append(r.history, msgs...)
	r.tracker.Append(r.history[n:]...)
	if reg, fo := r.e.Registry(), r.e.FactOptions(); reg != r.reg || fo != r.tracker.Options() {
		r.reg = reg
		r.retrack(reg, fo)
	}
	f := r.tracker.Facts()
	var want []facts.Call
	if f.Dispatch != nil {
		want = f.Dispatch.Calls
	}
	ok := len(want) == len(calls)
	for i := 0; ok && i < len(calls); i++ {
		ok = calls[i].Tool == want[i].Tool && calls[i].Part == want[i].Part
	}
	if !ok {
		r.rewind(n)
		return nil, fmt.Errorf("engine: replay: the verdicts name %d calls; the dispatched response holds %d, or another tool or part", len(calls), len(want))
	}
	for i, c := range calls {
		switch c.Verdict {
		case Execute, NotAvailableYet, UnknownTool, Denied, ApprovalRequired, InvalidArgs:
		default:
			r.rewind(n)
			return nil, fmt.Errorf("engine: replay: call %d (%s): %q is not a verdict", i, c.Tool, c.Verdict)
		}
	}
	d := &Decision{Calls: append([]CallVerdict(nil), calls...), run: true}
	plan := r.planCalls(f.Dispatch != nil, d.Calls)
	d.Step, d.Retries = plan.step, plan.retries
	r.commit(plan, d)
	return d, nil
}

// commit records a step's accounting once the step is answered.
func (r *Run) commit(p stepPlan, d *Decision) {
	if p.last < 0 {
		return
	}
	if p.advance {
		r.advance()
		r.dispatched = p.last
	}
	if r.cfg.evidence != nil {
		r.cfg.evidence.judge(p.last, d)
	}
	r.stepFree, r.stepCharged = p.free, p.charged
}

// rewind drops the messages a failed Step appended after the first n and
// derives the tracker again over the rest: nothing else has changed
// before a step's decision comes back.
func (r *Run) rewind(n int) {
	if len(r.history) == n {
		return
	}
	clear(r.history[n:])
	r.history = r.history[:n]
	r.retrack(r.reg, r.tracker.Options())
}

// carry is the carry-over of spec X8: the counts the next step starts
// with.
func (r *Run) carry() map[string]int {
	next := make(map[string]int, len(r.retries))
	for n, c := range r.retries {
		if _, ok := r.stepSucceeded[n]; !ok {
			next[n] = c
		}
	}
	for _, failed := range []map[string]struct{}{r.stepCharged, r.stepFailed} {
		for n := range failed {
			next[n] = r.retries[n] + 1
		}
	}
	return next
}

// advance starts a new step: the carry-over of spec X8.
func (r *Run) advance() {
	r.retries = r.carry()
	maps.Copy(r.refused, r.stepFree)
	clear(r.stepFree)
	clear(r.stepCharged)
	clear(r.stepFailed)
	clear(r.stepSucceeded)
	r.step++
}

// account judges the refusals of d's calls, in order, from the counts
// the step started with and the names whose free availability refusal
// earlier steps used (r.refused, and freed when the step is new): the
// step's free and charged names replace what an earlier decision of the
// same step accounted.
func (r *Run) account(calls []CallVerdict, retries map[string]int, freed map[string]struct{}) (out []Retry, free, charged map[string]struct{}) {
	out = make([]Retry, len(calls))
	mark := func(m *map[string]struct{}, tool string) {
		if *m == nil {
			*m = map[string]struct{}{}
		}
		(*m)[tool] = struct{}{}
	}
	for i, c := range calls {
		rt := Retry{Count: retries[c.Tool], Budget: r.budget(c.Tool)}
		switch c.Verdict {
		case UnknownTool:
			rt.Budget = r.cfg.defaultRetries
			rt.Charged = true
		case NotAvailableYet:
			_, before := r.refused[c.Tool]
			_, earlier := freed[c.Tool]
			if _, now := free[c.Tool]; before || earlier || now {
				rt.Charged = true
			} else {
				rt.Free = true
				mark(&free, c.Tool)
			}
		case Denied:
			rt.Charged = !c.FailClosed
		case InvalidArgs:
			// An argument-validation retry (spec X8).
			rt.Charged = true
		}
		if rt.Charged {
			if rt.Count >= rt.Budget {
				rt.Exceeded = true
				rt.Message = exceededMessage(c.Tool, rt.Budget)
			} else {
				mark(&charged, c.Tool)
			}
		}
		out[i] = rt
	}
	return out, free, charged
}

// budget returns a resolved tool's retry budget.
func (r *Run) budget(tool string) int {
	if t, ok := r.reg.Tool(tool); ok {
		if t.MaxRetries != nil {
			return *t.MaxRetries
		}
		return r.cfg.defaultRetries
	}
	if tool == facts.LoadCapabilityTool {
		return 1
	}
	return r.cfg.defaultRetries
}

// ReportFailure records a charged failure of an executed call of the
// current step: an argument-validation error or a ModelRetry raised by
// the tool or a hook. It returns an *ExceededError, and records nothing,
// when the tool's count carried into this step has reached its budget:
// the reference aborts the run there. Do not report a ToolFailed
// (tool-return with outcome failed): it is not charged.
func (r *Run) ReportFailure(tool string) error {
	if b := r.budget(tool); r.retries[tool] >= b {
		return &ExceededError{Tool: tool, Budget: b}
	}
	r.stepFailed[tool] = struct{}{}
	return nil
}

// ReportSuccess records that an executed call of the current step
// succeeded: the tool's count is cleared when the next step starts, unless
// the tool also failed in this step.
func (r *Run) ReportSuccess(tool string) {
	r.stepSucceeded[tool] = struct{}{}
}

// Steps returns the number of dispatches so far (the current step's
// number).
func (r *Run) Steps() int { return r.step }

// Len returns the number of messages in the run's history.
func (r *Run) Len() int { return len(r.history) }

// Retries returns a copy of the counts carried into the current step;
// names with no count are absent.
func (r *Run) Retries() map[string]int { return maps.Clone(r.retries) }

// AvailabilityRefused returns, sorted, the names whose free availability
// refusal has been used, the current step included.
func (r *Run) AvailabilityRefused() []string {
	out := slices.Collect(maps.Keys(r.refused))
	for n := range r.stepFree {
		if _, ok := r.refused[n]; !ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}
