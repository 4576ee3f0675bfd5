package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/trust"
)

// ApprovalRequired is the verdict of a call that would otherwise execute
// and that some policycheck.rules.*.require_approval element asks a
// person to approve first.
const ApprovalRequired = "approval_required"

// Rule names of verdicts decided by an approval.
const (
	ruleRequireApproval = "require_approval"
	ruleApprovalDenied  = "approval_denied"
)

// registryApprovalPrefix begins the reason of an approval the registry
// asks for (requires_approval on the tool or its capability).
const registryApprovalPrefix = "approval required by the registry: "

// defaultApprovalMessage is the text for the approver when no
// require_approval element gives one.
const defaultApprovalMessage = "This call needs a person's approval before it runs."

// ApprovalOutcome records one approval the request carried
// (trust.ApprovalOutcome, which a receipt's claims carry too).
type ApprovalOutcome = trust.ApprovalOutcome

// binding is the approval bound to one dispatched call, if any.
type binding struct {
	id       string
	approval facts.Approval
	// digest is the call's digest (trust.CallDigest).
	digest string
	bound  bool
	why    string // why an approval keyed by the call's id is not bound
}

// bindApprovals pairs the approvals with the dispatched calls: one entry
// per call (nil when no approval is keyed by its tool_call_id). An
// approval authorises at most one call occurrence, so it binds only when
// its tool_call_id names exactly one call of the response, no outcome of
// a call with that id is in the history yet (once the history holds the
// approved call's tool-return or retry-prompt, the approval is used), and
// the call's digest, over its tool_call_id, tool and arguments, is the one
// the approval carries.
func bindApprovals(f *facts.Facts, approvals facts.Approvals) []*binding {
	if len(approvals) == 0 || f.Dispatch == nil {
		return nil
	}
	calls := f.Dispatch.Calls
	sharing := map[string][]int{} // the calls of each approved id
	for i, c := range calls {
		if c.ToolCallID == nil {
			continue
		}
		if _, ok := approvals[*c.ToolCallID]; ok {
			sharing[*c.ToolCallID] = append(sharing[*c.ToolCallID], i)
		}
	}
	out := make([]*binding, len(calls))
	for i, c := range calls {
		if c.ToolCallID == nil {
			continue
		}
		a, ok := approvals[*c.ToolCallID]
		if !ok {
			continue
		}
		b := &binding{id: *c.ToolCallID, approval: a, digest: trust.CallDigest(c.ToolCallID, c.Tool, c.Args)}
		switch same := sharing[b.id]; {
		case a.Refused != "":
			b.why = "not applied: " + a.Refused
		case len(same) > 1:
			b.why = fmt.Sprintf("not applied: duplicate tool_call_id %q: calls %s of the dispatched response share it, "+
				"and an approval authorises at most one call, so it applies to none of them", b.id, joinInts(same))
		case c.Answered != nil:
			b.why = fmt.Sprintf("not applied: already used: the history holds the outcome of a call with tool_call_id %q "+
				"(message %d, part %d), and an approval authorises one call occurrence; call %d (%s) repeats that id",
				b.id, c.Answered.Message, c.Answered.Part, i, c.Tool)
		case b.digest == a.Digest:
			b.bound = true
		default:
			b.why = fmt.Sprintf("not applied: call %d (%s, tool_call_id %q) has digest %s, the approval was given for %s: "+
				"its tool_call_id, tool or arguments are not what the approver was shown", i, c.Tool, b.id, b.digest, a.Digest)
		}
		out[i] = b
	}
	return out
}

// joinInts writes call indexes as "0, 1 and 3".
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// approvalTerm is the bound approval as policies read it at
// input.call.approval, and the arguments the call would execute with
// (override, read by readCalls, when the approval carries override_args).
func approvalTerm(a facts.Approval, callArgs, override *ast.Term) (*ast.Term, *ast.Term) {
	approvers := make([]*ast.Term, len(a.Approvers))
	for i, n := range a.Approvers {
		approvers[i] = ast.StringTerm(n)
	}
	obj := ast.NewObject(
		item("kind", ast.StringTerm(a.Kind)),
		item("digest", ast.StringTerm(a.Digest)),
		item("approvers", ast.ArrayTerm(approvers...)),
		item("call_args", callArgs),
	)
	args := callArgs
	if a.OverrideArgs != nil {
		args = override
		obj.Insert(ast.StringTerm("override_args"), args)
	}
	if a.Kind == facts.ToolDenied {
		obj.Insert(ast.StringTerm("message"), ast.StringTerm(denialMessage(a)))
	}
	return ast.NewTerm(obj), args
}

func denialMessage(a facts.Approval) string {
	if a.Message == "" {
		return facts.DefaultDenialMessage
	}
	return a.Message
}

func approversText(a facts.Approval) string {
	if len(a.Approvers) == 0 {
		return "an unnamed approver"
	}
	return strings.Join(a.Approvers, ", ")
}

