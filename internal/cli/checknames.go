package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/agnivade/levenshtein"
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/contract"
)

// Codes of the name check: a string literal a rule compares with a tool
// name or a capability id that no --registry has (a finding), or that
// some registry given lacks while another has it (a note: a policy set
// may serve several registries).
const (
	codeUnknownToolName = "unknown_tool_name"
	codeUnknownCapName  = "unknown_capability_name"
)

// registryToolsRef is the registry document keyed by tool name
// (data.policycheck.registry.tools, see policycheck registry).
var registryToolsRef = ast.MustParseRef("data.policycheck.registry.tools")

// capabilitiesPackage is the root of the filter packages.
var capabilitiesPackage = ast.MustParseRef("data.policycheck.capabilities")

// nameUse is one string literal compared with, or collected against, a
// name: what it is compared with ("input.call.tool") and the kind of
// name (contract.NamesTool or contract.NamesCapability).
type nameUse struct {
	lit  *ast.Term
	kind string
	what string
}

// nameClass is what the name check knows of a term: a name (kind, with
// what it is), a collection of names (coll: a list, or an object keyed by
// them), an input object or array (path: its path, as in
// contract.InputOf, "[]" ending an array's element), or literal strings (lits: a literal set's or
// array's elements, an object's keys, or those of a rule defined by
// them).
type nameClass struct {
	kind string
	what string
	coll bool
	path string
	lits []*ast.Term
	obj  bool // lits are an object's keys
}

func (c nameClass) name() bool { return c.kind != "" && !c.coll }

// nameWalk finds the name uses of one rule.
type nameWalk struct {
	c     *ast.Compiler
	paths map[string]contract.Path
	vars  map[ast.Var]nameClass
	uses  map[*ast.Term]nameUse
}

// nameFindings compares every string literal an operator rule compares
// with a tool name or a capability id — with ==, != or =, in a literal
// set or array (x in {...}), as a key of a literal set or object, or of
// a rule defined as one, indexed by the name (dangerous[input.call.tool]),
// a key of a collection of names (input.facts.tool_calls["x"], "x" in
// input.facts.loaded), or a hide or prepare_tools value — against the
// registries regs (read from files): one no registry has is a finding
// naming the nearest known name, one that only some lack is a note. The
// names are the input fields the contract marks (contract.Path.Names:
// input.call.tool, input.dispatch.calls[].tool, input.tools[].name and
// .capability, input.facts.loaded, ...), followed through variables
// (name := input.call.tool; some c in input.dispatch.calls; c.tool),
// and the keys of data.policycheck.registry.tools. A name passed to a
// function, or a literal reached through set arithmetic, is not
// followed.
func nameFindings(c *ast.Compiler, operator map[string]bool, regs []*facts.Registry, files []string) (findings, notes []policyFinding) {
	if len(regs) == 0 {
		return nil, nil
	}
	var uses []nameUse
	for _, m := range sortedModules(c) {
		if m.Package.Location == nil || !operator[m.Package.Location.File] {
			continue
		}
		paths := contract.InputOf(m.Package.Path)
		filter := m.Package.Path.HasPrefix(capabilitiesPackage) && len(m.Package.Path) == len(capabilitiesPackage)+1
		rules := m.Package.Path.HasPrefix(rulesPackage) && len(m.Package.Path) == len(rulesPackage)+1
		for _, r := range m.Rules {
			w := &nameWalk{c: c, paths: paths, vars: map[ast.Var]nameClass{}, uses: map[*ast.Term]nameUse{}}
			// Twice: the first pass binds the variables a later
			// expression (or an else branch) may use before its binding.
			w.rule(r)
			w.rule(r)
			name := ruleName(r)
			if (rules && name == "hide") || (filter && name == "prepare_tools") {
				what := strings.TrimPrefix(m.Package.Path.String(), "data.") + "." + name
				for _, t := range contract.HeadValues(r) {
					for _, lit := range contract.LiteralNames(t) {
						w.uses[lit] = nameUse{lit: lit, kind: contract.NamesTool, what: what}
					}
				}
			}
			for _, u := range w.uses {
				uses = append(uses, u)
			}
		}
	}
	sort.Slice(uses, func(i, j int) bool {
		a, b := uses[i].lit.Location, uses[j].lit.Location
		if a == nil || b == nil {
			return b != nil
		}
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Row != b.Row {
			return a.Row < b.Row
		}
		return a.Col < b.Col
	})
	for _, u := range uses {
		f, isNote, ok := nameFinding(u, regs, files)
		switch {
		case !ok:
		case isNote:
			notes = append(notes, f)
		default:
			findings = append(findings, f)
		}
	}
	return findings, notes
}

