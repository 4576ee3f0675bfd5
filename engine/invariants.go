package engine

import (
	"fmt"

	"github.com/policycheck/policycheck/facts"
)

// An invariant is a property of the policy's answer (contract.Result)
// that the engine holds whatever the policy says. The shipped gate never
// breaks one; a replacement availability policy (WithoutDefaults) may,
// and the engine then repairs the answer toward refusal (a tool withheld,
// a call denied as failed closed) or fails the decision closed. Every
// check the engine makes of the policy's answer, beyond decoding it, is
// in invariants, and each has its own test with a hostile policy
// (TestInvariants).
type invariant struct {
	name        string
	description string
	// stage says when the invariant is checked; verdict, for a call
	// stage, the policy's verdict it judges ("" for every one).
	stage   invariantStage
	verdict string
	// check holds the invariant over a. It returns replaced when it
	// replaced the call's verdict (beforeVerdict), and an error when the
	// decision fails closed. (a is passed by value: a decision allocates
	// nothing for its checks.)
	check func(a answer) (replaced bool, err error)
}

// invariantStage is when an invariant is checked.
type invariantStage int

const (
	// onAnswer: once, over the whole answer, before the calls.
	onAnswer invariantStage = iota
	// beforeVerdict: for each call, before its verdict is read; a
	// violation replaces the verdict, and nothing else is checked of the
	// call.
	beforeVerdict
	// afterVerdict: for each call, after its verdict and texts are read.
	afterVerdict
)

// answer is the policy's answer being held to the invariants: the
// outcome being filled from it, what was prepared, and for a call stage,
// the call.
type answer struct {
	s      *snapshot
	o      *outcome
	p      *prepared
	res    *policyResult
	hidden map[string]bool
	// The call: its index, the policy's verdict and the decision's.
	i  int
	vm *policyVerdict
	c  *CallVerdict
}

// deny replaces the call's verdict with a denial made because the
// policy's answer broke an invariant: the fault is the policy's.
func (a answer) deny(reason string) {
	a.c.Verdict = Denied
	a.c.Message = failClosedMessage(a.c.Tool)
	a.c.FailClosed = true
	a.c.Reasons = []string{reason}
}

