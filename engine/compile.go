package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	oloader "github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/contract"
	"github.com/policycheck/policycheck/internal/ground/policydir"
	"github.com/policycheck/policycheck/internal/ground/regoutil"
	"github.com/policycheck/policycheck/policies"
)

// PolicyError is a policy set that does not load or compile. Each entry
// names a file and, where known, row and column.
type PolicyError struct {
	Errors []PolicyProblem
}

// PolicyProblem is one finding about a policy set.
type PolicyProblem struct {
	Code    string `json:"code"`
	File    string `json:"file,omitempty"`
	Row     int    `json:"row,omitempty"`
	Col     int    `json:"col,omitempty"`
	Message string `json:"message"`
}

func (p PolicyProblem) String() string {
	loc := p.File
	if p.Row > 0 {
		loc = fmt.Sprintf("%s:%d:%d", p.File, p.Row, p.Col)
	}
	if loc == "" {
		return p.Code + ": " + p.Message
	}
	return loc + ": " + p.Code + ": " + p.Message
}

// Error writes each problem on a line of its own ("policy: " and the
// problem), so that a policy set with many problems reads as a list.
func (e *PolicyError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, p := range e.Errors {
		parts[i] = "policy: " + p.String()
	}
	return strings.Join(parts, "\n")
}

// Source is one policy module (Rego source text) with the file it came from.
type Source struct {
	File string
	Text string
}

// policySet is what loading produced before compilation.
type policySet struct {
	modules map[string]*ast.Module // by file name
	data    map[string]any         // documents merged at the root of data
	rev     string
	shipped map[string]bool // the shipped defaults' module names
}

func parseModule(file, text string) (*ast.Module, error) {
	m, err := ast.ParseModuleWithOpts(file, text, ast.ParserOptions{ProcessAnnotation: true, RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, astErrors("parse_error", err)
	}
	return m, nil
}

func astErrors(code string, err error) *PolicyError {
	var out []PolicyProblem
	if errs, ok := err.(ast.Errors); ok {
		for _, e := range errs {
			p := PolicyProblem{Code: e.Code, Message: e.Message}
			if e.Location != nil {
				p.File, p.Row, p.Col = e.Location.File, e.Location.Row, e.Location.Col
			}
			out = append(out, p)
		}
	} else {
		out = append(out, PolicyProblem{Code: code, Message: err.Error()})
	}
	return &PolicyError{Errors: out}
}

// isTestFile reports whether a Rego file is a unit test, which the engine
// never loads.
func isTestFile(name string) bool { return strings.HasSuffix(name, "_test.rego") }

func strayDataProblem(dir string, stray []PolicyProblem) PolicyProblem {
	files := make([]string, len(stray))
	for i, s := range stray {
		files[i] = s.File
	}
	return PolicyProblem{Code: "load_error", File: dir, Message: policydir.StraySummary(dir, files)}
}

// loadPolicies gathers the shipped defaults (unless disabled), in-memory
// sources and the files, directories and bundles at paths.
func loadPolicies(defaults bool, fsys []fs.FS, sources []Source, paths []string) (*policySet, error) {
	ps := &policySet{modules: map[string]*ast.Module{}, data: map[string]any{}, shipped: map[string]bool{}}
	add := func(file, text string) error {
		if _, dup := ps.modules[file]; dup {
			return &PolicyError{Errors: []PolicyProblem{{Code: "load_error", File: file, Message: "module loaded twice"}}}
		}
		m, err := parseModule(file, text)
		if err != nil {
			return err
		}
		ps.modules[file] = m
		return nil
	}
	var all []fs.FS
	if defaults {
		all = append(all, policies.FS())
	}
	all = append(all, fsys...)
	for i, f := range all {
		prefix := ""
		if defaults && i == 0 {
			prefix = "policies/"
		}
		err := fs.WalkDir(f, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || path.Ext(p) != ".rego" || isTestFile(p) {
				return nil
			}
			b, err := fs.ReadFile(f, p)
			if err != nil {
				return err
			}
			if prefix != "" {
				ps.shipped[prefix+p] = true
			}
			return add(prefix+p, string(b))
		})
		if err != nil {
			return nil, err
		}
	}
	for _, s := range sources {
		if err := add(s.File, s.Text); err != nil {
			return nil, err
		}
	}
	for _, p := range paths {
		if err := loadPath(ps, p); err != nil {
			return nil, err
		}
	}
	ps.rev = revision(ps)
	return ps, nil
}