// approvalRequiredText is the approver-facing message and the
// operator-facing reasons of an approval_required verdict.
func approvalRequiredText(s *snapshot, tool string, vm *policyVerdict) (string, []string) {
	var msgs, reasons []string
	for _, rm := range vm.requests {
		pkg, reason, msg := rm.pkg, rm.reason, rm.message
		if pkg == "" {
			// The registry's request (gate.registry_approvals).
			if why := s.reg.ApprovalWhy(tool); why != "" {
				reason = why
			}
			reasons = append(reasons, registryApprovalPrefix+reason)
			if msg != "" {
				msgs = appendUnique(msgs, msg)
			}
			continue
		}
		reasons = append(reasons, fmt.Sprintf("approval required by policycheck.rules.%s%s: %s", pkg, s.ruleWhere(pkg, "require_approval"), reason))
		if msg != "" {
			msgs = appendUnique(msgs, msg)
		}
	}
	if len(msgs) == 0 {
		return defaultApprovalMessage, reasons
	}
	return strings.Join(msgs, " "), reasons
}

// finishApprovals records, once the verdicts are final, what became of
// each approval the request carried, on its calls (verdicts) and in the
// list it returns (Decision.Approvals), and hands out what the approver
// and the harness need: on approval_required the call's arguments and
// digest, on an execute an approval applied to the arguments to execute.
func finishApprovals(p *prepared, verdicts []CallVerdict) []ApprovalOutcome {
	f, approvals := p.facts, p.approvals
	var calls []facts.Call
	if f.Dispatch != nil {
		calls = f.Dispatch.Calls
	}
	for i := range verdicts {
		c := &verdicts[i]
		b := at(p.binds, i)
		switch {
		case c.Verdict == ApprovalRequired:
			c.Args = normalizeArgs(calls[i].Args)
			c.Digest = trust.CallDigest(c.ToolCallID, c.Tool, calls[i].Args)
			if c.Args == nil {
				c.Args = map[string]any{}
			}
		case c.Verdict == Denied && c.Rule == "deny" && !c.FailClosed:
			// A rule may deny a call unless it is approved (it reads
			// input.call.approval): the harness that asks a person then
			// needs the digest to bind the answer, as for
			// approval_required.
			c.Digest = trust.CallDigest(c.ToolCallID, c.Tool, calls[i].Args)
		}
		if b == nil {
			continue
		}
		a := b.approval
		o := outcomeOf(b.id, a, b.why)
		if b.bound {
			switch {
			case c.FailClosed:
				o.Why = "not applied: the decision failed closed"
			case a.Kind == facts.ToolApproved && c.Verdict == Execute:
				o.Applied = true
				o.Why = "applied: approved by " + approversText(a) + "; the call executes"
				c.Args = normalizeArgs(calls[i].Args)
				if a.OverrideArgs != nil {
					o.Why += " with the approver's override_args"
					c.Args = normalizeArgs(a.OverrideArgs)
				}
			case a.Kind == facts.ToolDenied && c.Rule == ruleApprovalDenied:
				o.Applied = true
				o.Why = "applied: denied by " + approversText(a)
			case c.Verdict == NotAvailableYet || c.Verdict == UnknownTool:
				o.Why = fmt.Sprintf("not applied: the availability gate refuses the call (%s); an approval never widens availability", c.Verdict)
			case c.Verdict == Denied:
				o.Why = "not applied: operator deny rules refuse the call with the arguments it would execute with"
			case c.Verdict == ApprovalRequired:
				o.Why = "not applied: require_approval rules still ask for approval with this approval present: " + strings.Join(c.Reasons, "; ")
			default:
				o.Why = "not applied: the policy's verdict is " + c.Verdict
			}
		}
		c.Approval = o
		c.Reasons = append(c.Reasons, fmt.Sprintf("approval for tool_call_id %q (%s by %s): %s", b.id, a.Kind, approversText(a), o.Why))
	}
	if len(approvals) == 0 {
		return nil
	}
	var out []ApprovalOutcome
	for _, id := range slices.Sorted(maps.Keys(approvals)) {
		a := approvals[id]
		var o *ApprovalOutcome
		for _, c := range verdicts {
			if c.Approval != nil && c.Approval.ToolCallID == id && (o == nil || c.Approval.Applied && !o.Applied) {
				o = c.Approval
			}
		}
		if o == nil {
			why := fmt.Sprintf("not applied: no call of the dispatched response has tool_call_id %q", id)
			if f.Dispatch == nil {
				why = "not applied: the history does not end with a response, so there is no call to approve"
			}
			o = outcomeOf(id, a, why)
		}
		out = append(out, *o)
	}
	return out
}

// outcomeOf is the outcome of approval a for tool_call_id id, why as said.
func outcomeOf(id string, a facts.Approval, why string) *ApprovalOutcome {
	approvers := a.Approvers
	if approvers == nil {
		approvers = []string{}
	}
	return &ApprovalOutcome{ToolCallID: id, Kind: a.Kind, Approvers: approvers, Digest: a.Digest, Override: a.OverrideArgs != nil, Why: why}
}

// normalizeArgs returns a call's raw args as the policies see them (JSON
// values, numbers as json.Number): an object stays an object; a string
// that holds a JSON object is that object (the reference parses string
// args before validating them); anything else is passed as it is, and
// args that are absent, null or not readable exactly one way
// (facts.ReadArgs) are nil.
func normalizeArgs(raw []byte) any { return facts.ArgsValue(raw) }
