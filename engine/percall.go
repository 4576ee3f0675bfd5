package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// rulePolicyError is the rule of a call denied because evaluating the
// rules about it raised an error (perCall).
const rulePolicyError = "policy_error"

// perCall re-evaluates a decision whose combined evaluation raised an
// error, one part at a time, so that an error in the rules about one
// call (a deny rule's built-in given an argument of the wrong type: the
// model's to choose) fails that call closed instead of the whole
// decision. It exists only when the shipped gate judges the calls (the
// policy set's decision_from_sets and verdicts are the shipped ones):
// then the verdicts are gate.verdict of each call over the one input,
// and evaluating them one by one gives the verdicts the combined
// evaluation gives wherever it does not err. Without it a policy error
// fails the whole decision closed, as it always did.
//
// The fast path is unchanged: a decision is evaluated once, and only an
// error (not a cancellation) takes this path.
type perCall struct {
	// rest is the decision without its verdicts: availability,
	// advertisement, dispatch availability, hidden, would_hide and the
	// rule errors. An error there fails the whole decision closed.
	rest rego.PreparedEvalQuery
	// The per-call verdict queries, one per call index, prepared on
	// first use; at most maxCachedCallQueries are kept (a response with
	// more calls prepares the rest per use).
	compiler *ast.Compiler
	store    storage.Store
	mu       sync.Mutex
	verdict  map[int]rego.PreparedEvalQuery
}

// errForcedPerCall stands for the combined evaluation's error when a test
// asks for the per-call evaluation (decideConfig.perCall).
var errForcedPerCall = errors.New("the per-call evaluation was asked for")

// maxCachedCallQueries bounds perCall.verdict.
const maxCachedCallQueries = 64

// restQuery is the shipped decision_from_sets (policies/availability)
// with verdicts left out; TestPerCallRestMirrorsTheDecision holds it to
// the shipped rule.
const restQuery = `x := {
	"available": data.policycheck.availability.available,
	"advertised": data.policycheck.availability.advertised,
	"dispatch_available": data.policycheck.availability.dispatch_available,
	"verdicts": [],
	"hidden": data.policycheck.lib.gate.hidden,
	"would_hide": data.policycheck.lib.gate.would_hide,
	"rule_errors": data.policycheck.lib.gate.rule_errors,
}`

// preparePerCall prepares perCall when the policy set's entry point and
// verdicts are the shipped policy's, else returns nil.
func preparePerCall(ctx context.Context, c *ast.Compiler, store storage.Store, ps *policySet, query string) (*perCall, error) {
	if query != "data.policycheck.availability.decision_from_sets" {
		return nil, nil
	}
	for _, ref := range []string{query, "data.policycheck.availability.verdicts"} {
		rules := c.GetRules(ast.MustParseRef(ref))
		if len(rules) == 0 {
			return nil, nil
		}
		for _, r := range rules {
			if r.Location == nil || !ps.shipped[r.Location.File] {
				return nil, nil
			}
		}
	}
	rest, err := prepareStrict(ctx, c, store, rego.Query(restQuery))
	if err != nil {
		return nil, fmt.Errorf("engine: prepare the decision without verdicts: %w", err)
	}
	return &perCall{rest: rest, compiler: c, store: store, verdict: map[int]rego.PreparedEvalQuery{}}, nil
}

// verdictQuery is the query of the verdict of call i.
func (p *perCall) verdictQuery(ctx context.Context, i int) (rego.PreparedEvalQuery, error) {
	p.mu.Lock()
	q, ok := p.verdict[i]
	p.mu.Unlock()
	if ok {
		return q, nil
	}
	q, err := prepareStrict(ctx, p.compiler, p.store, rego.Query("x := data.policycheck.lib.gate.verdict(input.dispatch.calls["+strconv.Itoa(i)+"])"))
	if err != nil {
		return q, fmt.Errorf("engine: prepare the verdict query of call %d: %w", i, err)
	}
	if i < maxCachedCallQueries {
		p.mu.Lock()
		p.verdict[i] = q
		p.mu.Unlock()
	}
	return q, nil
}