// invariants are checked in this order within each stage.
var invariants = []invariant{
	{
		name:        "advertised_within_available",
		description: "a tool is advertised only if it is available: any other the policy advertises is withheld, and the decision says so",
		stage:       onAnswer,
		check: func(a answer) (bool, error) {
			o := a.o
			// Both are sorted: one merge walk.
			if subsetSorted(o.advertised, o.available) {
				return false, nil
			}
			adv := make([]string, 0, len(o.advertised))
			for _, n := range o.advertised {
				if contains(o.available, n) {
					adv = append(adv, n)
				} else {
					o.errors = appendUnique(o.errors, fmt.Sprintf("policy advertised %q without making it available; withheld", n))
				}
			}
			o.advertised = adv
			return false, nil
		},
	},
	{
		name:        "would_hide_within_available",
		description: "would_hide names only tools available on the next request or at dispatch: a log-only rule reports what it would hide of what the model could use",
		stage:       onAnswer,
		check: func(a answer) (bool, error) {
			o := a.o
			o.wouldHide = intersectSorted(a.res.wouldHide, o.available)
			if o.dispatch && a.res.dispatchErr == nil {
				if more := intersectSorted(a.res.wouldHide, o.dispatchAvailable); len(more) > 0 {
					o.wouldHide = unionSorted(o.wouldHide, more)
				}
			}
			return false, nil
		},
	},
	{
		name:        "one_verdict_per_call",
		description: "the policy gives one verdict per call of the dispatched response, else the decision fails closed",
		stage:       onAnswer,
		check: func(a answer) (bool, error) {
			if !a.o.dispatch || a.res.dispatchErr != nil || len(a.res.verdicts) == len(a.o.calls) {
				return false, nil
			}
			return false, fmt.Errorf("policy decision: verdicts must hold one verdict per call (%d calls)", len(a.o.calls))
		},
	},
	{
		name:        "known_verdict",
		description: "a verdict is one the engine knows, else the decision fails closed",
		stage:       beforeVerdict,
		check: func(a answer) (bool, error) {
			switch a.c.Verdict {
			case Execute, NotAvailableYet, UnknownTool, Denied, ApprovalRequired, InvalidArgs:
				return false, nil
			}
			return false, fmt.Errorf("policy decision: verdict %d is %q, not one of execute, not_available_yet, unknown_tool, denied, approval_required, invalid_args", a.i, a.c.Verdict)
		},
	},
	{
		name:        "registry_membership",
		description: "a call executes only if its tool is in the resolved tool set (a registry tool no filter dropped and no rule hid, or a framework tool present), else it is denied and the decision says so",
		stage:       beforeVerdict,
		verdict:     Execute,
		check: func(a answer) (bool, error) {
			if why := a.s.unresolved(a.c.Tool, a.p.dispatch, a.hidden); why != "" {
				a.deny(fmt.Sprintf("policy said execute for %q, which %s; denied", a.c.Tool, why))
				a.o.errors = appendUnique(a.o.errors, a.c.Reasons[0])
				return true, nil
			}
			return false, nil
		},
	},
	{
		name:        "approval_denied_bound",
		description: "a call is denied by an approver (rule approval_denied) only if a denial is bound to it, else it is denied as failed closed",
		stage:       beforeVerdict,
		verdict:     Denied,
		check: func(a answer) (bool, error) {
			if a.vm.rule != ruleApprovalDenied {
				return false, nil
			}
			if b := at(a.p.binds, a.i); b != nil && b.bound && b.approval.Kind == facts.ToolDenied {
				return false, nil
			}
			a.deny("policy said approval_denied for a call no denial is bound to; denied")
			return true, nil
		},
	},
	{
		name:        "flagged_rule_values",
		description: "an operator rule value of a refused shape the gate flagged (a denial, an approval request or a log-only denial carrying a value) fails the decision closed naming the rule",
		stage:       afterVerdict,
		check: func(a answer) (bool, error) {
			var as []ruleAnswer
			switch {
			case a.vm.verdict == Denied && a.vm.rule != ruleApprovalDenied:
				as = a.vm.denials
			case a.vm.verdict == ApprovalRequired:
				as = a.vm.requests
			case a.vm.verdict == Execute:
				as = a.vm.wouldDeny
			}
			if f := firstFlagged(as); f != nil {
				return false, a.s.ruleError(f)
			}
			return false, nil
		},
	},
	{
		name:        "gate_before_approval",
		description: "a call is handed to an approver only if its tool is in the resolved tool set and the policy's own dispatch availability, else it is denied: an approval never widens availability",
		stage:       afterVerdict,
		verdict:     ApprovalRequired,
		check: func(a answer) (bool, error) {
			if why := a.s.unresolved(a.c.Tool, a.p.dispatch, a.hidden); why != "" || !contains(a.o.dispatchAvailable, a.c.Tool) {
				a.deny(fmt.Sprintf("policy said approval_required for %q, which its own dispatch availability excludes; denied", a.c.Tool))
			}
			return false, nil
		},
	},
	{
		name:        "execute_within_dispatch_available",
		description: "a call executes only if its tool is in the policy's own dispatch availability: the gate and the verdict cannot disagree",
		stage:       afterVerdict,
		verdict:     Execute,
		check: func(a answer) (bool, error) {
			if !contains(a.o.dispatchAvailable, a.c.Tool) {
				a.deny(fmt.Sprintf("policy said execute for %q, which its own dispatch availability excludes; denied", a.c.Tool))
				a.c.WouldDeny = nil
			}
			return false, nil
		},
	},
	{
		name:        "invalid_args_validated",
		description: "a call gets invalid_args only if the engine found its arguments fail its tool's schema, else it is denied as failed closed",
		stage:       afterVerdict,
		verdict:     InvalidArgs,
		check: func(a answer) (bool, error) {
			if at(a.p.invalid, a.i) == nil {
				a.deny(fmt.Sprintf("policy said invalid_args for %q, whose arguments validate; denied", a.c.Tool))
			}
			return false, nil
		},
	},
	{
		name: "args_schema_before_rules",
		description: "a call whose arguments fail its tool's schema gets invalid_args whatever the policy said after the gate " +
			"(only unknown_tool, not_available_yet or a fail-closed denial come before it, spec X2)",
		stage: afterVerdict,
		check: func(a answer) (bool, error) {
			a.checkArgs()
			return false, nil
		},
	},
}

// checkInvariants checks the invariants of stage that judge the answer
// (onAnswer) or its call a.i, in order, until one replaces the call's
// verdict or fails the decision.
func checkInvariants(a answer, stage invariantStage) (replaced bool, err error) {
	for i := range invariants {
		inv := &invariants[i]
		if inv.stage != stage || (inv.verdict != "" && (a.vm == nil || inv.verdict != a.vm.verdict)) {
			continue
		}
		if replaced, err := inv.check(a); replaced || err != nil {
			return replaced, err
		}
	}
	return false, nil
}
