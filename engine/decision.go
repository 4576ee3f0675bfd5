package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/jsonout"
)

// Verdicts of a call.
const (
	Execute         = "execute"
	NotAvailableYet = "not_available_yet"
	UnknownTool     = "unknown_tool"
	Denied          = "denied"
	// InvalidArgs: the call's arguments fail its tool's
	// parameters_json_schema (spec X2 step 3, after the gate): the call
	// is never executed, no operator rule sees it, and the model gets a
	// retry saying what was wrong.
	InvalidArgs = "invalid_args"
)

// Decision is the outcome of one evaluation, in the shape of the decision
// document (docs/decision.md, what `policycheck eval` prints). Every name
// list is sorted and never nil; lists with the same content may share
// storage, so treat them as read-only. The engine builds a Decision in
// one place and never changes it once returned.
//
// A decision can fail closed without Decide returning an error: when the
// policy errs, its deadline (WithDeadline) runs out, its result is
// undefined or malformed, or a filter fails, every registry tool is
// unavailable, every call is Denied, and Errors says why. The verdicts are
// then safe to enforce, but they are not the policy's: check FailedClosed
// (or Errors) after every Decide and Step, and log or alert on it, or a
// slow or broken policy passes for one that denies everything.
type Decision struct {
	Fingerprint string         `json:"fingerprint"`
	Window      facts.Position `json:"window"`
	Facts       factsView      `json:"facts"`
	Available   []string       `json:"available"`
	Advertised  []string       `json:"advertised"`
	Dispatch    *dispatchView  `json:"dispatch,omitempty"`
	Calls       []CallVerdict  `json:"calls"`
	// Approvals records each approval the request carried: who answered
	// what and whether it applied (absent when the request carried none).
	Approvals []ApprovalOutcome `json:"approvals,omitempty"`
	// UnverifiedEvidence, with verified evidence (VerifiedEvidence,
	// RunVerifiedEvidence), lists the reveals and loads of the history
	// that did not count because nothing vouched for the call that
	// produced them, in history order; absent when every piece counted
	// and without verified evidence.
	UnverifiedEvidence []UnverifiedEvidence `json:"unverified_evidence,omitempty"`
	// WouldHide names the tools available on the next request or at
	// dispatch that a log-only operator rule (METADATA
	// custom.policycheck.enforcement: log_only) would hide: reported, not
	// enforced.
	WouldHide []string `json:"would_hide,omitempty"`
	// Errors explains a fail-closed decision (policy error, timeout,
	// undefined result, failed filter); empty otherwise.
	Errors []string `json:"errors,omitempty"`
	// PolicyRevision and RegistryRevision identify what decided.
	PolicyRevision   string `json:"-"`
	RegistryRevision string `json:"-"`
	// Step and Retries are the section of a decision made by a Run
	// (Run.Step), which its JSON writes after the decision's members as
	// "step" and "retries": Step is the number (from 1) of the dispatch
	// the decision judged, 0 when the history does not end with a
	// response; Retries holds one entry per call, parallel to Calls.
	// Decide leaves them out.
	Step    int     `json:"-"`
	Retries []Retry `json:"-"`

	// run: the decision is a Run's step (its JSON has the step section).
	run bool

	facts   *facts.Facts
	removal *removal  // what removed tools, read by Removed
	input   ast.Value // the decision query's input document, read by InputDocument
	// binds are the approvals bound to the calls (nil without approvals).
	binds []*binding
	// approvals are the approvals the request carried (ApprovalsGiven).
	approvals facts.Approvals
	// argsProblems, parallel to the calls, are why each call's arguments
	// fail its tool's schema (nil when every call's validate).
	argsProblems []*argsInvalid
	// panicStack is the stack of the panic the decision recovered from
	// (Panicked); nil otherwise.
	panicStack []byte
}

// removal is what a decision needs to say, on demand, why a tool was
// removed: building those sentences for every dropped tool of every
// decision cost more than most decisions spend in Go.
type removal struct {
	s              *snapshot
	next, dispatch *filterResult
	hidden         map[string]bool
	// input is the decision's input: which rules package hid a tool is
	// asked of the policy only when an explanation needs it.
	input    ast.Value
	once     sync.Once
	hiddenBy map[string][]string // tool -> enforced rules packages hiding it
	hideErr  error               // why hiddenBy could not be read
}

