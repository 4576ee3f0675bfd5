// Package regomutant breaks the rules of Rego modules one small change at
// a time, from their AST, and runs Rego tests against each broken copy (a
// mutant): the mutation check of the shipped gate (policies/lib,
// policies/availability). A mutant the tests still pass (a survivor)
// either changes nothing observable (an equivalent mutant, listed with the
// reason by its caller) or shows a behaviour no test pins.
//
// The mutants come from the AST, not from text patterns, so they follow
// the policies as they are edited: every rule definition and every else
// branch gets
//
//   - drop-expr: one body expression removed (a lone one becomes `true`);
//   - negate: `not` added to, or removed from, one body expression;
//   - drop-with: the `with` modifiers of one expression removed;
//   - set-op: one `&`, `|` or `-` replaced by each of the other two;
//   - compare: one comparison replaced by its negation and by its boundary
//     neighbour (`>` by `<=` and `>=`, `==` by `!=`, ...);
//   - swap-else: one branch and the else branch after it exchanged;
//   - drop-else: one else branch removed;
//   - drop-rule: one definition of a rule with several, or a default, removed.
//
// A mutant that no longer compiles is not a mutant of the behaviour: the
// runner reports it as stillborn and leaves it out of the kill count.
package regomutant

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/format"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// Mutant is one small change to one module.
type Mutant struct {
	File   string // the module's file name, as given to Generate
	Rule   string // the rule changed, with its else branch: "verdict", "available[else 1]"
	Op     string // the mutation operator (see the package doc)
	Detail string // what changed, in Rego: `drop "count(removed) == 0"`
	Row    int    // the changed rule's row in the original module
	Source string // the mutated module, formatted
}

// ID names the mutant independently of rows, so that a list of equivalent
// mutants survives edits elsewhere in the file: "gate.rego available[else
// 1]: drop-expr count(removed) == 0". Two mutants that would share an ID
// get "#2", "#3" appended in module order.
func (m Mutant) ID() string {
	return fmt.Sprintf("%s %s: %s %s", path.Base(m.File), m.Rule, m.Op, m.Detail)
}

// site is one place a mutation applies, in a freshly parsed module.
type site struct {
	rule, op, detail string
	row              int
	apply            func()
}

