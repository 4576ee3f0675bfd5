package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/facts"
)

// codeArgsNotRequired: a deny or require_approval rule reads
// input.call.args.<field> for a tool whose parameters_json_schema does not
// require the field (or that has none): when the model leaves the field
// out, the rule is undefined and does not apply.
const codeArgsNotRequired = "args_not_required"

// codeArgsForbidden: a deny or require_approval rule reads
// input.call.args.<field> for a tool whose parameters_json_schema forbids
// the field (additionalProperties: false and no such property): a call
// carrying it is invalid_args before any rule, so for that tool the rule
// never fires (often a misspelt field).
const codeArgsForbidden = "args_forbidden"

// argsIgnoreMarker, in a comment on the line of a read or the line above
// it, or in the comment block directly above a rule (above its METADATA,
// whose comments are YAML), marks the reads as deliberate: check does not
// report them.
const argsIgnoreMarker = "policycheck:ignore args"

// codeContextNotInSchema: an operator rule reads input.context.<field>,
// which the registry's context_schema does not list.
const codeContextNotInSchema = "context_not_in_schema"

// contextIgnoreMarker marks a read of input.context as deliberate, as
// argsIgnoreMarker does a read of the arguments.
const contextIgnoreMarker = "policycheck:ignore context"

// callRules are the operator rules evaluated with input.call: the rules a
// missing argument silently switches off. (A filter sees no call.)
var callRules = map[string]bool{"deny": true, "require_approval": true}

// argsFindings reports each read of input.call.args.<field>, in the body
// or the value (a sprintf message) of a deny or require_approval rule of
// an operator module, that registry reg, read from regFile, does not
// guarantee: some tool the rule applies to has no parameters_json_schema,
// or one whose "required" does not list the field. The tools a rule
// applies to are those its body compares input.call.tool with (== a
// string, or in a literal set or array of strings, at the top level of
// the body: a rule holding several such comparisons applies to the tools
// all of them name); a rule without such a comparison is taken to apply
// to every registry tool. Only the rule's own body and value are read,
// not the functions and rules it calls. A comment holding
// "policycheck:ignore args" on the read's line or the line above it, or
// in the comment block directly above the rule, marks the reads as
// deliberate. With a context_schema in the registry, it also reports the
// reads of input.context.<field> the schema does not list, in any rule of
// an operator module (ruleContextFindings; "policycheck:ignore context"
// marks them).
func argsFindings(c *ast.Compiler, operator map[string]bool, reg *facts.Registry, regFile string) []policyFinding {
	var out []policyFinding
	ctxSchema := reg.ContextSchema()
	for _, m := range sortedModules(c) {
		if !operator[m.Package.Location.File] {
			continue
		}
		rules := m.Package.Path.HasPrefix(rulesPackage) && len(m.Package.Path) == len(rulesPackage)+1
		if !rules && ctxSchema == nil {
			continue
		}
		ignored, comments := ignoredRows(m, argsIgnoreMarker)
		ctxIgnored, _ := ignoredRows(m, contextIgnoreMarker)
		for _, r := range m.Rules {
			name := ruleName(r)
			args := rules && callRules[name] && !ignoredAbove(ignored, comments, r.Location.Row)
			ctx := ctxSchema != nil && !ignoredAbove(ctxIgnored, comments, r.Location.Row)
			for rule := r; rule != nil; rule = rule.Else {
				if args {
					out = append(out, ruleArgsFindings(rule, name, m, reg, regFile, ignored)...)
				}
				if ctx {
					out = append(out, ruleContextFindings(rule, name, m, ctxSchema, regFile, ctxIgnored)...)
				}
			}
		}
	}
	return out
}

// ruleContextFindings reports each read of input.context.<field> in the
// body or the value of rule r (any rule of an operator module: filters,
// hide, deny, require_approval) of a field the registry's context_schema
// does not list (context_not_in_schema): often a misspelt field, which no
// valid request carries.
func ruleContextFindings(r *ast.Rule, name string, m *ast.Module, sch *facts.ArgsSchema, regFile string, ignored map[int]bool) []policyFinding {
	var out []policyFinding
	seen := map[string]bool{}
	ast.WalkRefs(r, func(ref ast.Ref) bool {
		field, ok := inputField(ref, "context")
		if !ok || ref[0].Location == nil || sch.Lists(field) {
			return false
		}
		loc := ref[0].Location
		if ignored[loc.Row] || ignored[loc.Row-1] {
			return false
		}
		key := fmt.Sprintf("%s:%d:%d", field, loc.Row, loc.Col)
		if seen[key] {
			return false
		}
		seen[key] = true
		listed := "none"
		if names := sch.PropertyNames(); len(names) > 0 {
			listed = nameList(names)
		}
		why := "a request may carry it unchecked (the schema does not forbid other fields), a misspelt field often"
		if sch.Forbids(field) {
			why = "a request carrying it is refused as bad input (HTTP 400, exit 2), so the read is never defined"
		}
		pkg := strings.TrimPrefix(m.Package.Path.String(), "data.")
		out = append(out, locFinding(codeContextNotInSchema, loc, fmt.Sprintf(
			"%s.%s reads input.context.%s, which the context_schema of registry %s does not list (its properties: %s): %s. "+
				"Read a property the schema lists, or add %q to its properties; "+
				"a deliberate read is marked with a %q comment on its line or the line above",
			pkg, name, field, regFile, listed, why, field, "# "+contextIgnoreMarker)))
		return false
	})
	return out
}

