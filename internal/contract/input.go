package contract

import (
	"fmt"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A field kind of an input path (docs/input.md has each path's meaning).
const (
	fieldObject = "object" // its fields are the paths below it
	fieldOpen   = "open"   // whatever the operator or the model sent: any field
	fieldArray  = "array"  // its elements are the paths below it with "[]"
	fieldLeaf   = "leaf"   // a string, number, null or set: nothing below it
	fieldMap    = "map"    // an object keyed by names: its values are the paths below it with ".*"
)

// decisionInput is every path of the input document that the decision
// and the operator rules (policycheck.rules.*) see, with its kind: the
// paths of Input (document.go), "[]" standing for each element of an
// array; input.call is one element of input.dispatch.calls.
var decisionInput = kinds(inputPaths)

// filterInput is every path of the input document a capability filter
// (policycheck.capabilities.<id>.prepare_tools) sees: the paths of
// FilterInput.
var filterInput = kinds(filterInputPaths)

// ruleInput is the input of operator rules: the decision's, with the
// call being judged as input.call.
var ruleInput = func() map[string]string {
	out := map[string]string{"call": fieldObject}
	for p, k := range decisionInput {
		out[p] = k
		if rest, ok := strings.CutPrefix(p, "dispatch.calls[]."); ok {
			out["call."+rest] = k
		}
	}
	return out
}()

// inputProblems refuses a reference from a rules or filter package to a
// field its input does not have (input.call.name for input.call.tool,
// input.contxt): such a reference is always undefined, so the rule that
// holds it never fires, and a deny meant to stop a call lets it execute.
// Fields under context and a call's args are the operator's and the
// model's: anything goes there. A reference through a variable (some c in
// input.dispatch.calls; c.tol) is not followed.
func inputProblems(m *ast.Module) []Problem {
	var paths map[string]string
	var who string
	switch {
	case m.Package.Path.HasPrefix(rootRef("policycheck.rules")) && len(m.Package.Path) == 4:
		paths, who = ruleInput, "policycheck.rules packages"
	case m.Package.Path.HasPrefix(rootRef("policycheck.capabilities")) && len(m.Package.Path) == 4:
		paths, who = filterInput, "filters (prepare_tools)"
	default:
		return nil
	}
	var out []Problem
	seen := map[string]bool{}
	for _, rule := range m.Rules {
		// hide judges the request, not a call: it never sees input.call
		// (a helper deny and hide share is not told apart).
		rulePaths, ruleWho := paths, who
		if name, ok := rule.Head.Ref()[0].Value.(ast.Var); ok && name == "hide" && paths["call"] != "" {
			rulePaths, ruleWho = decisionInput, "hide rules"
		}
		ast.WalkTerms(rule, func(t *ast.Term) bool {
			r, ok := t.Value.(ast.Ref)
			if !ok || !r[0].Equal(ast.InputRootDocument) {
				return false
			}
			if msg := inputRefProblem(r, rulePaths, ruleWho); msg != "" && !seen[msg] {
				seen[msg] = true
				loc := t.Location
				if loc == nil { // a term the compiler wrote (some x in ...)
					loc = rule.Location
				}
				out = append(out, at(CodeInputField, loc, msg))
			}
			return false
		})
	}
	return out
}

// inputRefProblem says what is wrong with input ref r against paths, or
// "" when it names a field there (or goes where no path is known).
func inputRefProblem(r ast.Ref, paths map[string]string, who string) string {
	path := ""
	for i, t := range r[1:] {
		kind := fieldObject
		if path != "" {
			kind = paths[path]
		}
		key, isKey := t.Value.(ast.String)
		switch kind {
		case fieldOpen, fieldLeaf:
			return ""
		case fieldMap:
			path += ".*"
			continue
		case fieldArray:
			if isKey {
				return fmt.Sprintf("input.%s is an array: input.%s[_] (or some x in input.%s), not input.%s.%s, reads its elements",
					path, path, path, path, string(key))
			}
			path += "[]"
			continue
		}
		if !isKey {
			return "" // a key computed at run time
		}
		next := string(key)
		if path != "" {
			next = path + "." + next
		}
		if _, ok := paths[next]; !ok {
			return fmt.Sprintf("%s is not in the input the engine hands %s, so it is always undefined: %s (docs/input.md)",
				r[:i+2], who, fieldsOf(paths, path))
		}
		path = next
	}
	return ""
}

// fieldsOf lists the fields directly below path ("" for the top).
func fieldsOf(paths map[string]string, path string) string {
	var names []string
	for p := range paths {
		rest, ok := p, path == ""
		if !ok {
			rest, ok = strings.CutPrefix(p, path+".")
		}
		if ok && !strings.ContainsAny(rest, ".[") {
			names = append(names, rest)
		}
	}
	sort.Strings(names)
	where := "input"
	if path != "" {
		where = "input." + path
	}
	return where + " has " + strings.Join(names, ", ")
}

// Object reports whether the field is an object whose fields are the
// paths below it.
func (p Path) Object() bool { return p.Kind == fieldObject }

// Array reports whether the field is an array of objects, whose elements
// are the paths below it with "[]".
func (p Path) Array() bool { return p.Kind == fieldArray }

// List reports whether the field is a list of strings (a set or an
// array).
func (p Path) List() bool {
	return p.Kind == fieldLeaf && (p.Set || strings.HasPrefix(p.Type, "array"))
}

// ruleInputPaths and filterInputPathsByName are the paths of ruleInput
// and filterInput, keyed by path.
var (
	ruleInputPaths = func() map[string]Path {
		out := map[string]Path{"call": {Path: "call", Key: "call", Kind: fieldObject, Type: "object"}}
		for _, p := range inputPaths {
			out[p.Path] = p
			if rest, ok := strings.CutPrefix(p.Path, "dispatch.calls[]."); ok {
				q := p
				q.Path = "call." + rest
				out[q.Path] = q
			}
		}
		return out
	}()
	filterInputPathsByName = func() map[string]Path {
		out := map[string]Path{}
		for _, p := range filterInputPaths {
			out[p.Path] = p
		}
		return out
	}()
)

// InputOf returns the paths of the input document the rules of package
// pkg see, keyed by path ("call.tool", "tools[].name",
// "facts.tool_calls.*"): a capability filter's (FilterInput) for
// policycheck.capabilities.<id>, else the decision's with the call being
// judged as input.call (what policycheck.rules.* see; a library's rules
// see their caller's). The map is shared: do not change it.
func InputOf(pkg ast.Ref) map[string]Path {
	if pkg.HasPrefix(rootRef("policycheck.capabilities")) && len(pkg) == 4 {
		return filterInputPathsByName
	}
	return ruleInputPaths
}
