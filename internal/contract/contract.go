// Package contract is the operator contract: the rules the engine reads
// from a policy set (hide, deny, require_approval, prepare_tools, the
// availability decision)
// and, for each, the shapes it accepts and what they mean. Check holds a
// compiled policy set to it, from the AST and OPA's type checker; the
// engine calls it at every load (engine.New, Reload, each sidecar bundle
// activation) and `policycheck check` reports its problems, so a rule the
// engine would not read as written never loads and never passes check.
// Nor does a public rule of a rules or filter package that is no entry
// point and that no rule refers to (a misspelt deny or prepare_tools), a
// reference to an input field the package's input lacks (input.go), or a
// package marker written where it is not read.
//
// What static checking cannot see (a value whose type is known only at run
// time) the shipped gate flags when it evaluates, and the engine fails the
// decision closed naming the rule's package and location (Locations).
//
// To add an entry point, add an Entry to Table; to add a package marker
// (a key of a package's METADATA `custom.policycheck` object), add a
// Marker to Markers. Nothing else in this package needs to change.
package contract

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/types"

	"github.com/policycheck/policycheck/facts"
)

// Form is a rule form, as OPA's compiler sees it.
type Form int

// The rule forms a Shape can name.
const (
	// PartialSet is `name contains x if ...`.
	PartialSet Form = iota
	// Complete is `name := v if ...`, `name if ...` (v is true),
	// `default name := v` and their `else` chains.
	Complete
)

func (f Form) String() string {
	if f == PartialSet {
		return "a partial set rule (contains)"
	}
	return "a complete rule"
}

// Answer is what a type check can say about a value.
type Answer int

// Answers: the value always fits, never fits, or fits only for some
// values (the gate then checks it at run time).
const (
	Yes Answer = iota
	No
	Maybe
)

// Shape is one accepted form of an entry point's rule.
type Shape struct {
	Form Form
	// Type answers for the type OPA's checker inferred: the element type
	// of a PartialSet, the value type of a Complete rule. nil or an empty
	// types.Any (unknown) is Maybe.
	Type func(types.Type) Answer
	// Meaning says what the shape does, for the docs and messages.
	Meaning string
}

// Entry is one rule the engine reads.
type Entry struct {
	// Root is the package the rule's packages sit under, as a path
	// below data ("policycheck.rules").
	Root string
	// Keyed is true when each package one level below Root holds its own
	// rule (policycheck.rules.<name>.deny); false when the rule sits in
	// Root itself (policycheck.availability.decision).
	Keyed bool
	// Name is the rule's name.
	Name string
	// Shapes are the accepted forms; any other form is refused.
	Shapes []Shape
	// Right is the right form, shown in every refusal.
	Right string
	// Literal, when set, refuses a literal value (a head's key or value)
	// of an accepted type: it returns why, or "".
	Literal func(t *ast.Term) string
	// ReadBy, when set, is the entry point (as a path below data) that
	// reads this rule: a rule it cannot reach (a replacement that never
	// reads data.policycheck.rules) is refused as never read.
	ReadBy string
}

// Marker is a key that a package's METADATA may set under
// `custom: {policycheck: {<key>: ...}}`.
type Marker struct {
	// Root is the package family the marker applies to (as Entry.Root,
	// with Keyed packages).
	Root string
	Key  string
	// Check returns why a value is refused, or "".
	Check func(v any) string
	// Right is the right form, shown in every refusal.
	Right string
}

// Markers are the accepted package markers. Any other key under
// custom.policycheck is refused: a marker never reads as ignored.
var Markers = []Marker{
	{
		Root: "policycheck.rules", Key: "enforcement",
		Check: func(v any) string {
			if s, ok := v.(string); ok && (s == EnforcementEnforce || s == EnforcementLogOnly) {
				return ""
			}
			return fmt.Sprintf("is %v; the accepted values are %q (the default) and %q", jsonish(v), EnforcementEnforce, EnforcementLogOnly)
		},
		Right: "custom: {policycheck: {enforcement: log_only}} in the package's METADATA",
	},
}