// hiders returns the enforced rules packages whose hide holds tool (a
// log-only package hides nothing), asked of the policy once per
// decision, or why that could not be asked.
func (r *removal) hiders(tool string) ([]string, error) {
	r.once.Do(func() {
		r.hiddenBy = map[string][]string{}
		if r.input == nil {
			return
		}
		// Bounded as a decision is (the engine's default deadline): an
		// explanation asks this after its decision.
		ctx := context.Background()
		if r.s.deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, r.s.deadline)
			defer cancel()
		}
		rs, err := r.s.hideQuery.Eval(ctx, r.s.evalWith(r.input)...)
		if err != nil {
			r.hideErr = err
			return
		}
		if len(rs) == 0 {
			r.hideErr = errors.New("the hide rules' query is undefined")
			return
		}
		byPkg, _ := rs[0].Bindings["x"].(map[string]any)
		for pkg, h := range byPkg {
			names, _ := h.([]any)
			for _, n := range names {
				if name, ok := n.(string); ok {
					r.hiddenBy[name] = append(r.hiddenBy[name], pkg)
				}
			}
		}
		for _, pkgs := range r.hiddenBy {
			sort.Strings(pkgs)
		}
	})
	return r.hiddenBy[tool], r.hideErr
}

// Removed says what removed tool from this decision: each filter that
// dropped it and any operator rule that hid it; nil when nothing did.
// Explanations read it; it is not part of eval's JSON.
func (d *Decision) Removed(tool string) []string {
	r := d.removal
	if r == nil {
		return nil
	}
	var out []string
	for _, id := range r.next.droppedBy[tool] {
		out = append(out, fmt.Sprintf("dropped by filter %s.%s (%s): neither advertised nor callable", filterRoot, id, r.s.filters[id].at))
	}
	for _, id := range r.dispatch.droppedBy[tool] {
		if !slices.Contains(r.next.droppedBy[tool], id) {
			out = append(out, fmt.Sprintf("dropped at dispatch by filter %s.%s (%s), active through the serving provider's evidence", filterRoot, id, r.s.filters[id].at))
		}
	}
	if r.hidden[tool] {
		pkgs, err := r.hiders(tool)
		for _, pkg := range pkgs {
			out = append(out, fmt.Sprintf("hidden by an operator rule, policycheck.rules.%s.hide (%s), for this request", pkg, r.s.ruleFile(pkg, "hide")))
		}
		switch {
		case err != nil:
			out = append(out, "hidden for this request; which operator rule hid it could not be read: "+err.Error())
		case len(pkgs) == 0:
			out = append(out, "hidden by the availability policy's hidden set for this request")
		}
	}
	return out
}

// factsView is the facts block of the decision.
type factsView struct {
	Discovered         []string `json:"discovered"`
	Loaded             []string `json:"loaded"`
	Returned           []string `json:"returned"`
	ActiveCapabilities []string `json:"active_capabilities"`
}

// dispatchView is the dispatch block of a decision and of a FactsReport:
// the dispatch facts and, in a decision, what they make available.
type dispatchView struct {
	Provider           *string        `json:"provider"`
	Window             facts.Position `json:"window"`
	Loaded             []string       `json:"loaded"`
	Evidence           evidenceView   `json:"evidence"`
	ActiveCapabilities []string       `json:"active_capabilities"`
	// Available is what the dispatch facts make available: in a decision
	// never nil (an empty list is written), in a FactsReport nil and not
	// written.
	Available []string `json:"available,omitzero"`
}

// evidenceView is the anchored evidence.
type evidenceView struct {
	Discovered []string `json:"discovered"`
	Loaded     []string `json:"loaded"`
}

