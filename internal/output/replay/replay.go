// Package replay decides recorded agent runs with two policy sets, a
// baseline and a candidate (each with its registry: a registry change is
// replayed on histories), and reports every decision on which they
// differ: the engine of `policycheck replay`.
//
// A history is replayed as the run that produced it: its messages are
// appended one at a time to an engine.Run of each side (incremental
// facts), so every prefix is decided; a prefix that ends with a request
// decides the next request's availability and advertisement, one that
// ends with a response judges that response's calls. A decision-log run
// is the sequence of decisions the sidecar logged for it, each rebuilt
// from its input document (engine.FactsFromInput) and decided by both
// sides with the approvals that were bound to its calls. Runs are
// replayed in parallel; each side is one Engine whose caches every run
// shares.
//
// A logged decision that recorded the receipts it handed out and its
// approvals' signature checks (a sidecar with --receipt-key or
// --approver-keys) is audited too: each receipt is verified against its
// call as of the decision's time, and, given approver keys, each approval
// it was decided with is judged again; what does not verify is a finding
// (Audit).
//
// inputs.go reads histories, JSON Lines and decision logs; audit.go reads
// and verifies what they recorded of receipts and approval signatures;
// report.go holds the report, which internal/output/render writes (pretty, json,
// html); gate.go is --fail-on.
package replay

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/trust"
)

// Run is one recorded run: a History replayed prefix by prefix, or the
// Steps a decision log holds.
type Run struct {
	// ID names the run in the report: a file, FILE:LINE of a JSON Lines
	// file, or the sidecar's run id.
	ID string
	// History, when set, is replayed message by message with Context as
	// input.context and Approvals as every step's approvals.
	History   facts.History
	Context   any
	Approvals facts.Approvals
	// Steps are logged decisions, in order, when History is nil.
	Steps []Step
}

// Step is one logged decision.
type Step struct {
	// Message is the index of the last message decided on.
	Message int
	Facts   *facts.Facts
	Context any
	// Approvals are the approvals bound to the step's calls, as its input
	// document carries them (engine.FactsFromInput): the decision is
	// decided again with the approvals it was decided with.
	Approvals facts.Approvals
	// Source is where the event was read (file and pointer).
	Source string
	// Recorded is what the event recorded of the receipts the decision
	// handed out and of its approvals' signature checks, for the audit
	// (see Audit); nil when the event recorded neither.
	Recorded *Recorded
}

// Progress is told about finished runs, from one goroutine: Add(1) after
// each run. A *progress.Reporter (internal/cli/internal/progress) is one.
type Progress interface {
	Add(n int)
}

// Options configure Replay.
type Options struct {
	// Workers is the number of runs replayed at once (GOMAXPROCS when 0).
	Workers int
	// Progress, when set, is told about each finished run.
	Progress Progress
	// Decide are options of every decision of both sides.
	Decide []engine.DecideOption
	// Receipts, when set, signs the execution receipts of the candidate's
	// decisions (engine.WithReceipts) with the run's id: the changes of
	// calls whose verdicts changed to execute show the receipt the
	// candidate would hand out.
	Receipts *trust.Signer
	// ReceiptKeys, when set, verify the receipts the logged decisions
	// recorded instead of the keys each event records (custom.receipt_keys);
	// ReceiptKeysFrom names them in the report.
	ReceiptKeys     jwk.Set
	ReceiptKeysFrom string
	// ApproverKeys, when set, judge again the signatures of the approvals
	// each logged decision was decided with, as the sidecar's
	// --approver-keys does, as of the event's time: one that does not
	// verify is decided as not applied, on both sides, and is a finding.
	ApproverKeys jwk.Set
}

// Sides are the two policy sets compared. Each engine has its registry:
// when they differ, a registry change is replayed too (histories only:
// see Replay).
type Sides struct {
	Baseline, Candidate *engine.Engine
	// BaselinePolicies and CandidatePolicies name what each side loaded,
	// and BaselineRegistry and CandidateRegistry the registry files, for
	// the report.
	BaselinePolicies, CandidatePolicies []string
	BaselineRegistry, CandidateRegistry string
}

// ErrRegistryOnLog is Replay's error for a logged decision when the sides'
// registries differ: its facts (the capabilities active, for one) were
// derived with the registry it was decided with, and its history is not
// in the log to derive them again.
var ErrRegistryOnLog = errors.New("the sides' registries differ, and a logged decision keeps the facts derived with the registry it was decided with: replay histories to see a registry change")