// Values of the enforcement marker of an operator rule package.
const (
	// EnforcementEnforce: the package's hide and deny results are
	// enforced (the default).
	EnforcementEnforce = "enforce"
	// EnforcementLogOnly: they are reported as would_hide and would_deny
	// and not enforced.
	EnforcementLogOnly = "log_only"
)

func jsonish(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%v", v)
}

// LogOnly returns, sorted, the keys under policycheck.rules of the
// packages whose METADATA marks them log-only
// (custom.policycheck.enforcement: log_only). The engine writes them to
// data.policycheck.log_only, which the shipped gate reads. Call it on a
// policy set Check accepted.
func LogOnly(modules map[string]*ast.Module) []string {
	root := rootRef("policycheck.rules")
	seen := map[string]bool{}
	for _, m := range modules {
		pkg := m.Package.Path
		if len(pkg) != len(root)+1 || !pkg.HasPrefix(root) {
			continue
		}
		key, ok := pkg[len(root)].Value.(ast.String)
		if !ok {
			continue
		}
		for _, a := range m.Annotations {
			if a.Scope != "package" && a.Scope != "subpackages" {
				continue
			}
			if obj, ok := a.Custom["policycheck"].(map[string]any); ok && obj["enforcement"] == EnforcementLogOnly {
				seen[string(key)] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Table is the operator contract, one entry per rule the engine reads.
var Table = []Entry{
	{
		Root: "policycheck.rules", Keyed: true, Name: "deny",
		Shapes: []Shape{
			{Form: PartialSet, Type: denialType,
				Meaning: `each element denies the call: an object {"reason": r, "message": m} (both strings, both optional) ` +
					`gives the operator reason r and the model-facing message m; a string s (Conftest's deny contains msg) is both`},
			{Form: Complete, Type: boolOrDenialSet,
				Meaning: "true denies the call, with a reason naming the package and the default message; false denies nothing; " +
					"a set is read as the partial set form"},
		},
		Right: `deny contains {"reason": "...", "message": "..."} if { input.call.tool == "..." }` +
			` (or deny contains msg if ..., with msg a string; or deny if ...)`,
		ReadBy: decisionPath,
	},
	{
		Root: "policycheck.rules", Keyed: true, Name: "require_approval",
		Shapes: []Shape{
			{Form: PartialSet, Type: requestType,
				Meaning: `each element asks a person to approve the call first: an object {"reason": r, "message": m} ` +
					`(both strings, both optional) gives the operator reason r and the message m shown to the approver; ` +
					`the call's bound approval, if any, is input.call.approval`},
		},
		Right: `require_approval contains {"reason": "...", "message": "..."} if { input.call.tool == "..."; not input.call.approval }`,
	},
	{
		Root: "policycheck.rules", Keyed: true, Name: "hide",
		Shapes: []Shape{
			{Form: PartialSet, Type: stringType, Meaning: "each element is a tool name hidden for this request"},
			{Form: Complete, Type: setOf(stringType), Meaning: "a set of tool names hidden for this request"},
		},
		Right:   `hide contains "tool_name" if { ... } (or hide := {"a", "b"})`,
		Literal: frameworkName,
		ReadBy:  decisionPath,
	},
	{
		Root: "policycheck.capabilities", Keyed: true, Name: "prepare_tools",
		Shapes: []Shape{
			{Form: PartialSet, Type: stringType, Meaning: "each element is a tool name the filter keeps"},
			{Form: Complete, Type: setOf(stringType), Meaning: "the set of tool names the filter keeps"},
		},
		Right: `prepare_tools contains name if { some name in data.policycheck.registry.names; ... }` +
			` (or prepare_tools := lib.registry_keep_own("<id>", {...}))`,
	},
	{
		Root: "policycheck.availability", Name: "decision",
		Shapes: []Shape{
			{Form: Complete, Type: decisionType,
				Meaning: "an object with available, advertised and dispatch_available (sets of tool names), " +
					"verdicts (one verdict object per call, in order) and, optionally, hidden (a set of tool names)"},
		},
		Right: `decision := {"available": ..., "advertised": ..., "dispatch_available": ..., "verdicts": [...]}`,
	},
	{
		Root: "policycheck.availability", Name: "decision_from_sets",
		Shapes: []Shape{
			{Form: Complete, Type: decisionType,
				Meaning: "optional: the decision for documents whose name lists are sets (as the engine hands them); " +
					"when it is defined the engine reads it instead of decision, which must read it"},
		},
		Right: `decision_from_sets := {"available": ..., ...}, with decision := decision_from_sets if { ... }`,
	},
}

// frameworkName refuses a hide of a framework tool, by a literal name or
// a literal set holding one: no rule can hide them (the engine presents
// load_capability while a capability is deferred, search_tools while a
// search-gated tool survives), so the hide would be ignored. A name
// computed at run time fails the decision closed (the gate's
// rule_errors).
func frameworkName(t *ast.Term) string {
	found := ""
	for _, name := range LiteralNames(t) {
		if s := string(name.Value.(ast.String)); s == facts.LoadCapabilityTool || s == facts.SearchTool {
			found = s
			break
		}
	}
	if found == "" {
		return ""
	}
	return fmt.Sprintf("yields the framework tool %q, which no rule can hide: the engine presents load_capability "+
		"while a capability is deferred and search_tools while a search-gated tool survives; hide the tools themselves", found)
}

// LiteralNames are the names a rule head's literal value t gives: t
// itself when it is a string, the strings of a literal set (in OPA's
// order), else none (a value computed at run time).
func LiteralNames(t *ast.Term) []*ast.Term {
	switch v := t.Value.(type) {
	case ast.String:
		return []*ast.Term{t}
	case ast.Set:
		var out []*ast.Term
		for _, x := range v.Slice() {
			if _, ok := x.Value.(ast.String); ok {
				out = append(out, x)
			}
		}
		return out
	}
	return nil
}

// HeadValues are the literal-or-not values each definition of rule r
// gives, r's own then each else: its key for a partial set rule, else its
// value.
func HeadValues(r *ast.Rule) []*ast.Term {
	var out []*ast.Term
	for x := r; x != nil; x = x.Else {
		t := x.Head.Value
		if x.Head.RuleKind() == ast.MultiValue {
			t = x.Head.Key
		}
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}

// decisionPath is the entry point of the policy set: the decision for any
// input document.
const decisionPath = "policycheck.availability.decision"

// decisionFromSetsPath is the optional entry point the engine reads in
// its place (see EntryPoint).
const decisionFromSetsPath = "policycheck.availability.decision_from_sets"

// EntryPoint is the rule the engine evaluates for a decision, as a path
// below data: decision_from_sets when the policy set defines it (the
// shipped policy does: its decision tells sets from JSON arrays, which
// the engine's documents never hold), else decision. Check refuses a
// policy set whose decision does not read its decision_from_sets, so the
// two give the same decision for the engine's documents.
func EntryPoint(c *ast.Compiler) string {
	if len(c.GetRules(ast.MustParseRef("data."+decisionFromSetsPath))) > 0 {
		return decisionFromSetsPath
	}
	return decisionPath
}

// Problem is one refusal, with its place.
type Problem struct {
	Code    string
	File    string
	Row     int
	Col     int
	Message string
}

// Problem codes.
const (
	CodeRuleShape = "rule_shape"
	CodeRulePlace = "rule_place"
	CodeMarker    = "package_marker"
	// CodeInputField: a rule reads a field its input does not have.
	CodeInputField = "input_field"
)

// Locations maps the path of each entry-point rule the policy set defines
// ("data.policycheck.rules.ops.deny") to the location of its first
// definition: the engine names it when the gate flags a value at run time.
type Locations map[string]*ast.Location

// Check holds the compiled policy set c to the contract. It returns the
// problems, sorted by place, and the locations of the entry-point rules.
func Check(c *ast.Compiler) ([]Problem, Locations) {
	var out []Problem
	locs := Locations{}
	files := make([]string, 0, len(c.Modules))
	for f := range c.Modules {
		files = append(files, f)
	}
	sort.Strings(files)
	// Rules by full path, in file order, so that a rule defined across
	// files is judged once, as a whole.
	type group struct {
		entry *Entry
		rules []*ast.Rule
	}
	groups := map[string]*group{}
	var order []string
	for _, f := range files {
		m := c.Modules[f]
		out = append(out, markerProblems(m)...)
		if !strings.HasSuffix(f, "_test.rego") {
			out = append(out, inputProblems(m)...)
		}
		for _, r := range m.Rules {
			path := fullPath(m, r)
			e, where, place := match(path, len(m.Package.Path))
			if e == nil {
				continue
			}
			if place != "" {
				out = append(out, at(CodeRulePlace, r.Location, fmt.Sprintf(
					"%s: %s; the engine reads %s. Write: %s", strings.TrimPrefix(path.String(), "data."), place, where, e.Right)))
				continue
			}
			key := path.String()
			g := groups[key]
			if g == nil {
				g = &group{entry: e}
				groups[key] = g
				order = append(order, key)
				locs[key] = r.Location
			}
			g.rules = append(g.rules, r)
		}
	}
	reached := map[string]map[*ast.Rule]bool{}
	entry := EntryPoint(c)
	if fromSets := groups["data."+decisionFromSetsPath]; fromSets != nil {
		// decision must read decision_from_sets: the engine reads the
		// latter, stock opa the former, and they must not diverge.
		dec := groups["data."+decisionPath]
		if dec == nil || !reachable(c, dec.rules)[fromSets.rules[0]] {
			out = append(out, at(CodeRulePlace, fromSets.rules[0].Location, fmt.Sprintf(
				"%s is defined, so the engine reads it, but %s does not depend on it: the two would decide apart. "+
					"Write: %s", decisionFromSetsPath, decisionPath, fromSets.entry.Right)))
		}
	}
	for _, key := range order {
		g := groups[key]
		out = append(out, shapeProblems(c, key, g.entry, g.rules)...)
		if g.entry.ReadBy == "" {
			continue
		}
		readBy := g.entry.ReadBy
		if readBy == decisionPath {
			readBy = entry
		}
		from := groups["data."+readBy]
		if from == nil {
			continue // no reader: the engine refuses the set as a whole
		}
		if reached[readBy] == nil {
			reached[readBy] = reachable(c, from.rules)
		}
		if !reached[readBy][g.rules[0]] {
			out = append(out, at(CodeRulePlace, g.rules[0].Location, fmt.Sprintf(
				"%s is never read: %s does not depend on it (a replacement availability policy must read "+
					"data.policycheck.rules, as data.policycheck.lib.gate does)", strings.TrimPrefix(key, "data."), readBy)))
		}
	}
	out = append(out, unreadProblems(c, files)...)
	SortByPlace(out, func(p Problem) (string, int, int) { return p.File, p.Row, p.Col })
	return out, locs
}

// closest is the entry whose name shares the longest prefix with name
// (deny for deny_call, prepare_tools for prepare_tool), the first on a
// tie.
func closest(entries []*Entry, name string) *Entry {
	best, bestLen := entries[0], -1
	for _, e := range entries {
		n := 0
		for n < len(e.Name) && n < len(name) && e.Name[n] == name[n] {
			n++
		}
		if n > bestLen {
			best, bestLen = e, n
		}
	}
	return best
}

// unreadProblems refuses the public rules of operator packages (a
// Keyed root's packages: policycheck.rules.<name>,
// policycheck.capabilities.<id>) that are not what the engine reads there
// and that no rule refers to: a misspelt entry point (deny_call,
// prepare_tool) would otherwise be ignored, and the call it was meant to
// stop would execute. A helper nothing refers to yet is named with a
// leading _ (Rego's private rules); test_ rules are opa test's.
func unreadProblems(c *ast.Compiler, files []string) []Problem {
	// Every rule a rule refers to by its package (compiled refs are
	// fully qualified): data.<root>.<name>.<rule>.
	used := map[string]bool{}
	for _, f := range files {
		ast.WalkRefs(c.Modules[f], func(r ast.Ref) bool {
			if g := r.ConstantPrefix(); r.HasPrefix(ast.DefaultRootRef) && len(g) >= 5 {
				used[g[:5].String()] = true
			}
			return false
		})
	}
	var out []Problem
	reported := map[string]bool{}
	for _, f := range files {
		m := c.Modules[f]
		if strings.HasSuffix(f, "_test.rego") {
			continue
		}
		var root string
		var names []string
		var entries []*Entry
		for i := range Table {
			e := &Table[i]
			if r := rootRef(e.Root); e.Keyed && len(m.Package.Path) == len(r)+1 && m.Package.Path.HasPrefix(r) {
				root = e.Root
				names = append(names, e.Name)
				entries = append(entries, e)
			}
		}
		if root == "" {
			continue
		}
		for _, r := range m.Rules {
			ref := r.Head.Ref()
			name, ok := ref[0].Value.(ast.Var)
			if !ok || strings.HasPrefix(string(name), "_") || strings.HasPrefix(string(name), "test_") || slices.Contains(names, string(name)) {
				continue
			}
			path := m.Package.Path.Append(ast.StringTerm(string(name)))
			if used[path.String()] || reported[path.String()] {
				continue // a rule of several definitions is reported once, at its first
			}
			reported[path.String()] = true
			out = append(out, at(CodeRulePlace, r.Location, fmt.Sprintf(
				"%s is never read: in %s.<name> the engine reads %s, and no rule refers to it. Write: %s; "+
					"or, for a helper, _%s",
				strings.TrimPrefix(path.String(), "data."), root, strings.Join(names, ", "), closest(entries, string(name)).Right, name)))
		}
	}
	return out
}

// SortByPlace sorts xs by file, row and column (stably: two at one place
// keep their order), place giving each one's. Every list of problems the
// project prints (Check's, policycheck check's findings) is in this order.
func SortByPlace[T any](xs []T, place func(T) (file string, row, col int)) {
	sort.SliceStable(xs, func(i, j int) bool {
		af, ar, ac := place(xs[i])
		bf, br, bc := place(xs[j])
		if af != bf {
			return af < bf
		}
		if ar != br {
			return ar < br
		}
		return ac < bc
	})
}

// reachable is every rule roots depend on, themselves included.
func reachable(c *ast.Compiler, roots []*ast.Rule) map[*ast.Rule]bool {
	seen := map[*ast.Rule]bool{}
	var visit func(r *ast.Rule)
	visit = func(r *ast.Rule) {
		if seen[r] {
			return
		}
		seen[r] = true
		for dep := range c.Graph.Dependencies(r) {
			if dr, ok := dep.(*ast.Rule); ok {
				visit(dr)
			}
		}
	}
	for _, r := range roots {
		visit(r)
	}
	return seen
}

// fullPath is the data path a rule defines: its package and its head's
// ref (data.policycheck.rules.ops.deny).
func fullPath(m *ast.Module, r *ast.Rule) ast.Ref {
	ref := r.Head.Ref()
	out := m.Package.Path.Copy()
	for i, t := range ref {
		if i == 0 {
			if v, ok := t.Value.(ast.Var); ok {
				out = append(out, ast.StringTerm(string(v)))
				continue
			}
		}
		out = append(out, t)
	}
	return out
}

// rootRef is the data path of a package root.
func rootRef(root string) ast.Ref {
	out := ast.Ref{ast.DefaultRootDocument}
	for _, part := range strings.Split(root, ".") {
		out = append(out, ast.StringTerm(part))
	}
	return out
}

// match finds the entry point a rule path names. place is "" when the
// rule is where the engine reads it, else says what is wrong with where
// it is (where says where the engine looks).
func match(path ast.Ref, pkgLen int) (e *Entry, where, place string) {
	for i := range Table {
		e := &Table[i]
		root := rootRef(e.Root)
		if !path.HasPrefix(root) {
			continue
		}
		rest := path[len(root):]
		want := 0
		where = e.Root + "." + e.Name
		if e.Keyed {
			want = 1
			where = e.Root + ".<name>." + e.Name
		}
		for j, t := range rest {
			// Only the rule's own head names it (a package may be
			// called deny).
			if len(root)+j < pkgLen || ast.Compare(t.Value, ast.String(e.Name)) != 0 {
				continue
			}
			switch {
			case j == want && j == len(rest)-1:
				return e, where, ""
			case j == want:
				return e, where, fmt.Sprintf("%s is defined as an object (%s), which the engine does not read as %s",
					e.Name, rest[j:], where)
			case j < want:
				return e, where, "rule " + e.Name + " directly in package " + e.Root + " is never read"
			default:
				return e, where, fmt.Sprintf("rule %s in a package nested below %s is never read",
					e.Name, strings.TrimPrefix(path[:len(root)+want].String(), "data."))
			}
		}
	}
	return nil, "", ""
}

func at(code string, loc *ast.Location, msg string) Problem {
	p := Problem{Code: code, Message: msg}
	if loc != nil {
		p.File, p.Row, p.Col = loc.File, loc.Row, loc.Col
	}
	return p
}

// shapeProblems judges every definition of one entry-point rule.
func shapeProblems(c *ast.Compiler, key string, e *Entry, rules []*ast.Rule) []Problem {
	var out []Problem
	name := strings.TrimPrefix(key, "data.")
	refuse := func(loc *ast.Location, why string) {
		out = append(out, at(CodeRuleShape, loc, fmt.Sprintf("%s %s. Write: %s", name, why, e.Right)))
	}
	accepts := func(f Form) *Shape {
		for i := range e.Shapes {
			if e.Shapes[i].Form == f {
				return &e.Shapes[i]
			}
		}
		return nil
	}
	for _, r := range rules {
		if len(r.Head.Args) > 0 {
			refuse(r.Location, fmt.Sprintf("is a function (%d argument(s)), which the engine never calls", len(r.Head.Args)))
			continue
		}
		form := Complete
		if r.Head.RuleKind() == ast.MultiValue {
			form = PartialSet
		}
		sh := accepts(form)
		if sh == nil {
			refuse(r.Location, "is "+form.String()+", which the engine does not read")
			continue
		}
		// Each definition's literal value: the head's key (partial set)
		// or value, and each else value.
		for _, t := range HeadValues(r) {
			if lt, ok := literalType(t); ok && sh.Type(lt) == No {
				loc := t.Location
				if loc == nil { // the implied true of `name if ...`
					loc = r.Location
				}
				refuse(loc, fmt.Sprintf("yields %s (%s), which is not %s", t, types.Sprint(lt), accepted(e, form)))
			} else if e.Literal != nil {
				if why := e.Literal(t); why != "" {
					refuse(t.Location, why)
				}
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	// The type OPA's checker inferred for the rule as a whole.
	t := c.TypeEnv.GetByRef(ast.MustParseRef(key))
	form := Complete
	if rules[0].Head.RuleKind() == ast.MultiValue {
		form = PartialSet
	}
	if form == PartialSet {
		if s, ok := t.(*types.Set); ok {
			t = s.Of()
		}
	}
	if sh := accepts(form); sh != nil && t != nil && sh.Type(t) == No {
		refuse(rules[0].Location, fmt.Sprintf("has type %s, which is not %s", typeOf(form, t), accepted(e, form)))
	}
	return out
}

func typeOf(f Form, t types.Type) string {
	if f == PartialSet {
		return "set[" + types.Sprint(t) + "]"
	}
	return types.Sprint(t)
}

func accepted(e *Entry, f Form) string {
	for _, s := range e.Shapes {
		if s.Form == f {
			return "accepted: " + s.Meaning
		}
	}
	return "accepted"
}

// literalType is the type of a term whose type its syntax fixes: a
// scalar, or a composite of them (object keys and values, array and set
// elements that are variables or calls count as any).
func literalType(t *ast.Term) (types.Type, bool) {
	if t == nil {
		return nil, false
	}
	switch v := t.Value.(type) {
	case ast.String:
		return types.S, true
	case ast.Number:
		return types.N, true
	case ast.Boolean:
		return types.B, true
	case ast.Null:
		return types.Nl, true
	case *ast.Array:
		return types.NewArray(nil, types.A), true
	case ast.Set:
		var elems []types.Type
		v.Foreach(func(x *ast.Term) {
			if et, ok := literalType(x); ok {
				elems = append(elems, et)
			} else {
				elems = append(elems, types.A)
			}
		})
		if len(elems) == 0 {
			return types.NewSet(types.A), true
		}
		et := elems[0]
		for _, x := range elems[1:] {
			et = types.Or(et, x)
		}
		return types.NewSet(et), true
	case ast.Object:
		var static []*types.StaticProperty
		dynamic := false
		v.Foreach(func(k, x *ast.Term) {
			key, isStr := k.Value.(ast.String)
			if !isStr {
				dynamic = true
				return
			}
			xt, ok := literalType(x)
			if !ok {
				xt = types.A
			}
			static = append(static, types.NewStaticProperty(string(key), xt))
		})
		if dynamic {
			return types.NewObject(static, types.NewDynamicProperty(types.A, types.A)), true
		}
		return types.NewObject(static, nil), true
	case ast.Call:
		return nil, false
	}
	return nil, false
}

// all answers for a union (types.Any): Yes when every member fits, No
// when none does, else Maybe. An empty union (any) is Maybe.
func all(t types.Type, each func(types.Type) Answer) Answer {
	a, isAny := t.(types.Any)
	if t == nil || (isAny && len(a) == 0) {
		return Maybe
	}
	if !isAny {
		return each(t)
	}
	yes, no := 0, 0
	for _, m := range a {
		switch all(m, each) {
		case Yes:
			yes++
		case No:
			no++
		}
	}
	switch {
	case yes == len(a):
		return Yes
	case no == len(a):
		return No
	}
	return Maybe
}

func stringType(t types.Type) Answer {
	return all(t, func(t types.Type) Answer {
		if types.Compare(t, types.S) == 0 {
			return Yes
		}
		return No
	})
}

func boolType(t types.Type) Answer {
	return all(t, func(t types.Type) Answer {
		if types.Compare(t, types.B) == 0 {
			return Yes
		}
		return No
	})
}

func setOf(elem func(types.Type) Answer) func(types.Type) Answer {
	return func(t types.Type) Answer {
		return all(t, func(t types.Type) Answer {
			if s, ok := t.(*types.Set); ok {
				return elem(s.Of())
			}
			return No
		})
	}
}

// denialType: a string, or an object whose keys are among reason and
// message, with string values.
func denialType(t types.Type) Answer {
	return all(t, func(t types.Type) Answer {
		if types.Compare(t, types.S) == 0 {
			return Yes
		}
		o, ok := t.(*types.Object)
		if !ok {
			return No
		}
		ans := Yes
		for _, p := range o.StaticProperties() {
			k, _ := p.Key.(string)
			if k != "reason" && k != "message" {
				return No
			}
			switch stringType(p.Value) {
			case No:
				return No
			case Maybe:
				ans = Maybe
			}
		}
		if o.DynamicProperties() != nil {
			ans = Maybe
		}
		return ans
	})
}

// requestType: an object whose keys are among reason and message, with
// string values (a require_approval element).
func requestType(t types.Type) Answer {
	return all(t, func(t types.Type) Answer {
		if types.Compare(t, types.S) == 0 {
			return No
		}
		return denialType(t)
	})
}

func boolOrDenialSet(t types.Type) Answer {
	return all(t, func(t types.Type) Answer {
		if boolType(t) == Yes {
			return Yes
		}
		return setOf(denialType)(t)
	})
}

// decisionKeys are the keys the engine reads from the decision object:
// the top-level fields of Result (document.go).
var decisionKeys = func() map[string]Path {
	out := map[string]Path{}
	for _, p := range resultPaths {
		if !strings.ContainsAny(p.Path, ".[") {
			out[p.Path] = p
		}
	}
	return out
}()

func decisionType(t types.Type) Answer {
	return all(t, func(t types.Type) Answer {
		o, ok := t.(*types.Object)
		if !ok {
			return No
		}
		if o.DynamicProperties() != nil {
			return Maybe
		}
		have := map[string]bool{}
		for _, p := range o.StaticProperties() {
			k, _ := p.Key.(string)
			field, known := decisionKeys[k]
			if !known {
				return No
			}
			have[k] = true
			if field.Set && setOf(stringType)(p.Value) == No {
				return No
			}
		}
		for k, field := range decisionKeys {
			if !field.Optional && !have[k] {
				return No
			}
		}
		return Yes
	})
}

// markerProblems checks a package's custom.policycheck METADATA.
func markerProblems(m *ast.Module) []Problem {
	var out []Problem
	for _, a := range m.Annotations {
		if a.Scope != "package" && a.Scope != "subpackages" {
			// Markers are read from the package's METADATA only: one
			// above a rule would leave the package enforced.
			_, ours := a.Custom["policycheck"]
			for k := range a.Custom {
				ours = ours || findMarker(m.Package.Path, k) != nil
			}
			if ours {
				out = append(out, at(CodeMarker, a.Location, fmt.Sprintf(
					"METADATA custom.policycheck in package %s is not read at %s scope: markers are read from the package's "+
						"METADATA. Write it in the METADATA block above the package line",
					strings.TrimPrefix(m.Package.Path.String(), "data."), a.Scope)))
			}
			continue
		}
		// A marker written beside custom.policycheck instead of in it
		// (custom: {enforcement: log_only}) is refused, not ignored.
		customKeys := make([]string, 0, len(a.Custom))
		for k := range a.Custom {
			customKeys = append(customKeys, k)
		}
		sort.Strings(customKeys)
		for _, k := range customKeys {
			if k != "policycheck" && findMarker(m.Package.Path, k) != nil {
				out = append(out, at(CodeMarker, a.Location, fmt.Sprintf(
					"METADATA custom.%s of package %s is not read: markers go under custom.policycheck. Write: %s",
					k, strings.TrimPrefix(m.Package.Path.String(), "data."), findMarker(m.Package.Path, k).Right)))
			}
		}
		raw, ok := a.Custom["policycheck"]
		if !ok {
			continue
		}
		obj, ok := raw.(map[string]any)
		if !ok {
			out = append(out, at(CodeMarker, a.Location, fmt.Sprintf(
				"METADATA custom.policycheck of package %s must be an object of markers", m.Package.Path)))
			continue
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			mk := findMarker(m.Package.Path, k)
			if mk == nil {
				out = append(out, at(CodeMarker, a.Location, fmt.Sprintf(
					"METADATA custom.policycheck.%s of package %s is not a marker the engine reads here (%s)",
					k, strings.TrimPrefix(m.Package.Path.String(), "data."), markerNames(m.Package.Path))))
				continue
			}
			if why := mk.Check(obj[k]); why != "" {
				out = append(out, at(CodeMarker, a.Location, fmt.Sprintf(
					"METADATA custom.policycheck.%s of package %s %s. Write: %s",
					k, strings.TrimPrefix(m.Package.Path.String(), "data."), why, mk.Right)))
			}
		}
	}
	return out
}

// PackageMarker returns the value of marker key in module m's package
// METADATA (custom.policycheck.<key>), and whether it is set. Check has
// refused any marker not in Markers, so a loaded module's markers are
// among them.
func PackageMarker(m *ast.Module, key string) (any, bool) {
	for _, a := range m.Annotations {
		if a.Scope != "package" && a.Scope != "subpackages" {
			continue
		}
		if obj, ok := a.Custom["policycheck"].(map[string]any); ok {
			if v, ok := obj[key]; ok {
				return v, true
			}
		}
	}
	return nil, false
}

func markerApplies(mk *Marker, pkg ast.Ref) bool {
	root := rootRef(mk.Root)
	return len(pkg) == len(root)+1 && pkg.HasPrefix(root)
}

func findMarker(pkg ast.Ref, key string) *Marker {
	for i := range Markers {
		if Markers[i].Key == key && markerApplies(&Markers[i], pkg) {
			return &Markers[i]
		}
	}
	return nil
}

func markerNames(pkg ast.Ref) string {
	var names []string
	for i := range Markers {
		if markerApplies(&Markers[i], pkg) {
			names = append(names, Markers[i].Key)
		}
	}
	if len(names) == 0 {
		return "none are"
	}
	return "accepted: " + strings.Join(names, ", ")
}