// CallVerdict is the verdict on one tool call of the dispatched response.
type CallVerdict struct {
	ToolCallID *string `json:"tool_call_id"`
	Tool       string  `json:"tool"`
	Verdict    string  `json:"verdict"`
	// Message is the model-facing retry text, present on every refusal.
	Message string `json:"message,omitempty"`
	// Reasons are operator-facing explanations.
	Reasons []string `json:"reasons,omitempty"`
	// Args are the call's arguments: on approval_required what the
	// approver is shown, on an execute that an approval applied to the
	// arguments to execute (the approver's override_args when given).
	Args any `json:"args,omitempty"`
	// Digest, on approval_required and on a call an operator deny rule
	// denied (a rule may deny a call unless approved), binds an approval
	// to this call (see trust.CallDigest): the harness passes it back with the
	// answer.
	Digest string `json:"digest,omitempty"`
	// Approval is what became of the approval keyed by this call's
	// tool_call_id, when the request carried one.
	Approval *ApprovalOutcome `json:"approval,omitempty"`
	// WouldDeny holds, for a call that executes, the reasons of the
	// log-only operator rules that would deny it: reported, not enforced.
	WouldDeny []string `json:"would_deny,omitempty"`
	// ArgsErrors, on invalid_args, are why the arguments fail the tool's
	// parameters_json_schema: the JSON pointer inside the arguments and
	// the reason, at most facts.MaxArgsProblems.
	ArgsErrors []facts.ArgsProblem `json:"args_errors,omitempty"`
	// Receipt, on an execute when the decision was signed (see package
	// receipt), is a compact JWS the tool service verifies before it runs
	// the call; absent otherwise.
	Receipt string `json:"receipt,omitempty"`
	// Part is the index of the call's part in the response.
	Part int `json:"-"`
	// Capability is the owner named by a capability-form refusal.
	Capability string `json:"-"`
	// Rule is the rule of the policy's verdict ("gate", "unknown_tool",
	// "deny", "filter_error", "approval_denied", "require_approval"), or
	// "policy_error" for a call whose rules raised an error (the call
	// alone fails closed), for explanations.
	Rule string `json:"-"`
	// deciders are the operator's rules, filters, schema or approval
	// that gave the verdict, recorded as it is read, for explanations.
	deciders []Decider
	// FailClosed is true when the call was denied because the decision
	// failed closed (policy error, timeout, undefined result, failed
	// filter) rather than by a rule: the fault is the policy's, not the
	// model's, so retry accounting does not charge it.
	FailClosed bool `json:"-"`
}

// FailedClosed reports whether the decision failed closed (Errors is not
// empty): the policy erred, ran out of time, or returned nothing usable,
// so every call is denied whatever the policy would have said. The
// `errors` member of the decision document, `policycheck eval
// --fail-on-refusal` (exit 3) and the sidecar's fail-closed metric read
// the same condition.
func (d *Decision) FailedClosed() bool { return len(d.Errors) > 0 }

// FactsUsed returns the facts the decision was made on.
func (d *Decision) FactsUsed() *facts.Facts { return d.facts }

// setNames returns the elements of a set of strings, sorted; ok is false
// when the set holds anything but strings. OPA's sets hand out their
// elements only sorted with its generic term order, which costs more than
// the rest of reading a decision; so the candidates (registry and
// framework tool names, already sorted) are looked up instead, and only a
// set holding other names is read element by element.
func setNames(set ast.Set, candidates []*ast.Term) ([]string, bool) {
	n := set.Len()
	out := make([]string, 0, n)
	if n == 0 {
		return out, true
	}
	if n <= len(candidates) {
		for _, c := range candidates {
			if set.Contains(c) {
				out = append(out, string(c.Value.(ast.String)))
				if len(out) == n {
					return out, true
				}
			}
		}
		out = out[:0]
	}
	allStrings := true
	set.Foreach(func(e *ast.Term) {
		if s, ok := e.Value.(ast.String); ok {
			out = append(out, string(s))
		} else {
			allStrings = false
		}
	})
	if !allStrings {
		return nil, false
	}
	if !slices.IsSorted(out) {
		slices.Sort(out)
	}
	return out, true
}

// subsetSorted reports whether every element of a is in b; both sorted.
func subsetSorted(a, b []string) bool {
	if len(a) > len(b) {
		return false
	}
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) || b[j] != x {
			return false
		}
		j++
	}
	return true
}

func contains(sorted []string, s string) bool {
	_, found := slices.BinarySearch(sorted, s)
	return found
}