// loadPath loads a .rego file, a directory of policies and data files, or
// an OPA bundle (a .tar.gz file, or a directory holding a .manifest).
func loadPath(ps *policySet, p string) error {
	info, err := os.Stat(p)
	if err != nil {
		return &PolicyError{Errors: []PolicyProblem{{Code: "load_error", File: p, Message: err.Error()}}}
	}
	_, manifestErr := os.Stat(filepath.Join(p, ".manifest"))
	if strings.HasSuffix(p, ".tar.gz") || (info.IsDir() && manifestErr == nil) {
		b, err := oloader.NewFileLoader().WithProcessAnnotation(true).WithRegoVersion(ast.RegoV1).AsBundle(p)
		if err != nil {
			return &PolicyError{Errors: []PolicyProblem{{Code: "bundle_error", File: p, Message: err.Error()}}}
		}
		return addBundle(ps, p, b)
	}
	// Data files follow the OPA bundle convention, as in a bundle and in
	// policycheck test: under a directory, only data.json, data.yaml and
	// data.yml are data. Any other JSON or YAML file there is refused
	// rather than skipped or loaded: skipped, a rule reading it would
	// find nothing; loaded, tests and bundles would not see what eval
	// sees. A file named as the path itself is loaded, as opa eval -d.
	var stray []PolicyProblem
	res, err := oloader.NewFileLoader().WithProcessAnnotation(true).WithRegoVersion(ast.RegoV1).
		Filtered([]string{p}, func(abspath string, info fs.FileInfo, depth int) bool {
			if depth > 0 && strings.HasPrefix(info.Name(), ".") {
				return true // hidden (see PolicyPaths)
			}
			if info.IsDir() {
				return false
			}
			if depth > 0 && policydir.Stray(info.Name()) {
				stray = append(stray, PolicyProblem{Code: "load_error", File: abspath, Message: policydir.StrayMessage})
				return true
			}
			return isTestFile(info.Name())
		})
	if len(stray) > 1 {
		return &PolicyError{Errors: []PolicyProblem{strayDataProblem(p, stray)}}
	}
	if len(stray) > 0 {
		return &PolicyError{Errors: stray}
	}
	if err != nil {
		return astErrorsOrLoad(p, err)
	}
	// Modules are named by the path as given (RegoFile.Name): OPA keys
	// them with the leading "/" of an absolute path trimmed.
	names := make([]string, 0, len(res.Modules))
	byName := make(map[string]*oloader.RegoFile, len(res.Modules))
	for _, rf := range res.Modules {
		names = append(names, rf.Name)
		byName[rf.Name] = rf
	}
	sort.Strings(names)
	for _, name := range names {
		if _, dup := ps.modules[name]; dup {
			return &PolicyError{Errors: []PolicyProblem{{Code: "load_error", File: name, Message: "module loaded twice"}}}
		}
		ps.modules[name] = byName[name].Parsed
	}
	mergeData(ps.data, res.Documents)
	return nil
}

func astErrorsOrLoad(p string, err error) error {
	if errs, ok := err.(oloader.Errors); ok {
		out := &PolicyError{}
		for _, e := range errs {
			if ae, ok := e.(*ast.Error); ok {
				pp := PolicyProblem{Code: ae.Code, Message: ae.Message}
				if ae.Location != nil {
					pp.File, pp.Row, pp.Col = ae.Location.File, ae.Location.Row, ae.Location.Col
				}
				out.Errors = append(out.Errors, pp)
				continue
			}
			out.Errors = append(out.Errors, PolicyProblem{Code: "load_error", File: p, Message: e.Error()})
		}
		return out
	}
	return &PolicyError{Errors: []PolicyProblem{{Code: "load_error", File: p, Message: err.Error()}}}
}