// nameFinding judges one use against the registries: ok false when every
// registry has the name.
func nameFinding(u nameUse, regs []*facts.Registry, files []string) (f policyFinding, note, ok bool) {
	s := string(u.lit.Value.(ast.String))
	var lacking []string
	known := map[string]bool{}
	for i, r := range regs {
		var names []string
		has := false
		if u.kind == contract.NamesCapability {
			has = r.IsRegistered(s)
			for _, cp := range r.Capabilities() {
				names = append(names, cp.ID)
			}
		} else {
			_, has = r.Tool(s)
			has = has || s == facts.LoadCapabilityTool || s == facts.SearchTool
			names = append(names, r.ToolNames()...)
			names = append(names, facts.LoadCapabilityTool, facts.SearchTool)
		}
		if !has {
			lacking = append(lacking, files[i])
		}
		for _, n := range names {
			known[n] = true
		}
	}
	if len(lacking) == 0 {
		return policyFinding{}, false, false
	}
	code := codeUnknownToolName
	if u.kind == contract.NamesCapability {
		code = codeUnknownCapName
	}
	hides := strings.HasSuffix(u.what, ".hide") || strings.HasSuffix(u.what, ".prepare_tools")
	var msg string
	if hides {
		msg = fmt.Sprintf("%s names %q", u.what, s)
	} else {
		msg = fmt.Sprintf("%q is compared with %s", s, u.what)
	}
	if len(lacking) < len(regs) {
		msg += fmt.Sprintf(", which registry %s does not have (another registry given does)", strings.Join(lacking, ", "))
		if hides {
			msg += ": it hides nothing there"
		}
		return locFinding(code, u.lit.Location, msg), true, true
	}
	msg += fmt.Sprintf(", but no registry (%s) has a %s %q", strings.Join(files, ", "), u.kind, s)
	if hides {
		msg += ": it names nothing"
	} else {
		msg += ": the comparison never holds for a real one"
	}
	if near := nearestName(s, known); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	return locFinding(code, u.lit.Location, msg), false, true
}

// nearestName is the known name closest to s by edit distance, when it
// is close enough to be a likely typo (at most a third of s's length,
// and at least 2, edits away); "" else. Ties go to the first in order.
func nearestName(s string, known map[string]bool) string {
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)
	best, bestD := "", -1
	for _, n := range names {
		if d := levenshtein.ComputeDistance(s, n); bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	if bestD < 0 || bestD > max(2, len(s)/3) {
		return ""
	}
	return best
}

// rule walks every expression of r and its else branches, comprehension
// bodies included, in order.
func (w *nameWalk) rule(r *ast.Rule) {
	for x := r; x != nil; x = x.Else {
		ast.WalkExprs(x, func(e *ast.Expr) bool {
			w.expr(e)
			return false
		})
	}
}

func (w *nameWalk) use(lit *ast.Term, kind, what string) {
	if _, ok := lit.Value.(ast.String); ok && kind != "" {
		w.uses[lit] = nameUse{lit: lit, kind: kind, what: what}
	}
}