// fill reads the policy's decision document into o and holds it to the
// invariants (invariants.go) that make advertisement, the gate and the
// messages agree. An error fails the decision closed.
func (o *outcome) fill(s *snapshot, p *prepared, res *policyResult) error {
	// An operator rule whose value the contract could not check at load
	// and the gate found of a refused shape fails the decision closed.
	if len(res.ruleErrors) > 0 {
		return s.ruleError(&res.ruleErrors[0])
	}
	o.available, o.advertised = res.available, res.advertised
	hidden := make(map[string]bool, len(res.hidden))
	for _, n := range res.hidden {
		hidden[n] = true
	}
	o.removal = &removal{s: s, next: p.next, dispatch: p.dispatch, hidden: hidden}
	if o.dispatch && res.dispatchErr == nil {
		o.dispatchAvailable = res.dispatchAvailable
	}
	a := answer{s: s, o: o, p: p, res: res, hidden: hidden}
	if _, err := checkInvariants(a, onAnswer); err != nil {
		return err
	}
	if !o.dispatch {
		return nil
	}
	if res.dispatchErr != nil {
		return res.dispatchErr
	}
	for i := range res.verdicts {
		vm := &res.verdicts[i]
		c := &o.calls[i]
		c.Verdict, c.Rule = vm.verdict, vm.rule
		a.i, a.vm, a.c = i, vm, c
		replaced, err := checkInvariants(a, beforeVerdict)
		if err != nil {
			return err
		}
		if replaced {
			continue
		}
		a.readVerdict()
		if _, err := checkInvariants(a, afterVerdict); err != nil {
			return err
		}
	}
	return nil
}

// readVerdict gives call a.i the policy's verdict's message and reasons.
func (a answer) readVerdict() {
	s, c, vm, dispatch := a.s, a.c, a.vm, a.p.dispatch
	switch c.Verdict {
	case UnknownTool:
		c.Message = UnknownToolMessage(c.Tool, a.o.dispatchAvailable, len(a.o.dispatchAvailable) == 0 && resolvedEmpty(s, dispatch, a.hidden))
		c.Reasons, c.deciders = s.verdictReasons(c.Tool, vm, dispatch)
	case NotAvailableYet:
		c.Capability = vm.capability
		c.Message = NotAvailableMessage(c.Tool, c.Capability)
		c.Reasons, _ = s.verdictReasons(c.Tool, vm, dispatch)
	case Denied:
		if c.Rule == ruleApprovalDenied {
			// The invariant approval_denied_bound held: a denial is bound.
			b := at(a.p.binds, a.i)
			c.Message = denialMessage(b.approval)
			c.Reasons = []string{fmt.Sprintf("denied by %s through the approval bound to this call", approversText(b.approval))}
			c.deciders = []Decider{{Kind: "approval", Name: "denied by " + approversText(b.approval)}}
			return
		}
		if c.Rule == rulePolicyError {
			c.Message = policyErrorMessage(c.Tool)
			c.Reasons = []string{vm.reason}
			return
		}
		c.Message, c.Reasons = denialText(s, c.Tool, vm)
		c.FailClosed = vm.rule == "filter_error"
		if !c.FailClosed {
			c.deciders = s.answerers(vm.denials, "deny")
		}
	case ApprovalRequired:
		c.Message, c.Reasons = approvalRequiredText(s, c.Tool, vm)
		c.deciders = s.answerers(vm.requests, "require_approval")
	case Execute:
		if len(vm.wouldDeny) > 0 {
			_, c.WouldDeny = denialTextOf(s, vm.wouldDeny, "would be denied by")
		}
	}
}

// resolvedEmpty reports whether every registry tool was dropped or
// hidden (only an unknown-tool message asks).
func resolvedEmpty(s *snapshot, dispatch *filterResult, hidden map[string]bool) bool {
	for _, n := range s.reg.ToolNames() {
		if !contains(dispatch.dropped, n) && !hidden[n] {
			return false
		}
	}
	return true
}