func addBundle(ps *policySet, p string, b *bundle.Bundle) error {
	for _, mf := range b.Modules {
		name := mf.Path
		if _, dup := ps.modules[name]; dup {
			return &PolicyError{Errors: []PolicyProblem{{Code: "load_error", File: name, Message: "module loaded twice"}}}
		}
		if isTestFile(name) {
			continue
		}
		m := mf.Parsed
		if m == nil {
			var err error
			if m, err = parseModule(name, string(mf.Raw)); err != nil {
				return err
			}
		}
		ps.modules[name] = m
	}
	mergeData(ps.data, b.Data)
	return nil
}

func mergeData(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				mergeData(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

func revision(ps *policySet) string {
	h := sha256.New()
	names := make([]string, 0, len(ps.modules))
	for n := range ps.modules {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%s\x00", n, ps.modules[n].String())
	}
	fmt.Fprintf(h, "%v", ast.MustInterfaceToValue(ps.data))
	return hex.EncodeToString(h.Sum(nil))
}

// filter is one capability's compiled prepare_tools.
type filter struct {
	capability string
	file       string
	at         string // file:row:col of its (first) prepare_tools rule, for reasons
	query      rego.PreparedEvalQuery
}

const filterRoot = "policycheck.capabilities"

// checkFilters rejects filters that can never be cached safely: one that
// reaches a nondeterministic built-in (docs/writing-filters.md), or a filter
// package for a capability the registry lacks.
func checkFilters(c *ast.Compiler, reg *facts.Registry) []PolicyProblem {
	var out []PolicyProblem
	for _, m := range c.Modules {
		id := regoutil.CapabilityOf(m.Package.Path)
		if id == "" {
			continue
		}
		if reg != nil && !reg.IsRegistered(id) {
			out = append(out, PolicyProblem{Code: "unknown_capability", File: m.Package.Location.File,
				Row: m.Package.Location.Row, Col: m.Package.Location.Col,
				Message: fmt.Sprintf("filter package for capability %q, which the registry does not have", id)})
		}
	}
	for _, rule := range regoutil.FilterRules(c) {
		if len(rule.Head.Args) > 0 {
			continue // a function: refused by the contract
		}
		for _, call := range regoutil.NondeterministicCalls(c, rule, nil) {
			p := PolicyProblem{Code: "nondeterministic_builtin",
				Message: fmt.Sprintf("filter %s reaches the nondeterministic built-in %s: filter results are cached, so they must be a pure function of their input", rule.Module.Package.Path, call.Builtin)}
			if loc := call.Expr.Location; loc != nil {
				p.File, p.Row, p.Col = loc.File, loc.Row, loc.Col
			}
			out = append(out, p)
		}
	}
	return out
}

// pure reports whether no rule of the policy set calls a nondeterministic
// built-in.
func pure(c *ast.Compiler) bool {
	seen := map[*ast.Rule]bool{}
	for _, m := range c.Modules {
		for _, r := range m.Rules {
			if len(regoutil.NondeterministicCalls(c, r, seen)) > 0 {
				return false
			}
		}
	}
	return true
}

// compiled is the immutable result of compiling a policy set against a
// registry.
type compiled struct {
	compiler *ast.Compiler
	store    storage.Store
	decision rego.PreparedEvalQuery
	// hideQuery reads every rules package's hide set (explanations only).
	hideQuery rego.PreparedEvalQuery
	filters   map[string]*filter
	rev       string
	// pure is true when no rule reaches a nondeterministic built-in, so
	// the decision query's result is a function of its input (the
	// decision memo depends on it).
	pure bool
	// rules locates each entry-point rule (contract.Locations): a value
	// the gate flags at run time is reported at its rule.
	rules contract.Locations
	// query is the rule the decision evaluates (contract.EntryPoint):
	// decision, or decision_from_sets when the policy set defines it.
	query string
	// opts are the optional facts the policies may read (factOptions):
	// a decision builds those and no others.
	opts facts.Options
	// labels are the label fields of the calls the policies may read
	// (labelOptions); opts includes the facts they are built from.
	labels labelReads
	// perCall confines a policy error to the call whose rules raised it
	// (percall.go); nil when the policy set's verdicts are not the
	// shipped gate's.
	perCall *perCall
	// unindexed is true when a rule calls a built-in that OPA's rule index
	// answers instead of evaluating (affixRuleIndexed): the policy set is
	// then evaluated with the index off (evalWith).
	unindexed bool
}

// evalWith is the options of an evaluation of input: the input, and the
// rule index off when the policy set calls a built-in it would answer
// (compiled.unindexed).
func (c *compiled) evalWith(input ast.Value) []rego.EvalOption {
	if c.unindexed {
		return []rego.EvalOption{rego.EvalParsedInput(input), rego.EvalRuleIndexing(false)}
	}
	return []rego.EvalOption{rego.EvalParsedInput(input)}
}

// affixRuleIndexed reports whether a rule of c calls startswith,
// endswith, strings.any_prefix_match, strings.any_suffix_match or
// glob.match in the form OPA's rule index answers (no captured result).
// The index answers such a call by matching the value against the
// rule's string, so a value that is not a string (the model's to choose:
// "repo": 42) leaves the rule out without the type error strict built-in
// errors would raise: a deny rule reading a call's arguments this way
// was switched off by a wrong type. With the index off, the error is
// raised and fails the call closed (percall.go). OPA indexes equality
// and membership too, but those never raise an error, so the index
// answers them as evaluation would.
func affixRuleIndexed(c *ast.Compiler) bool {
	indexed := []struct {
		ref      ast.Ref
		operands int
	}{
		{ast.StartsWith.Ref(), 2},
		{ast.EndsWith.Ref(), 2},
		{ast.AnyPrefixMatch.Ref(), 2},
		{ast.AnySuffixMatch.Ref(), 2},
		{ast.GlobMatch.Ref(), 3},
	}
	found := false
	for _, m := range c.Modules {
		ast.WalkExprs(m, func(e *ast.Expr) bool {
			if found || !e.IsCall() {
				return found
			}
			op := e.Operator()
			for _, ix := range indexed {
				if op.Equal(ix.ref) && len(e.Operands()) == ix.operands {
					found = true
					return true
				}
			}
			return false
		})
		if found {
			return true
		}
	}
	return false
}

// prepareStrict prepares query over the compiled policy set with strict
// built-in errors (a type error is an error, not an undefined rule), its
// result kept as AST: the decision, filter and per-call readers take the
// sets straight off it.
func prepareStrict(ctx context.Context, c *ast.Compiler, store storage.Store, query func(*rego.Rego)) (rego.PreparedEvalQuery, error) {
	return rego.New(
		query,
		rego.GenerateJSON(func(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }),
		rego.Compiler(c),
		rego.Store(store),
		rego.StrictBuiltinErrors(true),
	).PrepareForEval(ctx)
}

// decisionQuery is the policy set's entry point; the engine evaluates
// contract.EntryPoint (compiled.query), which is it or the shipped
// policy's decision_from_sets.
const decisionQuery = "data.policycheck.availability.decision"

// ruleKinds is data.policycheck.rule_kinds: the names of the entry-point
// rules (hide, deny, require_approval) that some policycheck.rules
// package of the policy set defines, as the contract located them. The
// gate skips evaluating a kind no package defines (per call, that
// evaluation costs even when nothing answers); without this document, as
// under stock opa test, it evaluates every kind.
func ruleKinds(locs contract.Locations) *ast.Term {
	prefix := ast.MustParseRef("data.policycheck.rules")
	var kinds []*ast.Term
	seen := map[string]bool{}
	for key := range locs {
		ref := ast.MustParseRef(key)
		if !ref.HasPrefix(prefix) || len(ref) < 2 {
			continue
		}
		name, ok := ref[len(ref)-1].Value.(ast.String)
		if ok && !seen[string(name)] {
			seen[string(name)] = true
			kinds = append(kinds, ast.StringTerm(string(name)))
		}
	}
	return ast.SetTerm(kinds...)
}

func compile(ctx context.Context, ps *policySet, reg *facts.Registry, regData ast.Value) (*compiled, error) {
	c := ast.NewCompiler().WithStrict(true).WithUseTypeCheckAnnotations(true)
	c.Compile(ps.modules)
	if c.Failed() {
		return nil, astErrors("compile_error", c.Errors)
	}
	// The operator contract first: a rule the engine would not read as
	// written is refused before anything else is said about it.
	shapes, locs := contract.Check(c)
	probs := make([]PolicyProblem, 0, len(shapes))
	for _, p := range shapes {
		probs = append(probs, PolicyProblem{Code: p.Code, File: p.File, Row: p.Row, Col: p.Col, Message: p.Message})
	}
	probs = append(probs, checkFilters(c, reg)...)
	if len(probs) > 0 {
		return nil, &PolicyError{Errors: probs}
	}
	hasDecision := false
	for _, m := range c.Modules {
		if m.Package.Path.String() == "data.policycheck.availability" {
			hasDecision = true
		}
	}
	if !hasDecision {
		return nil, &PolicyError{Errors: []PolicyProblem{{Code: "missing_entrypoint",
			Message: "no policy defines package policycheck.availability (its decision rule is the engine's entrypoint); load the shipped defaults or your own"}}}
	}
	store := inmem.NewWithOpts(inmem.OptRoundTripOnWrite(false), inmem.OptReturnASTValuesOnRead(true))
	root := ast.MustInterfaceToValue(ps.data).(ast.Object)
	pc := root.Get(ast.StringTerm("policycheck"))
	var pcObj ast.Object
	if pc != nil {
		if o, isObj := pc.Value.(ast.Object); isObj {
			pcObj = o.Copy()
		}
	}
	if pcObj == nil {
		pcObj = ast.NewObject()
	}
	pcObj.Insert(ast.StringTerm("registry"), ast.NewTerm(regData))
	pcObj.Insert(ast.StringTerm("rule_kinds"), ruleKinds(locs))
	// The log-only operator packages, read by the gate (gate.log_only).
	pcObj.Insert(ast.StringTerm("log_only"), setOf(contract.LogOnly(c.Modules)))
	root.Insert(ast.StringTerm("policycheck"), ast.NewTerm(pcObj))
	if err := storage.WriteOne(ctx, store, storage.AddOp, storage.RootPath, root); err != nil {
		return nil, fmt.Errorf("engine: write data: %w", err)
	}
	out := &compiled{compiler: c, store: store, filters: map[string]*filter{}, rev: ps.rev, pure: pure(c), rules: locs,
		query: "data." + contract.EntryPoint(c), opts: factOptions(c), unindexed: affixRuleIndexed(c)}
	out.labels = labelOptions(c, &out.opts)
	var err error
	out.decision, err = prepareStrict(ctx, c, store, rego.Query(out.query))
	if err != nil {
		return nil, fmt.Errorf("engine: prepare decision: %w", err)
	}
	if out.perCall, err = preparePerCall(ctx, c, store, ps, out.query); err != nil {
		return nil, err
	}
	// Which enforced rules package hides what, for explanations (see
	// removal.hiders); the engine writes data.policycheck.log_only above.
	out.hideQuery, err = rego.New(
		rego.Query(`x := {pkg: h | some pkg; h := data.policycheck.rules[pkg].hide; not pkg in data.policycheck.log_only}`),
		rego.Compiler(c),
		rego.Store(store),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("engine: prepare the hide query: %w", err)
	}
	for _, r := range regoutil.FilterRules(c) {
		id := regoutil.CapabilityOf(r.Module.Package.Path)
		if _, done := out.filters[id]; done {
			continue
		}
		q := r.Module.Package.Path.Append(ast.StringTerm("prepare_tools"))
		// x is the filter's result, kept as AST (evalFilter reads the
		// set straight off it).
		body := ast.NewBody(ast.Assign.Expr(ast.VarTerm("x"), ast.NewTerm(q)))
		pq, err := prepareStrict(ctx, c, store, rego.ParsedQuery(body))
		if err != nil {
			return nil, fmt.Errorf("engine: prepare filter %q: %w", id, err)
		}
		out.filters[id] = &filter{capability: id, file: r.Location.File, query: pq,
			at: fmt.Sprintf("%s:%d:%d", r.Location.File, r.Location.Row, r.Location.Col)}
	}
	return out, nil
}