// expr reads one expression: its comparisons and memberships, and every
// reference in it.
func (w *nameWalk) expr(e *ast.Expr) {
	ast.WalkTerms(e, func(t *ast.Term) bool {
		if _, ok := t.Value.(ast.Ref); ok {
			w.term(t) // records the keys a reference looks up
		}
		return false
	})
	if !e.IsCall() {
		return
	}
	ops := e.Operands()
	switch e.Operator().String() {
	case ast.Equality.Name, ast.Equal.Name, ast.NotEqual.Name, ast.Assign.Name:
		if len(ops) != 2 {
			return
		}
		a, b := w.term(ops[0]), w.term(ops[1])
		w.bind(ops[0], b)
		w.bind(ops[1], a)
		w.compare(a, ops[1])
		w.compare(b, ops[0])
	case ast.Member.Name:
		if len(ops) != 2 {
			return
		}
		x, coll := w.term(ops[0]), w.term(ops[1])
		switch {
		case x.name() && !coll.obj:
			for _, lit := range coll.lits {
				w.use(lit, x.kind, x.what)
			}
		case coll.coll:
			w.use(ops[0], coll.kind, "an element of "+coll.what)
			w.bind(ops[0], nameClass{kind: coll.kind, what: "an element of " + coll.what})
		case coll.path != "" && w.paths[coll.path].Array():
			w.bind(ops[0], nameClass{path: coll.path + "[]"})
		}
	}
}

// compare records lit, a string literal compared with a term of class c.
func (w *nameWalk) compare(c nameClass, lit *ast.Term) {
	if c.name() {
		w.use(lit, c.kind, c.what)
	}
}

// bind records what a variable is, the first time it is bound.
func (w *nameWalk) bind(t *ast.Term, c nameClass) {
	v, ok := t.Value.(ast.Var)
	if !ok || v.IsWildcard() {
		return
	}
	if _, seen := w.vars[v]; seen {
		return
	}
	if c.kind != "" || c.path != "" || c.lits != nil {
		w.vars[v] = c
	}
}

// term classifies t.
func (w *nameWalk) term(t *ast.Term) nameClass {
	switch v := t.Value.(type) {
	case ast.Var:
		return w.vars[v]
	case ast.Set:
		return nameClass{lits: stringTerms(v.Slice())}
	case *ast.Array:
		var ts []*ast.Term
		for i := range v.Len() {
			ts = append(ts, v.Elem(i))
		}
		return nameClass{lits: stringTerms(ts)}
	case ast.Object:
		return nameClass{lits: stringTerms(v.Keys()), obj: true}
	case ast.Ref:
		return w.ref(v)
	}
	return nameClass{}
}

func stringTerms(ts []*ast.Term) []*ast.Term {
	out := []*ast.Term{}
	for _, t := range ts {
		if _, ok := t.Value.(ast.String); ok {
			out = append(out, t)
		}
	}
	return out
}

// ref classifies a reference, recording the literal keys it looks up in
// a collection of names, and the literal keys of a collection it looks a
// name up in.
func (w *nameWalk) ref(r ast.Ref) nameClass {
	switch {
	case r[0].Equal(ast.InputRootDocument):
		return w.inputRef("", r[1:])
	case r.HasPrefix(registryToolsRef):
		what := "a key of " + registryToolsRef.String()
		if len(r) == len(registryToolsRef) {
			return nameClass{kind: contract.NamesTool, what: what, coll: true}
		}
		k := r[len(registryToolsRef)]
		w.use(k, contract.NamesTool, what)
		w.bind(k, nameClass{kind: contract.NamesTool, what: what})
		return nameClass{}
	}
	if v, ok := r[0].Value.(ast.Var); ok && !r[0].Equal(ast.DefaultRootDocument) {
		c := w.vars[v]
		switch {
		case c.path != "":
			return w.inputRef(c.path, r[1:])
		case c.lits != nil && len(r) == 2:
			w.lookup(c, r[1])
		case c.coll && len(r) == 2:
			w.use(r[1], c.kind, "a key of "+c.what)
			w.bind(r[1], nameClass{kind: c.kind, what: "a key of " + c.what})
		}
		return nameClass{}
	}
	if !r[0].Equal(ast.DefaultRootDocument) {
		return nameClass{}
	}
	// A rule defined by literal strings (dangerous := {"a", "b"}, or
	// dangerous contains "a"), or a key looked up in one.
	if c, ok := w.literalRule(r); ok {
		return c
	}
	if len(r) > 1 {
		if c, ok := w.literalRule(r[:len(r)-1]); ok {
			w.lookup(c, r[len(r)-1])
		}
	}
	return nameClass{}
}