// checkArgs gives call i, whose arguments fail its tool's schema, the
// verdict invalid_args, whatever the policy said after the gate: only an
// unknown_tool or not_available_yet refusal, or a denial made because the
// decision fails closed, comes before it (spec X2). The shipped gate says
// so itself; a replacement availability policy that does not know the
// verdict cannot execute such a call, nor have it approved or denied by
// a rule.
func (a answer) checkArgs() {
	probs := at(a.p.invalid, a.i)
	c := a.c
	if probs == nil || c.Verdict == UnknownTool || c.Verdict == NotAvailableYet || c.FailClosed {
		return
	}
	c.Verdict, c.Rule = InvalidArgs, "args"
	c.Capability, c.WouldDeny = "", nil
	c.deciders = nil
	c.ArgsErrors = probs.probs
	c.Message = InvalidArgsMessage(probs.probs, probs.omitted)
	if probs.unreadable {
		c.Reasons = []string{fmt.Sprintf("the arguments of %q cannot be read exactly one way (%s): no operator rule was evaluated on the call",
			c.Tool, argsProblemsText(probs.probs))}
		return
	}
	c.deciders = []Decider{{Kind: "schema", Name: fmt.Sprintf("parameters_json_schema of %q in the registry", c.Tool)}}
	c.Reasons = []string{fmt.Sprintf("the arguments of %q fail its parameters_json_schema in the registry (%s): no operator rule was evaluated on the call",
		c.Tool, argsProblemsText(probs.probs))}
}

// argsInvalid is why one call's arguments fail its tool's schema, or
// cannot be read exactly one way (unreadable: whatever the tool's schema).
type argsInvalid struct {
	probs      []facts.ArgsProblem
	omitted    int
	unreadable bool
}

// callArgs is one dispatched call's arguments as the policies read them
// (input.call.args): read once (facts.ReadArgs), the same reading the
// schema validates. override is an approver's override_args, when the
// approval bound to the call carries them (nil otherwise). Both are nil
// for a call whose arguments cannot be read.
type callArgs struct {
	own, override *ast.Term
	// value is the call's own arguments as read (facts.Args.Value),
	// for what else the input judges of them (argsIntegrityOf).
	value any
}

// readCalls reads the arguments of each dispatched call once and decides
// from that one reading both what the policies see and whether the call
// is invalid_args: arguments that cannot be read exactly one way (a key
// twice, data after string arguments' JSON, a number beyond the bounds,
// see facts.ReadArgs) are invalid whatever the tool's schema, the call's
// own arguments as well as an approver's override_args; the arguments a
// call would execute with (the override_args when bound) are validated
// against its tool's schema. invalid is nil when every call reads and
// validates.
func readCalls(reg *facts.Registry, f *facts.Facts, binds []*binding) (reads []callArgs, invalid []*argsInvalid) {
	if f.Dispatch == nil {
		return nil, nil
	}
	reads = make([]callArgs, len(f.Dispatch.Calls))
	mark := func(i int, inv *argsInvalid) {
		if invalid == nil {
			invalid = make([]*argsInvalid, len(f.Dispatch.Calls))
		}
		invalid[i] = inv
	}
	for i, c := range f.Dispatch.Calls {
		own := facts.ReadArgs(c.Args)
		exec := own
		var overrideTerm *ast.Term
		ownTerm, prob := readTerm(own)
		if prob == nil && binds != nil && binds[i] != nil && binds[i].bound && binds[i].approval.OverrideArgs != nil {
			exec = facts.ReadArgs(binds[i].approval.OverrideArgs)
			overrideTerm, prob = readTerm(exec)
		}
		reads[i] = callArgs{own: ownTerm, override: overrideTerm, value: own.Value}
		if prob != nil {
			mark(i, &argsInvalid{probs: []facts.ArgsProblem{*prob}, unreadable: true})
			continue
		}
		sch := reg.ArgsSchema(c.Tool)
		if sch == nil {
			continue
		}
		if probs, omitted := sch.Validate(exec); probs != nil {
			mark(i, &argsInvalid{probs: probs, omitted: omitted})
		}
	}
	return reads, invalid
}

// readTerm is arguments read by facts.ReadArgs as a Rego value, or why
// they cannot be one (their reading's problem, or OPA's refusal: never
// null in their place).
func readTerm(a facts.Args) (*ast.Term, *facts.ArgsProblem) {
	if a.Problem != nil {
		return nil, a.Problem
	}
	v, err := ast.InterfaceToValue(a.Value)
	if err != nil {
		return nil, &facts.ArgsProblem{Reason: "the arguments cannot be represented in the policy input: " + err.Error()}
	}
	return ast.NewTerm(v), nil
}