// Replay decides every step of every run with both sides and returns the
// report. An error is returned only for input the engine cannot take (a
// context that is not JSON, a logged decision when the sides' registries
// differ: ErrRegistryOnLog) or a cancelled ctx; policy errors fail
// decisions closed and are reported as such.
func Replay(ctx context.Context, sides Sides, runs []*Run, opts Options) (*Report, error) {
	_, baseReg := sides.Baseline.Revision()
	if _, candReg := sides.Candidate.Revision(); candReg != baseReg {
		for _, r := range runs {
			if r.History == nil {
				return nil, fmt.Errorf("run %s: %w", r.ID, ErrRegistryOnLog)
			}
		}
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(min(workers, len(runs)), 1)
	results := make([]*tally, len(runs))
	errs := make([]error, len(runs))
	next := make(chan int)
	done := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i], errs[i] = replayRun(ctx, sides, runs[i], opts)
				done <- i
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range runs {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(done) }()
	for range done {
		if opts.Progress != nil {
			opts.Progress.Add(1)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := newReport(sides)
	audits := make([]*audit, len(results))
	for i, t := range results {
		if errs[i] != nil {
			return nil, fmt.Errorf("run %s: %w", runs[i].ID, errs[i])
		}
		rep.add(t)
		audits[i] = &t.audit
	}
	rep.Runs = len(runs)
	keysFrom := "recorded"
	if opts.ReceiptKeys != nil {
		keysFrom = opts.ReceiptKeysFrom
	}
	rep.Audit = finishAudit(audits, keysFrom)
	return rep, nil
}

// replayRun decides one run's steps with both sides.
func replayRun(ctx context.Context, sides Sides, r *Run, o Options) (*tally, error) {
	t := &tally{run: r.ID, transitions: map[string]int{}}
	opts := o.Decide
	if r.History != nil && r.Approvals != nil {
		opts = append(slices.Clip(opts), engine.WithApprovals(r.Approvals))
	}
	candOpts := opts
	if o.Receipts != nil {
		candOpts = append(slices.Clip(opts), engine.WithReceipts(o.Receipts, r.ID))
	}
	if r.History != nil {
		rb, rc := sides.Baseline.NewRun(), sides.Candidate.NewRun()
		for i := range r.History {
			msg := r.History[i : i+1]
			db, err := rb.Step(ctx, msg, r.Context, opts...)
			if err != nil {
				return nil, err
			}
			dc, err := rc.Step(ctx, msg, r.Context, candOpts...)
			if err != nil {
				return nil, err
			}
			t.compare(i, db, dc)
		}
		return t, nil
	}
	for _, st := range r.Steps {
		approvals, err := t.audit.judgeApprovals(r.ID, st, o.ApproverKeys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.Source, err)
		}
		t.audit.checkReceipts(r.ID, st, o.ReceiptKeys)
		req := engine.Request{Facts: st.Facts, Context: st.Context, Approvals: approvals}
		db, err := sides.Baseline.Decide(ctx, req, opts...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.Source, err)
		}
		dc, err := sides.Candidate.Decide(ctx, req, candOpts...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.Source, err)
		}
		t.compare(st.Message, db, dc)
	}
	return t, nil
}

// Compare returns the changes between two decisions of one step (a
// baseline and a candidate decided on the same facts and context), as
// the report lists them: what the sidecar's shadow policy counts and logs.
func Compare(run string, msg int, b, c *engine.Decision) []Change {
	t := &tally{run: run, transitions: map[string]int{}}
	t.compare(msg, b, c)
	return t.changes
}

// tally is one run's part of the report.
type tally struct {
	run                  string
	decisions, calls     int
	transitions          map[string]int
	available, advertise Delta
	wouldHide            Delta
	failClosed           FailClosed
	wouldDeny            FailClosed
	changes              []Change
	// audit is what the run's logged decisions recorded, verified.
	audit audit
}

// Outcome states.
const (
	StateAvailable    = "available"
	StateUnavailable  = "unavailable"
	StateAdvertised   = "advertised"
	StateUnadvertised = "unadvertised"
	StateOK           = "ok"
	StateFailClosed   = "fail_closed"
	// Log-only rules (METADATA custom.policycheck.enforcement: log_only).
	StateWouldDeny   = "would_deny"
	StateNoWouldDeny = "no_would_deny"
	StateWouldHide   = "would_hide"
	StateNoWouldHide = "no_would_hide"
)

// Change kinds.
const (
	KindCall       = "call"
	KindAvailable  = "available"
	KindAdvertised = "advertised"
	KindFailClosed = "fail_closed"
	// A log-only rule's report differs: it would deny a call, or hide
	// a tool, on one side only.
	KindWouldDeny = "would_deny"
	KindWouldHide = "would_hide"
)

