package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/internal/contract"
)

// policyResult is the policy's decision document, decoded once from the
// AST the decision query returns (decodeResult) into Go types, and kept
// as is in the decision memo (with its name lists packed, see memo.go).
// Nothing reads the policy's answer but through it: a key of the wrong
// type is a decode error, which fails the decision closed, never a value
// read as empty.
type policyResult struct {
	available, advertised []string
	// hidden and wouldHide are empty when the policy gives none.
	hidden, wouldHide []string
	// dispatchAvailable, verdicts: what the policy says of the
	// dispatched response. Without one (a decision on a history ending
	// in a request) they are not read, so a decode error of theirs is
	// kept (dispatchErr) and reported only when they are.
	dispatchAvailable []string
	verdicts          []policyVerdict
	dispatchErr       error
	// ruleErrors are the operator rule values the gate flagged.
	ruleErrors []flaggedValue
}

// policyVerdict is one verdict object of the policy's decision.
type policyVerdict struct {
	verdict, rule, reason string
	// capability is form.capability of a not_available_yet verdict.
	capability string
	// by: what removed the called tool (unknown_tool).
	by []removedBy
	// denials (denied), requests (approval_required), wouldDeny (an
	// execute the log-only rules would deny).
	denials, requests, wouldDeny []ruleAnswer
}

// removedBy is one entry of a verdict's by: rule "prepare_tools" or
// "hide", with the hiding rules package.
type removedBy struct{ rule, pkg string }

// ruleAnswer is a denial or an approval request of a rules package; one
// carrying a flagged value is the gate's report of a refused shape.
type ruleAnswer struct {
	pkg, reason, message string
	flagged              *flaggedValue
}

// flaggedValue is a rule value of a refused shape the gate found at run
// time: the engine fails the decision closed naming the rule.
type flaggedValue struct {
	pkg, rule string
	value     any // its JSON form, for the message
}

// resultKeys are the terms of the keys of contract.Result, the policy's
// decision document as the operator contract defines it.
var resultKeys = func() map[string]*ast.Term {
	m := map[string]*ast.Term{}
	for _, p := range contract.ResultPaths() {
		m[p.Key] = keyTerm(p.Key)
	}
	return m
}()

// resultKey is the term of key k of the policy's decision document.
// decodeResult reads every key through it, so that it reads no key that
// contract.Result lacks: such a read panics in every test that decides
// (TestDecodeResultReadsTheContract reads every key).
func resultKey(k string) *ast.Term {
	t, ok := resultKeys[k]
	if !ok {
		panic("engine: decodeResult reads " + k + ", which contract.Result does not define")
	}
	return t
}

// decodeResult decodes the policy's decision object. names are the
// candidate names (registry and framework tools, capability ids;
// sorted), against which sets of names are read (see setNames).
func decodeResult(t *ast.Term, names []*ast.Term) (*policyResult, error) {
	obj, ok := t.Value.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("policy decision is not an object")
	}
	r := &policyResult{}
	dec := resultDecoder{candidates: names}
	// A rule value the gate flagged fails the decision closed naming the
	// rule, whatever else the document holds (the same value may be in
	// hidden, not a set of names).
	var err error
	if r.ruleErrors, err = decodeFlagged(obj.Get(resultKey("rule_errors"))); err != nil || len(r.ruleErrors) > 0 {
		return r, err
	}
	if r.available, err = dec.names(obj, "available", true); err != nil {
		return nil, err
	}
	if r.advertised, err = dec.names(obj, "advertised", true); err != nil {
		return nil, err
	}
	if r.hidden, err = dec.names(obj, "hidden", false); err != nil {
		return nil, err
	}
	if r.wouldHide, err = dec.names(obj, "would_hide", false); err != nil {
		return nil, err
	}
	r.dispatchAvailable, r.dispatchErr = dec.names(obj, "dispatch_available", true)
	if r.dispatchErr == nil {
		r.verdicts, r.dispatchErr = decodeVerdicts(obj.Get(resultKey("verdicts")))
	}
	return r, nil
}

// resultDecoder reads sets of names, each distinct set once: the policy
// often returns one set under several keys (advertised is available when
// cleaning removed nothing).
type resultDecoder struct {
	candidates []*ast.Term
	seen       []struct {
		set   ast.Set
		names []string
	}
}