// unresolved says why tool is outside the resolved tool set of the
// dispatch (a registry tool no dispatch filter dropped and no rule hid, or
// a framework tool present: load_capability while a capability is
// deferred, search_tools while a search-gated tool survives), or "".
func (s *snapshot) unresolved(tool string, dispatch *filterResult, hidden map[string]bool) string {
	removed := func(n string) bool { return hidden[n] || len(dispatch.droppedBy[n]) > 0 }
	switch {
	case tool == facts.LoadCapabilityTool:
		if !s.reg.HasLoadCapability() {
			return "is not present: the registry defers no capability"
		}
		return ""
	case tool == facts.SearchTool:
		for _, n := range s.reg.SearchGatedTools() {
			if !removed(n) {
				return ""
			}
		}
		return "is not present: no search-gated tool survives the filters and rules"
	case !isTool(s.reg, tool):
		return "is not a registry tool"
	case len(dispatch.droppedBy[tool]) > 0:
		return "a capability filter dropped"
	case hidden[tool]:
		return "an operator rule hid"
	}
	return ""
}

// firstFlagged is the first answer carrying a flagged value, or nil.
func firstFlagged(as []ruleAnswer) *flaggedValue {
	for _, a := range as {
		if a.flagged != nil {
			return a.flagged
		}
	}
	return nil
}

// ruleError is the error of a rule value the gate flagged (rule_errors,
// or a denial carrying a value): it names the operator's rule, its file
// and row, and what the contract accepts.
func (s *snapshot) ruleError(f *flaggedValue) error {
	pkg, rule := f.pkg, f.rule
	path := ast.Ref{ast.DefaultRootDocument, ast.StringTerm("policycheck"), ast.StringTerm("rules"), ast.StringTerm(pkg), ast.StringTerm(rule)}
	v, _ := json.Marshal(f.value)
	want := "a set of tool names (none of them load_capability or search_tools, framework tools no rule can hide)"
	switch rule {
	case "deny":
		want = `a denial: an object {"reason": ..., "message": ...} of strings, a string, or a boolean deny`
	case "require_approval":
		want = `an approval request: an object {"reason": ..., "message": ...} of strings`
	}
	return fmt.Errorf("operator rule %s%s yielded %s, which is not %s: the decision fails closed",
		strings.TrimPrefix(path.String(), "data."), s.ruleWhere(pkg, rule), v, want)
}

func denialText(s *snapshot, tool string, vm *policyVerdict) (string, []string) {
	if vm.rule == "filter_error" {
		reasons, _ := s.verdictReasons(tool, vm, nil)
		return failClosedMessage(tool), reasons
	}
	msgs, reasons := denialTextOf(s, vm.denials, "denied by")
	if len(msgs) == 0 {
		return deniedMessage(tool), reasons
	}
	out := msgs[0]
	for _, m := range msgs[1:] {
		out += " " + m
	}
	return out, reasons
}

// denialTextOf reads the gate's denial objects: their model-facing
// messages and the operator reasons ("VERB policycheck.rules.PKG (FILE):
// REASON").
func denialTextOf(s *snapshot, ds []ruleAnswer, verb string) (msgs, reasons []string) {
	for _, dm := range ds {
		reasons = append(reasons, fmt.Sprintf("%s policycheck.rules.%s%s: %s", verb, dm.pkg, s.ruleWhere(dm.pkg, "deny"), dm.reason))
		if dm.message != "" {
			msgs = appendUnique(msgs, dm.message)
		}
	}
	return msgs, reasons
}