// lookup records the literal keys of c when key, the key looked up in
// it, is a name.
func (w *nameWalk) lookup(c nameClass, key *ast.Term) {
	k := w.term(key)
	if !k.name() {
		return
	}
	for _, lit := range c.lits {
		w.use(lit, k.kind, k.what)
	}
}

// literalRule returns the literal strings of the rules at ref: the
// elements of a literal set or array, or the keys of a literal object,
// each rule (or partial set rule's key) gives. ok is false when ref names
// no rule, or a rule that gives no literal collection.
func (w *nameWalk) literalRule(ref ast.Ref) (nameClass, bool) {
	if !ref.IsGround() {
		return nameClass{}, false
	}
	rules := w.c.GetRulesExact(ref)
	if len(rules) == 0 {
		return nameClass{}, false
	}
	out := nameClass{lits: []*ast.Term{}}
	for _, rule := range rules {
		if len(rule.Head.Args) > 0 || !rule.Head.Ref().IsGround() {
			return nameClass{}, false
		}
		for _, t := range contract.HeadValues(rule) {
			if rule.Head.RuleKind() == ast.MultiValue {
				out.lits = append(out.lits, stringTerms([]*ast.Term{t})...)
				continue
			}
			switch t.Value.(type) {
			case ast.Set, *ast.Array, ast.Object:
				c := w.term(t)
				out.lits = append(out.lits, c.lits...)
				out.obj = out.obj || c.obj
			default:
				return nameClass{}, false
			}
		}
	}
	return out, true
}

// inputRef classifies the input reference below path (an input object's
// or array's, "" for input itself) by rest, recording the
// literal keys it looks up in a collection of names.
func (w *nameWalk) inputRef(path string, rest ast.Ref) nameClass {
	for _, t := range rest {
		p, known := w.paths[path]
		switch {
		case path == "" || strings.HasSuffix(path, "[]"):
			// input, or an element of an array of objects
		case !known:
			return nameClass{}
		case p.Map():
			what := "a key of input." + path
			if p.Names != "" {
				w.use(t, p.Names, what)
				w.bind(t, nameClass{kind: p.Names, what: what})
			}
			path += ".*"
			continue
		case p.Array():
			path += "[]"
			continue
		case p.List():
			what := "an element of input." + path
			if p.Names == "" {
				return nameClass{}
			}
			if _, isStr := t.Value.(ast.String); isStr || p.Set {
				w.use(t, p.Names, what)
				w.bind(t, nameClass{kind: p.Names, what: what})
			}
			return nameClass{kind: p.Names, what: what} // the element
		case !p.Object():
			return nameClass{}
		}
		key, ok := t.Value.(ast.String)
		if !ok {
			return nameClass{}
		}
		if path != "" {
			path += "."
		}
		path += string(key)
	}
	return w.inputPath(path, "input."+path)
}

// inputPath classifies the input field at path.
func (w *nameWalk) inputPath(path, what string) nameClass {
	p, ok := w.paths[path]
	switch {
	case path == "" || strings.HasSuffix(path, "[]"):
		return nameClass{path: path}
	case !ok:
		return nameClass{}
	case p.Array() || p.Object():
		return nameClass{path: path}
	case p.Names != "" && (p.List() || p.Map()):
		return nameClass{kind: p.Names, what: what, coll: true}
	case p.Names != "":
		return nameClass{kind: p.Names, what: what}
	}
	return nameClass{}
}
