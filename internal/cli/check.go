package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	oloader "github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"
	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/contract"
	"github.com/policycheck/policycheck/internal/ground/policydir"
	"github.com/policycheck/policycheck/internal/ground/printable"
	"github.com/policycheck/policycheck/internal/ground/regoutil"
	"github.com/policycheck/policycheck/internal/output/render"
	"github.com/policycheck/policycheck/loader"
)

// Finding codes of check, beside OPA's own (rego_parse_error,
// rego_compile_error, rego_type_error, …) and the engine's
// (unknown_capability, nondeterministic_builtin, missing_entrypoint).
const (
	codeRegistry       = "registry_error"
	codeFilterNotSet   = "prepare_tools_not_a_set"
	codePackagePlace   = "package_outside_policycheck"
	codeUnknownCap     = "unknown_capability"
	codeNondeterminism = "nondeterministic_builtin"
	// codeMemoOff is a note, not a finding: an operator rule outside the
	// filters may call a nondeterministic built-in, which turns the
	// decision memo off.
	codeMemoOff = "decision_memo_off"
	// codeNoPolicies: a PATH that holds no policy file.
	codeNoPolicies = "no_policy_files"
	// codeAlwaysErrors: a rule that depends on nothing a request sends
	// and fails whenever it is evaluated.
	codeAlwaysErrors = "rule_always_errors"
	// codeArgsNotRequired (checkargs.go): a deny or require_approval rule
	// reads a call argument the registry's schemas do not require.
)

type checkFlags struct {
	registries []string
	format     string
	noDefaults bool
	strict     bool
}