// intersectSorted returns the elements of a that are in b (both sorted).
func intersectSorted(a, b []string) []string {
	var out []string
	for _, x := range a {
		if contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// unionSorted returns the sorted union of a and b (both sorted).
func unionSorted(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// verdictReasons are the operator-facing reasons of a verdict and what
// of the operator's removed the tool: the reason the policy gave, then
// each filter that dropped it (the engine's record of their results) and
// each rule that hid it, named with its package and file.
func (s *snapshot) verdictReasons(tool string, vm *policyVerdict, dispatch *filterResult) (out []string, by []Decider) {
	switch {
	case vm.reason != "":
		out = append(out, vm.reason)
	case len(vm.by) == 0:
		out = append(out, fmt.Sprintf("%q: %s by rule %q of %s, which gives no reason", tool, vm.verdict, vm.rule, decisionQuery))
	}
	for _, m := range vm.by {
		switch {
		case m.rule == "prepare_tools" && dispatch != nil:
			for _, id := range dispatch.droppedBy[tool] {
				dc := Decider{Kind: "filter", Name: filterRoot + "." + id + ".prepare_tools"}
				if f := s.filters[id]; f != nil {
					dc.Location = f.at
				}
				out = append(out, fmt.Sprintf("dropped by filter %s.%s (%s): a filtered tool is unknown", filterRoot, id, dc.Location))
				by = append(by, dc)
			}
		case m.rule == "hide":
			dc := Decider{Kind: "hide", Name: "policycheck.rules." + m.pkg + ".hide", Location: s.ruleFile(m.pkg, "hide")}
			out = append(out, fmt.Sprintf("hidden by an operator rule, %s (%s), for this request", dc.Name, dc.Location))
			by = append(by, dc)
		}
	}
	return out, by
}

// Decider is what of the operator's gave a call its verdict: a rule
// (Kind "deny", "require_approval" or "hide", Name its package and rule),
// a capability filter (Kind "filter", Name its prepare_tools), the
// registry's schema of the tool (Kind "schema") or an approver's answer
// (Kind "approval").
type Decider struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Location is FILE:ROW:COL of the rule's first definition ("" for a
	// schema, an approval, the registry's requires_approval, or a rule
	// whose place is not known).
	Location string `json:"location,omitempty"`
}

// answerers are the rules packages whose answers ds are (rule deny or
// require_approval), each once, in order.
func (s *snapshot) answerers(ds []ruleAnswer, rule string) []Decider {
	var out []Decider
	for _, a := range ds {
		dc := Decider{Kind: rule, Name: "policycheck.rules." + a.pkg + "." + rule, Location: s.ruleFile(a.pkg, rule)}
		if a.pkg == "" && rule == "require_approval" {
			// The registry's request (gate.registry_approvals): the
			// operator wrote requires_approval, not a rule.
			dc = Decider{Kind: "registry", Name: "requires_approval in the registry"}
		}
		if !slices.Contains(out, dc) {
			out = append(out, dc)
		}
	}
	return out
}

// DecidedByOperator returns what of the operator's gave the call its verdict: the
// rules, filters, schema or approval (none for a verdict of the gate
// alone or of a failed-closed decision). Explanations read it; it is not
// part of eval's JSON.
func (c *CallVerdict) DecidedByOperator() []Decider { return c.deciders }

// ruleFile is "file:row:col" of the first definition of rule in package
// policycheck.rules.<pkg>, or "" when the policy set has none.
func (s *snapshot) ruleFile(pkg, rule string) string {
	path := ast.Ref{ast.DefaultRootDocument, ast.StringTerm("policycheck"), ast.StringTerm("rules"), ast.StringTerm(pkg), ast.StringTerm(rule)}
	if loc := s.rules[path.String()]; loc != nil {
		return fmt.Sprintf("%s:%d:%d", loc.File, loc.Row, loc.Col)
	}
	return ""
}

// ruleWhere is " (FILE:ROW:COL)" of ruleFile, or "" when it has none.
func (s *snapshot) ruleWhere(pkg, rule string) string {
	if loc := s.ruleFile(pkg, rule); loc != "" {
		return " (" + loc + ")"
	}
	return ""
}

// plainDecision is a Decision without its MarshalJSON, for encoding/json.
type plainDecision Decision

// stepJSON is the JSON of a Run's decision: the decision's members, then
// "step" and "retries".
type stepJSON struct {
	*plainDecision
	Step    int     `json:"step"`
	Retries []Retry `json:"retries"`
}

// MarshalJSON writes the decision exactly as docs/decision.md describes,
// as every JSON output of policycheck writes strings: <, > and & as
// themselves (internal/ground/jsonout); a Run's decision is followed by "step"
// and "retries".
func (d *Decision) MarshalJSON() ([]byte, error) {
	if d == nil || !d.run {
		return jsonout.Marshal((*plainDecision)(d))
	}
	retries := d.Retries
	if retries == nil {
		retries = []Retry{}
	}
	return jsonout.Marshal(stepJSON{(*plainDecision)(d), d.Step, retries})
}