// Generate returns every mutant of the module src (file names it), in
// module order.
func Generate(file, src string) ([]Mutant, error) {
	mod, err := parse(file, src)
	if err != nil {
		return nil, err
	}
	n := len(sites(mod))
	out := make([]Mutant, 0, n)
	seen := map[string]int{}
	for i := range n {
		// Each mutant starts from a fresh parse: sites are enumerated in
		// the same order on every parse of the same text.
		fresh, err := parse(file, src)
		if err != nil {
			return nil, err
		}
		s := sites(fresh)[i]
		s.apply()
		text, err := format.AstWithOpts(fresh, format.Opts{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("%s: formatting the mutant %s %s %s: %w", file, s.rule, s.op, s.detail, err)
		}
		m := Mutant{File: file, Rule: s.rule, Op: s.op, Detail: s.detail, Row: s.row, Source: string(text)}
		id := m.ID()
		seen[id]++
		if seen[id] > 1 {
			m.Detail += fmt.Sprintf(" #%d", seen[id])
		}
		out = append(out, m)
	}
	return out, nil
}

func parse(file, src string) (*ast.Module, error) {
	return ast.ParseModuleWithOpts(file, src, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
}

// sites enumerates the mutation sites of mod, deterministically.
func sites(mod *ast.Module) []site {
	var out []site
	count := map[string]int{}
	for _, r := range mod.Rules {
		count[ruleName(r)]++
	}
	for ri, r := range mod.Rules {
		name := ruleName(r)
		if r.Default || count[name] > 1 {
			what := "definition"
			if r.Default {
				what = "default"
			}
			out = append(out, site{rule: name, op: "drop-rule", detail: fmt.Sprintf("%s %s", what, oneLine(r.Head.String())), row: r.Location.Row,
				apply: func() { mod.Rules = append(mod.Rules[:ri:ri], mod.Rules[ri+1:]...) }})
		}
		depth := 0
		for b := r; b != nil; b = b.Else {
			label := name
			if depth > 0 {
				label = fmt.Sprintf("%s[else %d]", name, depth)
			}
			out = append(out, branchSites(label, r.Location.Row, b)...)
			if b.Else != nil {
				out = append(out, site{rule: label, op: "swap-else", detail: "with the next branch", row: r.Location.Row,
					apply: func() {
						b.Head.Value, b.Else.Head.Value = b.Else.Head.Value, b.Head.Value
						b.Body, b.Else.Body = b.Else.Body, b.Body
					}})
				out = append(out, site{rule: label, op: "drop-else", detail: "the next branch", row: r.Location.Row,
					apply: func() { b.Else = b.Else.Else }})
			}
			depth++
		}
	}
	return out
}

func ruleName(r *ast.Rule) string {
	return r.Head.Ref().String()
}

// branchSites are the sites inside one branch of a rule: its body
// expressions and every operator call in its head value and body
// (comprehensions included).
func branchSites(label string, row int, b *ast.Rule) []site {
	var out []site
	// A rule without a body has the body `true`: nothing to drop or negate.
	synthetic := len(b.Body) == 1 && b.Body[0].Equal(ast.NewExpr(ast.BooleanTerm(true)))
	if !synthetic {
		for i, e := range b.Body {
			text := oneLine(e.String())
			out = append(out, site{rule: label, op: "drop-expr", detail: text, row: row, apply: func() {
				if len(b.Body) == 1 {
					b.Body = ast.NewBody(ast.NewExpr(ast.BooleanTerm(true)))
					return
				}
				b.Body = append(b.Body[:i:i], b.Body[i+1:]...)
			}})
			if !e.IsAssignment() && !e.IsEquality() && !e.IsSome() && !e.IsEvery() {
				out = append(out, site{rule: label, op: "negate", detail: text, row: row, apply: func() { e.Negated = !e.Negated }})
			}
			if len(e.With) > 0 {
				out = append(out, site{rule: label, op: "drop-with", detail: text, row: row, apply: func() { e.With = nil }})
			}
		}
	}
	var ops []*ast.Term
	collect := func(x any) {
		ast.WalkExprs(x, func(e *ast.Expr) bool {
			if e.IsCall() {
				ops = append(ops, e.OperatorTerm())
			}
			return false
		})
		ast.WalkTerms(x, func(t *ast.Term) bool {
			if c, ok := t.Value.(ast.Call); ok {
				ops = append(ops, c[0])
			}
			return false
		})
	}
	if b.Head.Value != nil {
		collect(b.Head.Value)
	}
	if !synthetic {
		collect(b.Body)
	}
	for _, op := range ops {
		ref, ok := op.Value.(ast.Ref)
		if !ok {
			continue
		}
		for _, repl := range replacements[ref.String()] {
			from, to := symbols[ref.String()], symbols[repl.String()]
			kind := "compare"
			if setOps[ref.String()] {
				kind = "set-op"
			}
			out = append(out, site{rule: label, op: kind, detail: fmt.Sprintf("%s -> %s", from, to), row: row,
				apply: func() { op.Value = repl.Copy() }})
		}
	}
	return out
}

var setOps = map[string]bool{ast.And.Ref().String(): true, ast.Or.Ref().String(): true, ast.Minus.Ref().String(): true}

var symbols = map[string]string{
	ast.And.Ref().String(): "&", ast.Or.Ref().String(): "|", ast.Minus.Ref().String(): "-",
	ast.Equal.Ref().String(): "==", ast.NotEqual.Ref().String(): "!=",
	ast.GreaterThan.Ref().String(): ">", ast.GreaterThanEq.Ref().String(): ">=",
	ast.LessThan.Ref().String(): "<", ast.LessThanEq.Ref().String(): "<=",
}

// replacements maps an operator to what it is replaced by.
var replacements = map[string][]ast.Ref{
	ast.And.Ref().String():           {ast.Or.Ref(), ast.Minus.Ref()},
	ast.Or.Ref().String():            {ast.And.Ref(), ast.Minus.Ref()},
	ast.Minus.Ref().String():         {ast.And.Ref(), ast.Or.Ref()},
	ast.Equal.Ref().String():         {ast.NotEqual.Ref()},
	ast.NotEqual.Ref().String():      {ast.Equal.Ref()},
	ast.GreaterThan.Ref().String():   {ast.LessThanEq.Ref(), ast.GreaterThanEq.Ref()},
	ast.GreaterThanEq.Ref().String(): {ast.LessThan.Ref(), ast.GreaterThan.Ref()},
	ast.LessThan.Ref().String():      {ast.GreaterThanEq.Ref(), ast.LessThanEq.Ref()},
	ast.LessThanEq.Ref().String():    {ast.GreaterThan.Ref(), ast.LessThan.Ref()},
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Outcome is what the Rego tests made of one mutant.
type Outcome struct {
	Mutant    Mutant
	Stillborn string // the compile error, when the mutant does not compile
	KilledBy  string // the first failing test ("package.test_name"), empty for a survivor
	Tests     int    // the tests that ran
}

// Survived reports whether the mutant compiled and every test passed.
func (o Outcome) Survived() bool { return o.Stillborn == "" && o.KilledBy == "" }

// Run runs the Rego tests of modules (tests and policies, keyed by file
// name) with the data in store once per mutant, the mutant's source in
// place of its file. It stops a mutant's run at its first failing test.
// Mutants run side by side, GOMAXPROCS at a time (each compiles the
// modules on its own, which a mutant's tests running in parallel leave to
// one core); the outcomes are in the order of mutants.
func Run(ctx context.Context, modules map[string]*ast.Module, store storage.Store, mutants []Mutant) ([]Outcome, error) {
	for _, m := range mutants {
		if _, ok := modules[m.File]; !ok {
			return nil, fmt.Errorf("mutant of %s: no module of that name is loaded", m.File)
		}
	}
	out := make([]Outcome, len(mutants))
	errs := make([]error, len(mutants))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(mutants)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i], errs[i] = runMutant(ctx, modules, store, mutants[i])
			}
		}()
	}
	for i := range mutants {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// runMutant runs the tests with m in place of its file.
func runMutant(ctx context.Context, modules map[string]*ast.Module, store storage.Store, m Mutant) (Outcome, error) {
	mod, err := parse(m.File, m.Source)
	if err != nil {
		return Outcome{Mutant: m, Stillborn: err.Error()}, nil
	}
	set := make(map[string]*ast.Module, len(modules))
	for k, v := range modules {
		set[k] = v
	}
	set[m.File] = mod
	o, err := runOne(ctx, set, store)
	if err != nil {
		return Outcome{}, fmt.Errorf("mutant %s: %w", m.ID(), err)
	}
	o.Mutant = m
	return o, nil
}

func runOne(ctx context.Context, modules map[string]*ast.Module, store storage.Store) (Outcome, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return Outcome{}, err
	}
	defer store.Abort(ctx, txn)
	// The runner compiles the modules itself: it adds the compiler stages
	// that let a parameterised test (test_x[note]) fail case by case.
	ch, err := tester.NewRunner().
		SetCompiler(ast.NewCompiler().WithUseTypeCheckAnnotations(true)).
		SetModules(modules).
		SetStore(store).
		SetTimeout(testTimeout).
		RunTests(ctx, txn)
	if err != nil {
		var errs ast.Errors
		if errors.As(err, &errs) {
			return Outcome{Stillborn: oneLine(errs.Error())}, nil
		}
		return Outcome{}, err
	}
	var o Outcome
	for r := range ch {
		o.Tests++
		if o.KilledBy == "" && !r.Pass() && !r.Skip {
			o.KilledBy = strings.TrimPrefix(r.Package, "data.") + "." + r.Name
			if r.Error != nil && errors.Is(r.Error, context.DeadlineExceeded) || topdown.IsCancel(r.Error) {
				o.KilledBy += " (timed out)"
			}
			cancel()
		}
	}
	return o, nil
}