// isCancel reports whether err is the evaluation's deadline or
// cancellation, which fails the whole decision closed.
func isCancel(ctx context.Context, err error) bool {
	return ctx.Err() != nil || topdown.IsCancel(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// evalPerCall answers a decision whose combined evaluation failed with
// combined: the decision without verdicts, then each call's verdict on
// its own, a call whose verdict errs denied with rulePolicyError. It
// returns why the decision fails closed instead when the error cannot be
// confined to calls: a cancellation, no per-call queries, or an error
// outside the verdicts (with no calls, the decision without verdicts is
// the whole decision: its error is the combined one).
func (s *snapshot) evalPerCall(ctx context.Context, p *prepared, combined error) (*policyResult, string) {
	input := p.input
	if s.perCall == nil || isCancel(ctx, combined) {
		return nil, fmt.Sprintf("policy evaluation failed: %v", combined)
	}
	rs, err := s.perCall.rest.Eval(ctx, s.evalWith(input)...)
	if err != nil {
		return nil, fmt.Sprintf("policy evaluation failed: %v", err)
	}
	res, err := decodeBinding(rs, s.names)
	if err != nil {
		return nil, err.Error()
	}
	if len(res.ruleErrors) > 0 || res.dispatchErr != nil {
		return res, "" // check fails the decision closed naming them
	}
	var n int
	if p.facts.Dispatch != nil {
		n = len(p.facts.Dispatch.Calls) // input.dispatch.calls
	}
	res.verdicts = make([]policyVerdict, n)
	for i := range n {
		q, err := s.perCall.verdictQuery(ctx, i)
		if err != nil {
			return nil, err.Error()
		}
		rs, err := q.Eval(ctx, s.evalWith(input)...)
		switch {
		case err != nil && isCancel(ctx, err):
			return nil, fmt.Sprintf("policy evaluation failed: %v", err)
		case err != nil:
			res.verdicts[i] = policyVerdict{verdict: Denied, rule: rulePolicyError, reason: s.callRuleError(err)}
			continue
		}
		var x *ast.Term
		if len(rs) > 0 {
			x, _ = rs[0].Bindings["x"].(*ast.Term)
		}
		if err := decodeVerdictAt(x, i, &res.verdicts[i]); err != nil {
			return nil, err.Error()
		}
	}
	return res, ""
}

// decodeBinding decodes the decision object bound to x.
func decodeBinding(rs rego.ResultSet, names []*ast.Term) (*policyResult, error) {
	if len(rs) == 0 {
		return nil, errors.New("policy decision is undefined")
	}
	x, _ := rs[0].Bindings["x"].(*ast.Term)
	if x == nil {
		return nil, errors.New("policy decision is undefined")
	}
	return decodeResult(x, names)
}

// callRuleError is the operator-facing reason of a call denied with
// rulePolicyError: the rule that raised err (package, rule, file:row)
// and the error.
func (s *snapshot) callRuleError(err error) string {
	where := ""
	var te *topdown.Error
	if errors.As(err, &te) && te.Location != nil {
		where = s.ruleAt(te.Location)
	}
	if where == "" {
		return fmt.Sprintf("a rule about this call could not be evaluated, so this call fails closed: %v", err)
	}
	return fmt.Sprintf("rule %s raised an error for this call, so this call fails closed: %v", where, err)
}

// ruleAt names the rule of the module at loc that holds loc: its
// package and name and the rule's file and row,
// "policycheck.rules.repos.deny (pol/repos.rego:3)".
func (s *snapshot) ruleAt(loc *ast.Location) string {
	m := s.compiler.Modules[loc.File]
	if m == nil {
		return ""
	}
	var found *ast.Rule
	for _, r := range m.Rules {
		if r.Location != nil && r.Location.Row <= loc.Row && (found == nil || r.Location.Row >= found.Location.Row) {
			found = r
		}
	}
	if found == nil {
		return ""
	}
	return fmt.Sprintf("%s.%s (%s:%d)", strings.TrimPrefix(m.Package.Path.String(), "data."), found.Head.Ref(), loc.File, found.Location.Row)
}