func ruleArgsFindings(r *ast.Rule, name string, m *ast.Module, reg *facts.Registry, regFile string, ignored map[int]bool) []policyFinding {
	tools, narrowed := comparedTools(r.Body)
	if !narrowed {
		tools = reg.ToolNames()
	}
	var out []policyFinding
	seen := map[string]bool{}
	ast.WalkRefs(r, func(ref ast.Ref) bool {
		field, ok := argsField(ref)
		if !ok || ref[0].Location == nil {
			return false
		}
		loc := ref[0].Location
		if ignored[loc.Row] || ignored[loc.Row-1] {
			return false
		}
		key := fmt.Sprintf("%s:%d:%d", field, loc.Row, loc.Col)
		if seen[key] {
			return false
		}
		seen[key] = true
		var noSchema, notRequired, forbidden []string
		applies := 0
		for _, t := range tools {
			if _, known := reg.Tool(t); !known {
				continue // a rule for a tool this registry lacks applies to nothing here
			}
			applies++
			switch sch := reg.ArgsSchema(t); {
			case sch == nil:
				noSchema = append(noSchema, t)
			case sch.Forbids(field):
				forbidden = append(forbidden, t)
			case !sch.Requires(field):
				notRequired = append(notRequired, t)
			}
		}
		pkg := strings.TrimPrefix(m.Package.Path.String(), "data.")
		if len(forbidden) > 0 {
			out = append(out, forbiddenFinding(loc, pkg, name, field, forbidden, len(forbidden) == applies, reg, regFile))
		}
		if len(noSchema)+len(notRequired) == 0 {
			return false
		}
		var why []string
		if len(noSchema) > 0 {
			why = append(why, fmt.Sprintf("%s in registry %s %s no parameters_json_schema", nameList(noSchema), regFile, hasHave(noSchema)))
		}
		if len(notRequired) > 0 {
			why = append(why, fmt.Sprintf("the parameters_json_schema of %s in registry %s does not require %q", nameList(notRequired), regFile, field))
		}
		scope := "every registry tool (its body compares input.call.tool with no constant)"
		if narrowed {
			scope = nameList(tools)
		}
		out = append(out, locFinding(codeArgsNotRequired, loc, fmt.Sprintf(
			"%s.%s reads input.call.args.%s: this rule does not apply when the model omits %s. It applies to %s, and %s. "+
				"Require %q in the tool's parameters_json_schema (a call without it is then invalid_args before any rule), "+
				"or read it with object.get(input.call.args, %q, <a default that denies>); "+
				"a deliberate read is marked with a %q comment on its line or the line above",
			pkg, name, field, field, scope, strings.Join(why, ", and "), field, field, "# "+argsIgnoreMarker)))
		return false
	})
	return out
}

// forbiddenFinding says that the rule pkg.name reads field, which the
// schemas of tools forbid: for them it never fires (never at all when
// every tool it applies to is among them).
func forbiddenFinding(loc *ast.Location, pkg, name, field string, tools []string, all bool, reg *facts.Registry, regFile string) policyFinding {
	props := map[string]bool{}
	for _, t := range tools {
		for _, p := range reg.ArgsSchema(t).PropertyNames() {
			props[p] = true
		}
	}
	names := make([]string, 0, len(props))
	for p := range props {
		names = append(names, p)
	}
	sort.Strings(names)
	listed := "none"
	if len(names) > 0 {
		listed = nameList(names)
	}
	never := "this rule can never fire"
	if !all {
		never = "this rule never fires for " + nameList(tools)
	}
	return locFinding(codeArgsForbidden, loc, fmt.Sprintf(
		"%s.%s reads input.call.args.%s, which the parameters_json_schema of %s in registry %s forbids "+
			"(additionalProperties: false; its properties: %s): a call carrying it is invalid_args before any rule, so %s. "+
			"Read a property the schema lists, or add %q to its properties",
		pkg, name, field, nameList(tools), regFile, listed, never, field))
}