// testTimeout bounds one test of one mutant: a mutant that makes
// evaluation blow up (a dropped condition can turn a lookup into a cross
// product) is killed by its first timed-out test instead of holding the
// run for every test's full time.
const testTimeout = 30 * time.Second

// LoadTests loads the modules and data files under paths as `opa test`
// and `policycheck test` do (data files by the bundle convention:
// data.json, data.yaml).
func LoadTests(paths []string) (map[string]*ast.Module, storage.Store, error) {
	filter := func(_ string, info fs.FileInfo, _ int) bool {
		if info.IsDir() {
			return false
		}
		name := info.Name()
		switch ext := strings.ToLower(path.Ext(name)); ext {
		case ".json", ".yaml", ".yml":
			return strings.TrimSuffix(name, ext) != "data"
		}
		return false
	}
	return tester.LoadWithParserOptions(paths, filter, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
}

// Compiles reports whether mutant m compiles with the other modules (keyed
// by file name, as m.File).
func Compiles(modules map[string]*ast.Module, m Mutant) bool {
	mod, err := parse(m.File, m.Source)
	if err != nil {
		return false
	}
	set := make(map[string]*ast.Module, len(modules))
	for k, v := range modules {
		set[k] = v
	}
	set[m.File] = mod
	c := ast.NewCompiler().WithUseTypeCheckAnnotations(true)
	c.Compile(set)
	return !c.Failed()
}