// names reads key of obj, a set (or array) of strings, sorted; a missing
// key is an error when required, else no names.
func (dec *resultDecoder) names(obj ast.Object, key string, required bool) ([]string, error) {
	v := obj.Get(resultKey(key))
	if v == nil {
		if required {
			return nil, fmt.Errorf("policy decision: %s must be a set of tool names", key)
		}
		return []string{}, nil
	}
	switch x := v.Value.(type) {
	case ast.Set:
		for _, s := range dec.seen {
			if s.set == x {
				return s.names, nil
			}
		}
		if list, ok := setNames(x, dec.candidates); ok {
			dec.seen = append(dec.seen, struct {
				set   ast.Set
				names []string
			}{x, list})
			return list, nil
		}
		return nil, fmt.Errorf("policy decision: %s holds a non-string %v", key, firstNonString(x.Slice()))
	case *ast.Array:
		out := make([]string, 0, x.Len())
		for i := range x.Len() {
			s, ok := x.Elem(i).Value.(ast.String)
			if !ok {
				return nil, fmt.Errorf("policy decision: %s holds a non-string %v", key, x.Elem(i))
			}
			out = append(out, string(s))
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	return nil, fmt.Errorf("policy decision: %s must be a set of tool names", key)
}

func firstNonString(ts []*ast.Term) *ast.Term {
	for _, t := range ts {
		if _, ok := t.Value.(ast.String); !ok {
			return t
		}
	}
	return nil
}

// elems are the elements of an array, or of a set in OPA's order; ok is
// false for anything else.
func elems(t *ast.Term) ([]*ast.Term, bool) {
	switch x := t.Value.(type) {
	case *ast.Array:
		out := make([]*ast.Term, x.Len())
		for i := range out {
			out[i] = x.Elem(i)
		}
		return out, true
	case ast.Set:
		return x.Slice(), true
	}
	return nil, false
}

// str reads key of obj: "" when missing, an error when not a string.
func str(obj ast.Object, key string) (string, error) {
	v := obj.Get(resultKey(key))
	if v == nil {
		return "", nil
	}
	s, ok := v.Value.(ast.String)
	if !ok {
		return "", fmt.Errorf("%s must be a string, not %v", key, v)
	}
	return string(s), nil
}

// decodeVerdicts reads the verdicts; an error names the verdict (the
// message is only built then: a decision's calls are decoded on its
// path).
func decodeVerdicts(t *ast.Term) ([]policyVerdict, error) {
	if t == nil {
		return nil, nil
	}
	list, ok := elems(t)
	if !ok {
		return nil, fmt.Errorf("policy decision: verdicts must be an array of verdict objects")
	}
	out := make([]policyVerdict, len(list))
	for i, x := range list {
		if err := decodeVerdictAt(x, i, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// decodeVerdictAt decodes verdict i, t (nil: not an object), into v.
func decodeVerdictAt(t *ast.Term, i int, v *policyVerdict) error {
	var obj ast.Object
	if t != nil {
		obj, _ = t.Value.(ast.Object)
	}
	if obj == nil {
		return fmt.Errorf("policy decision: verdict %d is not an object", i)
	}
	if err := decodeVerdict(obj, v); err != nil {
		return fmt.Errorf("policy decision: verdict %d: %w", i, err)
	}
	return nil
}

func decodeVerdict(obj ast.Object, v *policyVerdict) error {
	var err error
	for _, f := range []struct {
		key string
		dst *string
	}{{"verdict", &v.verdict}, {"rule", &v.rule}, {"reason", &v.reason}} {
		if *f.dst, err = str(obj, f.key); err != nil {
			return err
		}
	}
	if form := obj.Get(resultKey("form")); form != nil {
		fo, ok := form.Value.(ast.Object)
		if !ok {
			return errors.New("form must be an object")
		}
		if v.capability, err = str(fo, "capability"); err != nil {
			return fmt.Errorf("form: %w", err)
		}
	}
	if by := obj.Get(resultKey("by")); by != nil {
		list, err := objects(by)
		if err != nil {
			return fmt.Errorf("by %w", err)
		}
		for j, eo := range list {
			var rb removedBy
			if rb.rule, err = str(eo, "rule"); err == nil {
				rb.pkg, err = str(eo, "package")
			}
			if err != nil {
				return fmt.Errorf("by %d: %w", j, err)
			}
			v.by = append(v.by, rb)
		}
	}
	for _, f := range []struct {
		key string
		dst *[]ruleAnswer
	}{{"denials", &v.denials}, {"requests", &v.requests}, {"would_deny", &v.wouldDeny}} {
		if *f.dst, err = decodeAnswers(obj.Get(resultKey(f.key))); err != nil {
			return fmt.Errorf("%s: %w", f.key, err)
		}
	}
	return nil
}

// objects reads t, an array or a set whose every element is an object
// (nil t: none), for the lists a verdict and the rule errors hold.
func objects(t *ast.Term) ([]ast.Object, error) {
	if t == nil {
		return nil, nil
	}
	list, ok := elems(t)
	if !ok {
		return nil, errors.New("must be an array")
	}
	out := make([]ast.Object, len(list))
	for i, e := range list {
		o, ok := e.Value.(ast.Object)
		if !ok {
			return nil, fmt.Errorf("holds %v, not an object", e)
		}
		out[i] = o
	}
	return out, nil
}

// decodeAnswers reads a list of denials or approval requests.
func decodeAnswers(t *ast.Term) ([]ruleAnswer, error) {
	list, err := objects(t)
	if err != nil {
		return nil, err
	}
	out := make([]ruleAnswer, 0, len(list))
	for _, eo := range list {
		var a ruleAnswer
		if a.pkg, err = str(eo, "package"); err != nil {
			return nil, err
		}
		if v := eo.Get(resultKey("value")); v != nil {
			if a.flagged, err = flagged(eo, v); err != nil {
				return nil, err
			}
		} else {
			if a.reason, err = str(eo, "reason"); err != nil {
				return nil, err
			}
			if a.message, err = str(eo, "message"); err != nil {
				return nil, err
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// decodeFlagged reads the gate's rule_errors.
func decodeFlagged(t *ast.Term) ([]flaggedValue, error) {
	list, err := objects(t)
	if err != nil {
		return nil, fmt.Errorf("policy decision: rule_errors %w", err)
	}
	out := make([]flaggedValue, 0, len(list))
	for _, eo := range list {
		f, err := flagged(eo, eo.Get(resultKey("value")))
		if err != nil {
			return nil, fmt.Errorf("policy decision: rule_errors: %w", err)
		}
		out = append(out, *f)
	}
	return out, nil
}

// flagged reads one flagged rule value: its package, rule and value.
func flagged(obj ast.Object, value *ast.Term) (*flaggedValue, error) {
	f := &flaggedValue{}
	var err error
	if f.pkg, err = str(obj, "package"); err != nil {
		return nil, err
	}
	if f.rule, err = str(obj, "rule"); err != nil {
		return nil, err
	}
	if value != nil {
		if f.value, err = ast.JSON(value.Value); err != nil {
			return nil, err
		}
	}
	return f, nil
}