// argsField is the field of a read input.call.args.<field>[...].
func argsField(ref ast.Ref) (string, bool) { return inputField(ref, "call", "args") }

// inputField is the field of a read input.<path...>.<field>[...].
func inputField(ref ast.Ref, path ...string) (string, bool) {
	if len(ref) < len(path)+2 || !ref[0].Equal(ast.InputRootDocument) {
		return "", false
	}
	for i, want := range path {
		if s, ok := ref[i+1].Value.(ast.String); !ok || string(s) != want {
			return "", false
		}
	}
	field, ok := ref[len(path)+1].Value.(ast.String)
	return string(field), ok
}

// comparedTools returns the tool names a rule body restricts input.call.tool
// to, by top-level expressions input.call.tool == "x" (or "x" ==
// input.call.tool, or =) and input.call.tool in {"x", ...}; narrowed is
// false when it has none.
func comparedTools(body ast.Body) (tools []string, narrowed bool) {
	var allowed map[string]bool
	restrict := func(names []string) {
		next := map[string]bool{}
		for _, n := range names {
			if allowed == nil || allowed[n] {
				next[n] = true
			}
		}
		allowed = next
	}
	for _, e := range body {
		if e.Negated || len(e.With) > 0 || !e.IsCall() {
			continue
		}
		op := e.Operator().String()
		ops := e.Operands()
		if len(ops) != 2 {
			continue
		}
		switch op {
		case "equal", "eq":
			for i := range 2 {
				if isCallTool(ops[i]) {
					if s, ok := ops[1-i].Value.(ast.String); ok {
						restrict([]string{string(s)})
					}
				}
			}
		case "internal.member_2":
			if isCallTool(ops[0]) {
				if names, ok := literalStrings(ops[1]); ok {
					restrict(names)
				}
			}
		}
	}
	if allowed == nil {
		return nil, false
	}
	for n := range allowed {
		tools = append(tools, n)
	}
	sort.Strings(tools)
	return tools, true
}

func isCallTool(t *ast.Term) bool {
	ref, ok := t.Value.(ast.Ref)
	return ok && ref.Equal(ast.MustParseRef("input.call.tool"))
}

// literalStrings returns the elements of a literal set or array of
// strings.
func literalStrings(t *ast.Term) ([]string, bool) {
	var terms []*ast.Term
	switch v := t.Value.(type) {
	case ast.Set:
		terms = v.Slice()
	case *ast.Array:
		for i := range v.Len() {
			terms = append(terms, v.Elem(i))
		}
	default:
		return nil, false
	}
	out := make([]string, 0, len(terms))
	for _, e := range terms {
		s, ok := e.Value.(ast.String)
		if !ok {
			return nil, false
		}
		out = append(out, string(s))
	}
	return out, true
}

// ruleName is the first segment of a rule's head ("deny" of deny
// contains ...).
func ruleName(r *ast.Rule) string {
	ref := r.Head.Ref()
	if len(ref) == 0 {
		return ""
	}
	if v, ok := ref[0].Value.(ast.Var); ok {
		return string(v)
	}
	return ""
}

// rulesPackage is the root of the operator rules packages.
var rulesPackage = ast.MustParseRef("data.policycheck.rules")

// ignoredRows are the rows of the module's comments holding marker,
// and the rows of all its comments.
func ignoredRows(m *ast.Module, marker string) (ignored, comments map[int]bool) {
	ignored, comments = map[int]bool{}, map[int]bool{}
	for _, cm := range m.Comments {
		if cm.Location == nil {
			continue
		}
		comments[cm.Location.Row] = true
		if strings.Contains(string(cm.Text), marker) {
			ignored[cm.Location.Row] = true
		}
	}
	return ignored, comments
}

// ignoredAbove reports whether the marker is in the comment block directly
// above row (the rule's METADATA included): rows row-1, row-2, … as long
// as each holds a comment.
func ignoredAbove(ignored, comments map[int]bool, row int) bool {
	for r := row - 1; r > 0 && comments[r]; r-- {
		if ignored[r] {
			return true
		}
	}
	return false
}

func nameList(names []string) string {
	const most = 5
	q := make([]string, 0, most+1)
	for i, n := range names {
		if i == most {
			q = append(q, fmt.Sprintf("%d more", len(names)-most))
			break
		}
		q = append(q, fmt.Sprintf("%q", n))
	}
	return strings.Join(q, ", ")
}

func hasHave(names []string) string {
	if len(names) == 1 {
		return "has"
	}
	return "have"
}
