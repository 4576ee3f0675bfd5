package engine

import (
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/facts"
)

// The facts that cost more to build than the others (facts.Options) are
// computed only for a policy set that may read them: a decision of a
// policy set that never does costs what it did before they existed.

// inputPath is an input path the engine builds only on demand; "*"
// stands for any key or array index.
type inputPath []string

var toolCallsPath = inputPath{"facts", "tool_calls"}

// flowPaths are the inputs that need flows (input.call is one of
// input.dispatch.calls, handed to the rules by the shipped gate).
var flowPaths = []inputPath{
	{"call", "flows"},
	{"dispatch", "calls", "*", "flows"},
	{"facts", "flow_index_truncated"},
}

// factOptions says which optional facts the compiled policies may read.
// It errs on the side of reading: a rule the engine can reach that
// refers to the path, to a document above it as a whole (input.facts
// passed to a function, say) or to a key computed at run time
// (input[k]) counts. Only the shipped library's whole-input references
// (policycheck.lib.gate hands the input to the rules packages with `with
// input as`) are known not to read anything by themselves.
func factOptions(c *ast.Compiler) facts.Options {
	o := facts.Options{ToolCalls: mayRead(c, toolCallsPath)}
	for _, p := range flowPaths {
		if mayRead(c, p) {
			o.Flows = true
			break
		}
	}
	return o
}

// mayRead reports whether some rule reachable from the rules outside the
// shipped library (policycheck.lib and its subpackages) may read the
// input at want.
func mayRead(c *ast.Compiler, want inputPath) bool {
	lib := ast.MustParseRef("data.policycheck.lib")
	var queue []*ast.Rule
	seen := map[*ast.Rule]bool{}
	push := func(r *ast.Rule) {
		if !seen[r] {
			seen[r] = true
			queue = append(queue, r)
		}
	}
	for _, m := range c.Modules {
		if m.Package.Path.HasPrefix(lib) {
			continue
		}
		for _, r := range m.Rules {
			push(r)
		}
	}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		if ruleMayRead(r, r.Module != nil && r.Module.Package.Path.HasPrefix(lib), want) {
			return true
		}
		for dep := range c.Graph.Dependencies(r) {
			if dr, ok := dep.(*ast.Rule); ok {
				push(dr)
			}
		}
		for alt := r.Else; alt != nil; alt = alt.Else {
			push(alt)
		}
	}
	return false
}

// ruleMayRead reports whether r refers to the input at want. In the
// shipped library (lib), the whole input is not counted. The compiler
// binds some input references to local variables first (__local1__ =
// input; object.get(__local1__, ...)): such a variable stands for its
// reference.
func ruleMayRead(r *ast.Rule, lib bool, want inputPath) bool {
	aliases := map[ast.Var]ast.Ref{}
	ast.WalkExprs(r, func(e *ast.Expr) bool {
		if v, ref, ok := inputAlias(e); ok {
			aliases[v] = ref
		}
		return false
	})
	// resolve returns the input reference t stands for, if any.
	resolve := func(t *ast.Term) (ast.Ref, bool) {
		switch v := t.Value.(type) {
		case ast.Var:
			if ref, ok := aliases[v]; ok {
				return ref, true
			}
			if v.Equal(ast.InputRootDocument.Value) {
				return ast.Ref{ast.InputRootDocument}, true
			}
		case ast.Ref:
			if v[0].Equal(ast.InputRootDocument) {
				return v, true
			}
			if head, ok := v[0].Value.(ast.Var); ok {
				if ref, ok := aliases[head]; ok {
					return append(ref.Copy(), v[1:]...), true
				}
			}
		}
		return nil, false
	}
	found := false
	check := func(ref ast.Ref) {
		if len(ref) > 1 || !lib {
			found = found || refMayRead(ref, want)
		}
	}
	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		if found {
			return true
		}
		switch x := x.(type) {
		case *ast.With:
			// The target is written, not read.
			vis.Walk(x.Value)
			return true
		case *ast.Expr:
			if _, _, ok := inputAlias(x); ok {
				return true // read where the variable is used
			}
			if x.IsCall() {
				return callMayRead(vis, x.Operator(), x.Operands(), resolve, check, want)
			}
		case *ast.Term:
			if call, ok := x.Value.(ast.Call); ok {
				if op, ok := call[0].Value.(ast.Ref); ok {
					return callMayRead(vis, op, call[1:], resolve, check, want)
				}
				return false
			}
			if ref, ok := resolve(x); ok {
				check(ref)
				if r, isRef := x.Value.(ast.Ref); isRef {
					for _, t := range r[1:] {
						vis.Walk(t)
					}
				}
				return true
			}
		}
		return false
	})
	vis.Walk(r)
	return found
}