// compare records the differences of one step's two decisions. A step
// that ends with a response compares its calls; one that ends with a
// request compares availability and advertisement. Either compares
// fail-closed.
func (t *tally) compare(msg int, b, c *engine.Decision) {
	t.decisions++
	bf, cf := len(b.Errors) > 0, len(c.Errors) > 0
	if bf {
		t.failClosed.Baseline++
	}
	if cf {
		t.failClosed.Candidate++
	}
	if bf != cf {
		ch := Change{Run: t.run, Message: msg, Kind: KindFailClosed,
			Baseline:  Outcome{State: StateOK, Reasons: b.Errors},
			Candidate: Outcome{State: StateOK, Reasons: c.Errors}}
		if bf {
			ch.Baseline.State = StateFailClosed
		}
		if cf {
			ch.Candidate.State = StateFailClosed
		}
		ch.Transition = ch.Baseline.State + "->" + ch.Candidate.State
		t.changes = append(t.changes, ch)
	}
	if b.Dispatch != nil {
		for i := range b.Calls {
			bc, cc := b.Calls[i], c.Calls[i]
			t.calls++
			tr := bc.Verdict + "->" + cc.Verdict
			t.transitions[tr]++
			if len(bc.WouldDeny) > 0 {
				t.wouldDeny.Baseline++
			}
			if len(cc.WouldDeny) > 0 {
				t.wouldDeny.Candidate++
			}
			if bw, cw := len(bc.WouldDeny) > 0, len(cc.WouldDeny) > 0; bw != cw {
				state := func(w bool) string {
					if w {
						return StateWouldDeny
					}
					return StateNoWouldDeny
				}
				t.changes = append(t.changes, Change{Run: t.run, Message: msg, Kind: KindWouldDeny, ToolCallID: bc.ToolCallID, Tool: bc.Tool,
					Part: bc.Part, Transition: state(bw) + "->" + state(cw),
					Baseline:  Outcome{State: state(bw), Reasons: bc.WouldDeny},
					Candidate: Outcome{State: state(cw), Reasons: cc.WouldDeny}})
			}
			if bc.Verdict == cc.Verdict {
				continue
			}
			t.changes = append(t.changes, Change{Run: t.run, Message: msg, Kind: KindCall, ToolCallID: bc.ToolCallID, Tool: bc.Tool,
				Part: bc.Part, Transition: tr,
				Baseline:  Outcome{State: bc.Verdict, Message: bc.Message, Reasons: bc.Reasons},
				Candidate: Outcome{State: cc.Verdict, Message: cc.Message, Reasons: cc.Reasons, Receipt: cc.Receipt}})
		}
		return
	}
	t.diffNames(msg, KindAvailable, b, c, b.Available, c.Available, &t.available, StateAvailable, StateUnavailable)
	t.diffNames(msg, KindAdvertised, b, c, b.Advertised, c.Advertised, &t.advertise, StateAdvertised, StateUnadvertised)
	t.diffNames(msg, KindWouldHide, b, c, b.WouldHide, c.WouldHide, &t.wouldHide, StateWouldHide, StateNoWouldHide)
}

// diffNames records the names one side has and the other has not.
func (t *tally) diffNames(msg int, kind string, b, c *engine.Decision, bn, cn []string, d *Delta, in, out string) {
	why := removedReasons
	if kind == KindWouldHide {
		why = func(*engine.Decision, string) []string { return nil }
	}
	i, j := 0, 0
	for i < len(bn) || j < len(cn) {
		switch {
		case j == len(cn) || (i < len(bn) && bn[i] < cn[j]):
			d.Lost++
			t.changes = append(t.changes, Change{Run: t.run, Message: msg, Kind: kind, Tool: bn[i], Transition: in + "->" + out,
				Baseline: Outcome{State: in}, Candidate: Outcome{State: out, Reasons: why(c, bn[i])}})
			i++
		case i == len(bn) || cn[j] < bn[i]:
			d.Gained++
			t.changes = append(t.changes, Change{Run: t.run, Message: msg, Kind: kind, Tool: cn[j], Transition: out + "->" + in,
				Baseline: Outcome{State: out, Reasons: why(b, cn[j])}, Candidate: Outcome{State: in}})
			j++
		default:
			i++
			j++
		}
	}
}

// removedReasons says why a decision left a tool out: what removed it,
// else its errors, else that the policy did not grant it.
func removedReasons(d *engine.Decision, tool string) []string {
	if r := d.Removed(tool); len(r) > 0 {
		return r
	}
	if len(d.Errors) > 0 {
		return slices.Clone(d.Errors)
	}
	return []string{"not granted by the policy's availability rules"}
}