func newCheckCmd() *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:   "check PATH... [--registry R]... [--strict] [--format pretty|json|junit]",
		Short: "Validate a policy set and a registry before deployment",
		Long: `check parses and compiles the policies under PATH (files, directories or bundle .tar.gz archives)
with the shipped policies, in strict mode, and validates the registry. In directories and bundles,
*_test.rego files are skipped; a test file named on the command line is parsed and compiled with
the policies, but, as the engine never loads tests, not checked as a policy. It reports, each with
its location:

  * syntax errors and compile errors (file:row:col), strict-mode errors included (unused variables and
    imports, shadowed or deprecated built-ins, …);
  * a rule the engine reads (deny, hide, prepare_tools, a replaced decision) in a shape the operator
    contract does not accept, or where it is never read (rule_shape, rule_place): the same check the
    engine makes at every load (docs/writing-filters.md, "The operator contract");
  * a PATH that holds no policy file;
  * a filter package (policycheck.capabilities.<id>) for a capability the registry does not have;
  * a prepare_tools that is not a set of strings: statically from its type, or, when its type is open,
    by evaluating it with the registry's tools and an empty context;
  * a filter that reaches a nondeterministic built-in (http.send, time.now_ns, rand.*, …);
  * a package outside policycheck.rules.*, policycheck.capabilities.*, policycheck.availability and
    policycheck.lib* that no policy imports (eval and serve warn about it too);
  * a tool name or capability id no registry given has, as a string literal a rule compares with a
    name (unknown_tool_name, unknown_capability_name), with the nearest known name ("did you mean
    delete_repo?"): input.call.tool == "delete_repos" never holds, so the deny it guards never fires.
    The names are the input fields that hold them (input.call.tool, input.dispatch.calls[].tool,
    input.tools[].name and .capability, input.facts.loaded, input.facts.active_capabilities, the keys
    of input.facts.tool_calls and of data.policycheck.registry.tools, ...), followed through variables;
    the literals are those compared with ==, != or =, members of a literal set or array (x in {...}),
    keys of a literal set or object, or of a rule defined as one, indexed by a name
    (dangerous[input.call.tool]), and hide and prepare_tools values. A name one registry has and
    another lacks is a note. A name passed to a function or reached by set arithmetic is not followed;
  * a rule that reads neither input nor data and fails whenever it is evaluated: complete rules that
    always conflict (p := "a" and p := "b"), a built-in call that always errors (1 / 0);
  * a registry that breaks its schema or the rules a schema cannot express (file and JSON pointer),
    reserved tool names (load_capability, search_tools) and tool parameters_json_schemas that do not
    compile among them;
  * a deny or require_approval rule that reads input.call.args.<field> (in its body or its message)
    for a tool with no parameters_json_schema, or one that does not require <field> (args_not_required):
    when the model leaves the field out the rule is undefined and does not apply. The tools a rule
    applies to are those its body compares input.call.tool with (input.call.tool == "x", or in a literal
    set); a rule with no such comparison is checked against every registry tool. Fix it by requiring the
    field in the schema or reading it with object.get and a default that denies; mark a deliberate read
    with a "# policycheck:ignore args" comment on its line or the line above, or in the comments
    above the rule (before its METADATA);
  * such a read of a <field> a tool's parameters_json_schema forbids (additionalProperties: false and no
    such property; args_forbidden): a call carrying it is invalid_args before any rule, so for that tool
    the rule can never fire (a misspelt field, often);
  * with a registry context_schema, a rule (a filter, hide, deny or require_approval) reading
    input.context.<field> the schema does not list (context_not_in_schema; a misspelt field, often):
    mark a deliberate read with a "# policycheck:ignore context" comment;
  * anything else the engine refuses to load (it compiles the set as policycheck eval would).

Without --registry, the checks that need one (filters for unknown capabilities, evaluated filter
results, rules reading call arguments or the context, tool and capability names, what the engine
refuses) are skipped, and the output says so.

It also notes, without failing, each nondeterministic built-in that a rule outside the filters reaches:
such a rule is allowed, but its result is not a function of the decision's input, so the engine then
keeps no decision memo and evaluates the policy for every decision (engine.DecisionCache); and each
name some --registry lacks while another has it. --strict makes every note a finding.

What check cannot see: failures that depend on the input of a request. Complete rules that conflict
only for some inputs (two "mode := ..." rules whose conditions can hold together), a built-in that
errors on some values (to_number(input.context.limit)), a rule that is undefined where the decision
needs a value: these fail the decision closed at run time. Test them with "policycheck test" and
recorded histories (docs/testing.md).

--format pretty (the default) is for people, --format json for machines, --format junit for CI (JUnit
XML: a testcase per policy file and registry, a failure per finding, notes as the testcase's
system-out, the checks not run as a skipped testcase); "text", the former name of pretty, is kept as
an alias.` + exitCodes("0  no findings", "2  at least one finding, no PATH, bad flags"),
		Example: `  policycheck check policies/ --registry examples/registry.yaml
  policycheck check examples/policies --registry examples/registry.yaml --format json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := parseFormat(checkFormats, f.format)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return badInput(fmt.Errorf("check needs at least one PATH: a policy file, a directory of policies or a bundle "+
					"(check . for the current directory)\n%s", usageHint(cmd)))
			}
			res := runCheck(cmd.Context(), args, f)
			if f.strict {
				res.add(res.Notes...)
				res.Notes = nil
			}
			return res.write(cmd.OutOrStdout(), format)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.registries, "registry", nil,
		"tool registry (YAML or JSON) to validate and check the filters against (repeatable: each is validated)")
	fl.StringVarP(&f.format, "format", "f", "pretty", "output format: pretty, json or junit (text: alias of pretty)")
	fl.BoolVar(&f.noDefaults, "no-defaults", false, "check the policies without the shipped defaults")
	fl.BoolVar(&f.strict, "strict", false, "make every note a finding (exit 2)")
	return cmd
}

// checkResult is what check found. Notes do not fail the check.
type checkResult struct {
	Findings   []policyFinding `json:"findings"`
	Notes      []policyFinding `json:"notes"`
	Files      []string        `json:"files"`
	Registries []string        `json:"registries"`
	// Skipped names the checks that did not run (without --registry).
	Skipped []string `json:"skipped"`
}

// skippedWithoutRegistry is what check cannot do without --registry.
const skippedWithoutRegistry = "capability checks (no --registry): filters for unknown capabilities, " +
	"evaluated filter results, rules reading call arguments no tool schema requires, tool and capability names, and what the engine refuses were not checked"

func (r *checkResult) add(fs ...policyFinding) {
	for _, f := range fs {
		dup := false
		for _, g := range r.Findings {
			if g.Code == f.Code && g.File == f.File && g.Row == f.Row && g.Col == f.Col && g.Pointer == f.Pointer {
				dup = true
				break
			}
		}
		if !dup {
			r.Findings = append(r.Findings, f)
		}
	}
}

func (r *checkResult) write(w io.Writer, format render.Format) error {
	byPlace(r.Findings)
	byPlace(r.Notes)
	r.Findings = nonNil(r.Findings)
	r.Notes = nonNil(r.Notes)
	r.Files = nonNil(r.Files)
	r.Registries = nonNil(r.Registries)
	r.Skipped = nonNil(r.Skipped)
	switch format {
	case render.JSON:
		if err := writeJSONTo(w, r); err != nil {
			return err
		}
	case render.JUnit:
		if err := render.Write(w, render.JUnit, &render.Doc{Suites: r.junit()}); err != nil {
			return err
		}
	default:
		// File names and messages come from the files checked: escaped.
		for _, f := range r.Findings {
			printable.Fprintf(w, "%s\n", f.String())
		}
		for _, f := range r.Notes {
			printable.Fprintf(w, "note: %s\n", f.String())
		}
		if len(r.Findings) == 0 {
			reg := ""
			if len(r.Registries) > 0 {
				reg = ", registry " + strings.Join(r.Registries, ", ")
			}
			printable.Fprintf(w, "ok: %d policy files%s, no findings\n", len(r.Files), reg)
		}
		for _, sk := range r.Skipped {
			printable.Fprintf(w, "skipped: %s\n", sk)
		}
	}
	if n := len(r.Findings); n > 0 {
		return &exitError{code: ExitBadUsage, err: fmt.Errorf("check: %d finding(s)", n)}
	}
	return nil
}

// junit is the result as JUnit XML: one testcase per policy file and
// registry checked (and per other file a finding names), with a failure
// per finding; notes are their file's system-out (they do not fail the
// check), findings and notes of no file are a testcase "policy set", and
// the checks not run (no --registry) a skipped testcase each.
func (r *checkResult) junit() *render.JUnitSuites {
	su := render.JUnitSuite{Name: "policycheck check"}
	index := map[string]int{}
	tc := func(class, file string) *render.JUnitCase {
		name := file
		if name == "" {
			name = "policy set"
		}
		i, ok := index[name]
		if !ok {
			i = len(su.Cases)
			index[name] = i
			su.Cases = append(su.Cases, render.JUnitCase{Classname: class, Name: name})
		}
		return &su.Cases[i]
	}
	for _, file := range r.Files {
		tc("check.policies", file)
	}
	for _, file := range r.Registries {
		tc("check.registries", file)
	}
	for _, f := range r.Findings {
		c := tc("check.policies", f.File)
		c.Failures = append(c.Failures, render.JUnitProblem{Message: f.Code + ": " + f.Message, Type: f.Code, Text: f.String() + "\n"})
	}
	for _, f := range r.Notes {
		c := tc("check.policies", f.File)
		c.SystemOut += "note: " + f.String() + "\n"
	}
	for _, sk := range r.Skipped {
		name, _, _ := strings.Cut(sk, ":")
		su.Cases = append(su.Cases, render.JUnitCase{Classname: "check.skipped", Name: name, Skipped: &render.JUnitSkipped{Message: sk}})
	}
	return &render.JUnitSuites{Name: "policycheck check", Suites: []render.JUnitSuite{su}}
}

// byPlace sorts findings by file, row and column, as contract.Check sorts
// its problems.
func byPlace(fs []policyFinding) {
	contract.SortByPlace(fs, func(f policyFinding) (string, int, int) { return f.File, f.Row, f.Col })
}

// checkModule is one parsed policy module.
type checkModule struct {
	file     string
	text     string
	module   *ast.Module
	operator bool // from PATH, not shipped
	test     bool // a *_test.rego named on the command line: compiled, not a policy
}

func runCheck(ctx context.Context, paths []string, f checkFlags) *checkResult {
	res := &checkResult{Registries: f.registries}
	if len(f.registries) == 0 {
		res.Skipped = append(res.Skipped, skippedWithoutRegistry)
	}

	// Every registry is validated; the policies are checked against each
	// valid one.
	var regs []*facts.Registry
	var regFiles []string // the file of each of regs
	for _, file := range f.registries {
		r, err := loader.ReadRegistry(file)
		if err != nil {
			res.add(registryFindings(file, err)...)
			continue
		}
		regs = append(regs, r)
		regFiles = append(regFiles, file)
	}
	var reg *facts.Registry
	if len(regs) > 0 {
		reg = regs[0]
	}

	// Parse every file on its own, so that one syntax error does not hide
	// the rest. Bundle archives are read whole.
	var mods []*checkModule
	var dirs []string
	for _, p := range paths {
		if strings.HasSuffix(p, ".tar.gz") {
			mods = append(mods, bundleModules(p, res)...)
			continue
		}
		dirs = append(dirs, p)
	}
	for _, file := range regoFiles(dirs, res) {
		b, err := os.ReadFile(file)
		if err != nil {
			res.add(policyFinding{Code: "load_error", File: file, Message: err.Error()})
			continue
		}
		res.Files = append(res.Files, file)
		m, err := ast.ParseModuleWithOpts(file, string(b), ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			res.add(astFindings(err, "rego_parse_error")...)
			continue
		}
		mods = append(mods, &checkModule{file: file, text: string(b), module: m, operator: true, test: isTestFile(file)})
	}
	shadowed := false
	if !f.noDefaults {
		var err error
		var shipped []*checkModule
		shipped, shadowed, err = shippedModules(mods)
		if err != nil {
			res.add(policyFinding{Code: "load_error", Message: err.Error()})
		}
		mods = append(mods, shipped...)
	}

	// Where the modules are, syntactically. Test modules are never
	// loaded by the engine: not checked as policies.
	policies := map[string]*ast.Module{}
	for _, m := range mods {
		if !m.test {
			policies[m.file] = m.module
		}
	}
	for _, m := range regoutil.UnreadPackages(policies) {
		res.add(packageFinding(m))
	}
	for _, m := range mods {
		if !m.operator || m.test {
			continue
		}
		for _, r := range regs {
			res.add(unknownCapabilityFindings(m, r)...)
		}
	}

	// Compile in strict mode; if some files fail, compile the others again
	// so that the semantic checks still run on them.
	c := strictCompile(mods)
	if c.Failed() {
		res.add(astFindings(c.Errors, "rego_compile_error")...)
		bad := map[string]bool{}
		for _, e := range c.Errors {
			if e.Location != nil {
				bad[e.Location.File] = true
			}
		}
		var rest []*checkModule
		for _, m := range mods {
			if !bad[m.file] {
				rest = append(rest, m)
			}
		}
		c = strictCompile(rest)
		if c.Failed() {
			res.add(astFindings(c.Errors, "rego_compile_error")...)
			return res
		}
		mods = rest
	}
	// The operator contract, as the engine checks it at load.
	shapes, _ := contract.Check(c)
	for _, p := range shapes {
		res.add(policyFinding{Code: p.Code, File: p.File, Row: p.Row, Col: p.Col, Message: p.Message})
	}
	operator := map[string]bool{}
	for _, m := range mods {
		if m.operator && !m.test {
			operator[m.file] = true
		}
	}
	names, nameNotes := nameFindings(c, operator, regs, regFiles)
	res.add(names...)
	res.Notes = append(res.Notes, nameNotes...)
	for i, r := range regs {
		res.add(argsFindings(c, operator, r, regFiles[i])...)
	}
	res.add(nondeterminismFindings(c)...)
	res.Notes = append(res.Notes, memoNotes(c)...)
	res.add(filterTypeFindings(ctx, c, reg)...)
	res.add(alwaysErrorFindings(ctx, c, mods)...)

	// Whatever else the engine refuses, once everything above is clean.
	if len(res.Findings) == 0 && reg != nil {
		opts := []engine.Option{engine.Registry(reg)}
		if f.noDefaults || shadowed {
			opts = append(opts, engine.WithoutDefaults())
		}
		for _, m := range mods {
			if !m.test && (m.operator || shadowed) {
				opts = append(opts, engine.Modules(engine.Source{File: m.file, Text: m.text}))
			}
		}
		if _, err := engine.New(ctx, opts...); err != nil {
			var pe *engine.PolicyError
			if errors.As(err, &pe) {
				for _, p := range pe.Errors {
					res.add(policyFinding{Code: p.Code, File: p.File, Row: p.Row, Col: p.Col, Message: p.Message})
				}
			} else {
				res.add(policyFinding{Code: "engine_error", Message: err.Error()})
			}
		}
	}
	return res
}

func strictCompile(mods []*checkModule) *ast.Compiler {
	in := make(map[string]*ast.Module, len(mods))
	for _, m := range mods {
		in[m.file] = m.module
	}
	c := ast.NewCompiler().WithStrict(true).WithUseTypeCheckAnnotations(true).SetErrorLimit(0)
	c.Compile(in)
	return c
}

// bundleModules reads the policy modules of an OPA bundle archive.
func bundleModules(p string, res *checkResult) []*checkModule {
	b, err := oloader.NewFileLoader().WithProcessAnnotation(true).WithRegoVersion(ast.RegoV1).AsBundle(p)
	if err != nil {
		res.add(astFindings(err, "bundle_error")...)
		return nil
	}
	var out []*checkModule
	for _, mf := range b.Modules {
		if strings.HasSuffix(mf.Path, "_test.rego") {
			continue
		}
		file := p + "#" + strings.TrimPrefix(path.Clean("/"+mf.Path), "/")
		res.Files = append(res.Files, file)
		m, err := ast.ParseModuleWithOpts(file, string(mf.Raw), ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			res.add(astFindings(err, "rego_parse_error")...)
			continue
		}
		out = append(out, &checkModule{file: file, text: string(mf.Raw), module: m, operator: true})
	}
	return out
}

// isTestFile reports whether a file is a Rego test module by its name.
func isTestFile(file string) bool { return strings.HasSuffix(file, "_test.rego") }

// regoFiles lists the non-test .rego files under the directories of
// paths (entries whose name begins with "." aside, as the engine reads
// them), and the files paths name (tests included), sorted.
func regoFiles(paths []string, res *checkResult) []string {
	var out []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			res.add(policyFinding{Code: "load_error", File: p, Message: loader.IOError(p, err).Msg})
			continue
		}
		if !info.IsDir() {
			out = append(out, p)
			continue
		}
		before := len(out)
		var stray []string
		_ = filepath.WalkDir(p, func(file string, d fs.DirEntry, err error) error {
			if err != nil {
				res.add(policyFinding{Code: "load_error", File: file, Message: err.Error()})
				return nil
			}
			if file != p && strings.HasPrefix(d.Name(), ".") {
				// Not read by the engine either (engine.PolicyPaths).
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.IsDir() && filepath.Ext(file) == ".rego" && !isTestFile(file) {
				out = append(out, file)
			}
			if !d.IsDir() && file != p && policydir.Stray(d.Name()) {
				stray = append(stray, file)
			}
			return nil
		})
		switch {
		case len(stray) == 1:
			res.add(policyFinding{Code: "load_error", File: stray[0], Message: policydir.StrayMessage})
		case len(stray) > 1:
			// Most likely a registry, histories and contexts beside the
			// policies: one finding that says what to do.
			res.add(policyFinding{Code: "load_error", File: p, Message: policydir.StraySummary(p, stray)})
		}
		if len(out) == before {
			res.add(policyFinding{Code: codeNoPolicies, File: p, Message: "no policy files (*.rego other than *_test.rego) here: nothing to check"})
		}
	}
	sort.Strings(out)
	return out
}

// shippedModules returns the shipped policies whose package no checked
// module defines, and whether any was left out.
func shippedModules(mods []*checkModule) ([]*checkModule, bool, error) {
	have := map[string]bool{}
	for _, m := range mods {
		have[m.module.Package.Path.String()] = true
	}
	shipped, err := regoutil.ShippedModules()
	if err != nil {
		return nil, false, err
	}
	var out []*checkModule
	shadowed := false
	for _, sm := range shipped {
		if have[sm.Module.Package.Path.String()] {
			shadowed = true
			continue
		}
		out = append(out, &checkModule{file: sm.File, text: sm.Text, module: sm.Module})
	}
	return out, shadowed, nil
}

func registryFindings(file string, err error) []policyFinding {
	var out []policyFinding
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var le *loader.Error
		if errors.As(e, &le) {
			ptr := le.Pointer
			if ptr == "" && le.Kind != loader.KindIO {
				ptr = "(root)"
			}
			out = append(out, policyFinding{Code: codeRegistry, File: le.File, Row: le.Line, Col: le.Column,
				Pointer: ptr, Message: le.Msg})
			return
		}
		out = append(out, policyFinding{Code: codeRegistry, File: file, Message: e.Error()})
	}
	walk(err)
	return out
}

func locFinding(code string, loc *ast.Location, msg string) policyFinding {
	p := policyFinding{Code: code, Message: msg}
	if loc != nil {
		p.File, p.Row, p.Col = loc.File, loc.Row, loc.Col
	}
	return p
}

// packageFinding reports an operator module in a package the engine never
// reads (regoutil.UnreadPackages).
func packageFinding(m *ast.Module) policyFinding {
	pkg := strings.TrimPrefix(m.Package.Path.String(), "data.")
	return locFinding(codePackagePlace, m.Package.Location, fmt.Sprintf(
		"package %s is outside the packages the engine reads (policycheck.rules.*, policycheck.capabilities.*, "+
			"policycheck.availability, policycheck.lib*) and no policy imports it: its rules would never be evaluated", pkg))
}

func unknownCapabilityFindings(m *checkModule, reg *facts.Registry) []policyFinding {
	id := regoutil.CapabilityOf(m.module.Package.Path)
	if id == "" || reg.IsRegistered(id) {
		return nil
	}
	return []policyFinding{locFinding(codeUnknownCap, m.module.Package.Location, fmt.Sprintf(
		"filter package for capability %q, which the registry does not have", id))}
}

// nondeterminismFindings reports every call of a nondeterministic
// built-in that a filter reaches, through the rules and functions it
// depends on.
func nondeterminismFindings(c *ast.Compiler) []policyFinding {
	var out []policyFinding
	seen := map[*ast.Rule]bool{}
	for _, root := range regoutil.FilterRules(c) {
		for _, call := range regoutil.NondeterministicCalls(c, root, seen) {
			out = append(out, locFinding(codeNondeterminism, call.Expr.Location, fmt.Sprintf(
				"filter %s reaches the nondeterministic built-in %s: filter results are cached, "+
					"so they must be a pure function of their input", root.Module.Package.Path, call.Builtin)))
		}
	}
	return out
}

// memoNotes notes every call of a nondeterministic built-in reached from
// a rule outside the filters (which nondeterminismFindings reports as
// findings): the engine then keeps no decision memo (see
// engine.DecisionCache), since the policy's result is no longer a
// function of its input.
func memoNotes(c *ast.Compiler) []policyFinding {
	seen := map[*ast.Rule]bool{}
	for _, root := range regoutil.FilterRules(c) {
		regoutil.NondeterministicCalls(c, root, seen)
	}
	var out []policyFinding
	for _, m := range sortedModules(c) {
		if m.Package.Location != nil && isTestFile(m.Package.Location.File) {
			continue // a test named on the command line: never loaded by the engine
		}
		for _, r := range m.Rules {
			for _, call := range regoutil.NondeterministicCalls(c, r, seen) {
				out = append(out, locFinding(codeMemoOff, call.Expr.Location, fmt.Sprintf(
					"%s reaches the nondeterministic built-in %s: allowed outside filters, but the decision memo is off "+
						"for this policy set, so every decision evaluates the policy", m.Package.Path, call.Builtin)))
			}
		}
	}
	return out
}

// sortedModules returns the compiled modules in file order.
func sortedModules(c *ast.Compiler) []*ast.Module {
	files := make([]string, 0, len(c.Modules))
	for f := range c.Modules {
		files = append(files, f)
	}
	sort.Strings(files)
	out := make([]*ast.Module, len(files))
	for i, f := range files {
		out[i] = c.Modules[f]
	}
	return out
}

// filterTypeFindings reports a prepare_tools whose value cannot be a set
// of strings: from its inferred type, or, when the type leaves it open, by
// evaluating it with the registry's tools and an empty context.
func filterTypeFindings(ctx context.Context, c *ast.Compiler, reg *facts.Registry) []policyFinding {
	var out []policyFinding
	done := map[string]bool{}
	for _, r := range regoutil.FilterRules(c) {
		pkg := r.Module.Package.Path
		if done[pkg.String()] {
			continue
		}
		done[pkg.String()] = true
		ref := pkg.Append(ast.StringTerm("prepare_tools"))
		t := c.TypeEnv.GetByRef(ref)
		// A type that cannot be a set of strings is the contract's
		// (contract.Check); an open one is tried here.
		switch setOfStrings(t) {
		case typeMaybe:
			if reg == nil {
				continue
			}
			if msg := evalFilterShape(ctx, c, ref, reg); msg != "" {
				out = append(out, locFinding(codeFilterNotSet, r.Location, fmt.Sprintf(
					"%s, evaluated with the registry's tools and an empty context, %s", ref, msg)))
			}
		}
	}
	return out
}

type typeAnswer int

const (
	typeYes typeAnswer = iota
	typeNo
	typeMaybe
)

func setOfStrings(t types.Type) typeAnswer {
	switch x := t.(type) {
	case nil:
		return typeMaybe
	case *types.Set:
		if x.Of() == nil {
			return typeYes // set(): the empty set drops every tool
		}
		if types.Contains(x.Of(), types.S) {
			return typeYes
		}
		return typeNo
	case types.Any:
		if len(x) == 0 {
			return typeMaybe
		}
		for _, m := range x {
			if setOfStrings(m) != typeNo {
				return typeMaybe
			}
		}
		return typeNo
	}
	return typeNo
}

// evalFilterShape evaluates a filter and returns why its value is not a
// set of strings, or "" (also when it is undefined: that depends on the
// context the operator sends).
func evalFilterShape(ctx context.Context, c *ast.Compiler, ref ast.Ref, reg *facts.Registry) string {
	caps := make([]string, 0, len(reg.Capabilities()))
	for _, cp := range reg.Capabilities() {
		caps = append(caps, cp.ID)
	}
	body := ast.NewBody(
		ast.Assign.Expr(ast.VarTerm("x"), ast.NewTerm(ref)),
		ast.Assign.Expr(ast.VarTerm("s"), ast.CallTerm(ast.RefTerm(ast.VarTerm("is_set")), ast.VarTerm("x"))),
	)
	rs, err := rego.New(rego.ParsedQuery(body), rego.Compiler(c),
		rego.ParsedInput(engine.FilterInput(reg, caps)),
	).Eval(ctx)
	if err != nil {
		return "fails: " + err.Error()
	}
	if len(rs) == 0 {
		return ""
	}
	if isSet, _ := rs[0].Bindings["s"].(bool); !isSet {
		return "is " + regoutil.JSONKind(rs[0].Bindings["x"]) + ", not a set"
	}
	list, _ := rs[0].Bindings["x"].([]any)
	for _, v := range list {
		if _, ok := v.(string); !ok {
			return fmt.Sprintf("holds %v, which is not a tool name", v)
		}
	}
	return ""
}

// alwaysErrorFindings evaluates each complete rule of the operator's
// policies that reads neither input nor data (nor calls a function that
// could): its value is the same for every request, so if evaluating it
// fails here — conflicting values, a built-in that errors — it fails every
// decision that reaches it. Rules that read the request are left to run
// time: check says so in its help.
func alwaysErrorFindings(ctx context.Context, c *ast.Compiler, mods []*checkModule) []policyFinding {
	operator := map[string]bool{}
	for _, m := range mods {
		if m.operator && !m.test {
			operator[m.file] = true
		}
	}
	type group struct {
		path  ast.Ref
		first *ast.Rule
		pure  bool
	}
	var order []string
	groups := map[string]*group{}
	for _, m := range sortedModules(c) {
		if m.Package.Location == nil || !operator[m.Package.Location.File] {
			continue
		}
		for _, r := range m.Rules {
			if len(r.Head.Args) > 0 || r.Head.RuleKind() != ast.SingleValue || !r.Ref().IsGround() {
				continue
			}
			path := r.Ref() // the full path, package included
			key := path.String()
			g := groups[key]
			if g == nil {
				g = &group{path: path, first: r, pure: true}
				groups[key] = g
				order = append(order, key)
			}
			if !selfContained(r) {
				g.pure = false
			}
		}
	}
	var out []policyFinding
	for _, key := range order {
		g := groups[key]
		if !g.pure {
			continue
		}
		evalCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		// As the engine evaluates: a built-in error is an error.
		_, err := rego.New(rego.ParsedQuery(ast.NewBody(ast.NewExpr(ast.NewTerm(g.path)))), rego.Compiler(c),
			rego.StrictBuiltinErrors(true)).Eval(evalCtx)
		cancel()
		if err != nil {
			out = append(out, locFinding(codeAlwaysErrors, g.first.Location, fmt.Sprintf(
				"%s reads nothing from the request and fails whenever it is evaluated, so every decision that reaches it fails closed: %v",
				g.path, err)))
		}
	}
	return out
}

// selfContained reports whether a rule (with its else branches) refers to
// neither input nor data: no other rule, function or document.
func selfContained(r *ast.Rule) bool {
	ok := true
	ast.WalkRefs(r, func(ref ast.Ref) bool {
		if ref.HasPrefix(ast.DefaultRootRef) || ref.HasPrefix(ast.InputRootRef) {
			ok = false
		}
		return !ok
	})
	return ok
}