// inputAlias recognises v = <input reference> (or :=), as the compiler
// writes it.
func inputAlias(e *ast.Expr) (ast.Var, ast.Ref, bool) {
	if !e.IsEquality() && !e.IsAssignment() || e.Negated || len(e.With) > 0 {
		return "", nil, false
	}
	ts := e.Terms.([]*ast.Term)
	v, ok := ts[1].Value.(ast.Var)
	if !ok {
		return "", nil, false
	}
	switch ref := ts[2].Value.(type) {
	case ast.Ref:
		if ref[0].Equal(ast.InputRootDocument) {
			return v, ref, true
		}
	case ast.Var:
		if ref.Equal(ast.InputRootDocument.Value) {
			return v, ast.Ref{ast.InputRootDocument}, true
		}
	}
	return "", nil, false
}

// libFlowReaders are the functions of the shipped library that read the
// flows of a call handed to them (TestLibFlowReaders keeps the list
// whole): handing input.call, or an element of input.dispatch.calls, to
// any other function of the library (the gate's verdict, lib.call_count)
// reads no flows.
var libFlowReaders = map[string]bool{"flows_labelled": true, "flows_complete": true,
	"permitted_flow": true, "untrusted_action_reasons": true, "flow_violation_reasons": true, "value_label": true}

// libCallReaders are, for each field of a call the engine builds on
// demand, the functions of the shipped library that read it of a call
// handed to them (TestLibFlowReaders keeps the lists whole).
var libCallReaders = map[string]map[string]bool{
	"flows":          libFlowReaders,
	"window":         {"trusted_action": true, "untrusted_action_reasons": true},
	"args_integrity": {"trusted_action": true, "untrusted_action_reasons": true},
}

var libRef = ast.MustParseRef("data.policycheck.lib")

// callMayRead handles a call: object.get(input, [static path], default)
// reads input at that path, not the whole input; a call of the shipped
// library's functions that read no flows does not read the flows of
// the input documents it is handed (the other paths below them it may).
func callMayRead(vis *ast.GenericVisitor, op ast.Ref, args []*ast.Term, resolve func(*ast.Term) (ast.Ref, bool), check func(ast.Ref), want inputPath) bool {
	if readers, onDemand := libCallReaders[want[len(want)-1]]; len(want) > 0 && onDemand && op.HasPrefix(libRef) && !readers[lastKey(op)] {
		for _, t := range args {
			if _, ok := resolve(t); !ok {
				vis.Walk(t)
			}
		}
		return true
	}
	if !op.Equal(objectGet) || len(args) < 2 {
		return false
	}
	in, ok := resolve(args[0])
	if !ok {
		return false
	}
	ref := in.Copy()
	switch path := args[1].Value.(type) {
	case *ast.Array:
		path.Foreach(func(t *ast.Term) { ref = append(ref, t) })
	case ast.String:
		ref = append(ref, args[1])
	default:
		return false
	}
	check(ref)
	for _, t := range args[1:] {
		vis.Walk(t)
	}
	return true
}

var objectGet = ast.ObjectGet.Ref()

// refMayRead reports whether input ref r may read the input at want: r
// names want, a document below it, one above it (as a whole), or takes
// a key at a position of want from a run-time value.
func refMayRead(r ast.Ref, want inputPath) bool {
	for i, w := range want {
		if i+1 >= len(r) {
			return true
		}
		if w == "*" {
			continue
		}
		key, ok := r[i+1].Value.(ast.String)
		if !ok {
			return true
		}
		if string(key) != w {
			return false
		}
	}
	return true
}

// lastKey is the last key of a static reference, "" when not a string.
func lastKey(r ast.Ref) string {
	if s, ok := r[len(r)-1].Value.(ast.String); ok {
		return string(s)
	}
	return ""
}
