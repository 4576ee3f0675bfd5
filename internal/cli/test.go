package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	oloader "github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/internal/cli/internal/progress"
	"github.com/policycheck/policycheck/internal/ground/policydir"
	"github.com/policycheck/policycheck/internal/ground/regoutil"
	"github.com/policycheck/policycheck/internal/output/render"
)

type testFlags struct {
	run        string
	verbose    bool
	coverage   bool
	threshold  float64
	format     string
	noDefaults bool
	// failOnEmpty fails a run in which no test ran (as opa test
	// --fail-on-empty).
	failOnEmpty bool
	timeout     time.Duration
	ignore      []string
	// progress returns the progress line of a run of total tests (nil:
	// none).
	progress func(total int) *progress.Reporter
}

// progressMinTests: smaller suites finish before a progress line helps.
const progressMinTests = 100

// skippedDir reports whether a directory below a PATH is skipped, as go
// skips it: testdata, and names starting with "." or "_".
func skippedDir(name string) bool {
	return name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// projectRoots lists what "policycheck test" without PATH tests in dir:
// each top-level directory that holds a .rego file outside the skipped
// directories, and the Rego and data files directly in dir.
func projectRoots(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var roots []string
	for _, e := range entries {
		if !e.IsDir() || skippedDir(e.Name()) {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if hasRego(sub) {
			roots = append(roots, sub)
		}
	}
	// The files of dir itself, each named: its subdirectories are the
	// roots above.
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".rego") || isDataFile(e.Name())) {
			roots = append(roots, filepath.Join(dir, e.Name()))
		}
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("no Rego files under %s (testdata, hidden and _ directories skipped): name a PATH", dir)
	}
	return roots, nil
}

func isDataFile(name string) bool {
	switch name {
	case "data.json", "data.yaml", "data.yml":
		return true
	}
	return false
}

// hasRego reports whether dir holds a .rego file outside skipped
// directories.
func hasRego(dir string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || found:
			return filepath.SkipAll
		case d.IsDir() && p != dir && skippedDir(d.Name()):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(p, ".rego"):
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

func newTestCmd() *cobra.Command {
	var f testFlags
	cmd := &cobra.Command{
		Use:   "test [PATH...]",
		Short: "Run Rego unit tests (*_test.rego) with OPA's test runner, the shipped policies available",
		Long: `test runs the Rego unit tests found under PATH with OPA's own test runner, as "opa test" does: rules
named test_* in any module, table tests reported case by case.

Without PATH it tests the project in the current directory: the Rego and data files directly in it,
and each top-level directory holding Rego, each as its own PATH (in this repository, the same as
"policycheck test policies/ policy_test/ examples/"), so data files keep the paths they have when
you name those directories. These directories load together, as opa test loads its paths: one set of
policies and one data tree, so a test in one sees the packages and data of the others, and a rule
defined in two of them is one rule (two values of a complete rule conflict). Below any PATH, directories named testdata, or starting with "." or
"_", are skipped as go skips them (name one as a PATH to test it), and so are files starting
with ".", which eval and serve do not load either.

The shipped policies (policycheck.availability, policycheck.lib, policycheck.lib.gate) are available
to every test unless --no-defaults is given or PATH holds a module of the same package (testing
policies/ itself). Data files follow the OPA bundle convention: only files named data.json, data.yaml
or data.yml are loaded, at the path of their directory relative to PATH, so a directory of example
histories next to your policies is not mistaken for data. (Stock "opa test" loads every JSON and YAML
file: give it the directories that hold policies, tests and data.json files, and the shipped policies,
which "policycheck policies export DIR" writes.)

--coverage reports the line coverage of the non-test modules under PATH (the shipped policies added
implicitly are not counted); --threshold fails the run below that percentage.
--format json prints the results as "opa test --format json" does, or, with --coverage, an object
{"tests": [...], "coverage": {...}} whose coverage has the shape of "opa test --coverage".
--format junit writes JUnit XML for CI: a testsuite per package, a testcase per test (the package
as classname) with a failure or an error and the test's print output as system-out, a todo_ test
skipped; with --coverage, a testsuite "coverage" whose one testcase fails below --threshold.

On a terminal, a suite of more than 100 tests shows its progress on stderr (tests done, rate, time
left); piped or redirected, nothing is added.

Exit codes:
  0  every test passed (and coverage reached the threshold)
  1  a test failed or errored, or coverage is below the threshold
  2  a module does not parse or compile, bad flags`,
		Example: `  policycheck test policies/ policy_test/ examples/policies/
  policycheck test policies/ --run 'gate_test.*verdict' -v
  policycheck test policies/ --coverage --threshold 95
  policycheck test examples/ --format json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := parseFormat(testFormats, f.format); err != nil {
				return err
			}
			if len(args) == 0 {
				var err error
				if args, err = projectRoots("."); err != nil {
					return badInput(err)
				}
			}
			f.progress = func(total int) *progress.Reporter {
				if total <= progressMinTests {
					return nil
				}
				return stderrProgress(cmd, "test", total)
			}
			return runRegoTests(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.run, "run", "r", "", "run only the tests whose full name (data.<package>.<rule>) matches this regular expression")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "list every test, with notes and failures traced")
	fl.BoolVar(&f.coverage, "coverage", false, "report line coverage of the policies under PATH")
	fl.Float64Var(&f.threshold, "threshold", 0, "fail when coverage is below this percentage (implies --coverage)")
	fl.StringVarP(&f.format, "format", "f", "pretty", "output format: pretty, json or junit")
	fl.BoolVar(&f.noDefaults, "no-defaults", false, "do not make the shipped policies available")
	fl.BoolVar(&f.failOnEmpty, "fail-on-empty", false, "exit 1 when no test ran (a --run that matches nothing, a path without tests), as opa test --fail-on-empty")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Second, "time limit for each test")
	fl.StringSliceVar(&f.ignore, "ignore", nil, "file or directory name patterns to skip (as opa test --ignore)")
	return cmd
}

func runRegoTests(ctx context.Context, stdout, stderr io.Writer, paths []string, f testFlags) error {
	if f.threshold < 0 || f.threshold > 100 {
		return badInput(fmt.Errorf("--threshold must be between 0 and 100, not %v", f.threshold))
	}
	if f.run != "" {
		if _, err := regexp.Compile(f.run); err != nil {
			return badInput(fmt.Errorf("--run: %w", err))
		}
	}
	if f.threshold > 0 {
		f.coverage = true
	}
	modules, store, err := loadTestModules(paths, f.ignore)
	if err != nil {
		return badInput(err)
	}
	// The policies whose coverage is reported: the non-test modules the
	// user named, not the shipped ones added below.
	covered := map[string]*ast.Module{}
	for name, m := range modules {
		if !strings.HasSuffix(name, "_test.rego") {
			covered[name] = m
		}
	}
	if !f.noDefaults {
		if err := addShippedPolicies(modules); err != nil {
			return err
		}
	}

	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return fmt.Errorf("test: %w", err)
	}
	defer store.Abort(ctx, txn)

	var cov *cover.Cover
	runner := tester.NewRunner().
		SetCompiler(ast.NewCompiler().WithEnablePrintStatements(true).WithUseTypeCheckAnnotations(true)).
		SetStore(store).
		SetModules(modules).
		CapturePrintOutput(true).
		EnableTracing(f.verbose).
		SetTimeout(f.timeout).
		Filter(f.run)
	if f.coverage {
		cov = cover.New()
		// The supplementary passes only annotate what is not covered; the
		// percentage is the same without them, at half the cost.
		runner = runner.SetCoverageQueryTracer(cov).SetCoverageRuns(nil)
	}
	ch, err := runner.RunTests(ctx, txn)
	if err != nil {
		return badInput(compileError(err))
	}

	// Progress counts test rules (a table test's cases are one rule).
	var bar *progress.Reporter
	if f.progress != nil {
		bar = f.progress(countTestRules(modules, f.run))
	}
	seen := map[string]bool{}
	var results []*tester.Result
	for r := range ch {
		results = append(results, r)
		rule := r.Package + "." + strings.SplitN(r.Name, "[", 2)[0]
		if !seen[rule] {
			seen[rule] = true
			bar.Add(1)
		}
	}
	bar.Finish()
	sort.SliceStable(results, func(i, j int) bool {
		if results[i].Package != results[j].Package {
			return results[i].Package < results[j].Package
		}
		return results[i].Location.Row < results[j].Location.Row
	})
	failed := false
	for _, r := range results {
		if !r.Pass() && !r.Skip {
			failed = true
		}
	}

	var report *cover.Report
	if cov != nil {
		report = policyCoverage(cov.Report(covered), covered)
	}
	if err := writeTestResults(stdout, f, results, report); err != nil {
		return err
	}
	if len(results) == 0 {
		if f.failOnEmpty {
			return &exitError{code: ExitFailed, err: errors.New("no tests ran")}
		}
		fmt.Fprintln(stderr, "policycheck: no tests ran")
	}
	if report != nil && f.threshold > 0 && report.Coverage < f.threshold {
		return &exitError{code: ExitFailed, err: fmt.Errorf("coverage %.2f%% is below the threshold %.2f%%", report.Coverage, f.threshold)}
	}
	if failed {
		return errFailed
	}
	return nil
}

// loadTestModules loads the modules and the data files under paths. Data
// files follow the OPA bundle convention: only data.json/data.yaml/data.yml.
func loadTestModules(paths, ignore []string) (map[string]*ast.Module, storage.Store, error) {
	filter := func(abspath string, info fs.FileInfo, depth int) bool {
		name := info.Name()
		for _, pat := range ignore {
			if ok, _ := filepath.Match(pat, name); ok {
				return true
			}
		}
		if info.IsDir() {
			return depth > 0 && skippedDir(name)
		}
		if depth > 0 && strings.HasPrefix(name, ".") {
			return true // not read by eval, serve and check either (engine.PolicyPaths)
		}
		// Not data by the bundle convention: skipped here, refused by
		// eval, serve and check (policydir.Stray).
		return policydir.Stray(name)
	}
	modules, store, err := tester.LoadWithParserOptions(paths, filter,
		ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
	if err != nil {
		return nil, nil, loadError(err)
	}
	return modules, store, nil
}

// addShippedPolicies adds the embedded default policies (tests excluded)
// whose package no loaded module already defines.
func addShippedPolicies(modules map[string]*ast.Module) error {
	have := map[string]bool{}
	for _, m := range modules {
		have[m.Package.Path.String()] = true
	}
	shipped, err := regoutil.ShippedModules()
	if err != nil {
		return err
	}
	for _, sm := range shipped {
		if !have[sm.Module.Package.Path.String()] {
			modules[sm.File] = sm.Module
		}
	}
	return nil
}

// policyFinding is one located problem in a policy set, registry or test
// run: what check and test print, one per line, as file:row:col.
type policyFinding struct {
	Code    string `json:"code"`
	File    string `json:"file,omitempty"`
	Row     int    `json:"row,omitempty"`
	Col     int    `json:"col,omitempty"`
	Pointer string `json:"pointer,omitempty"`
	Message string `json:"message"`
}

func (p policyFinding) String() string {
	loc := p.File
	switch {
	case p.Row > 0:
		loc = fmt.Sprintf("%s:%d:%d", p.File, p.Row, p.Col)
	case p.Pointer != "":
		loc = p.File + ": " + p.Pointer // as the loader writes it: file: /pointer
	}
	if loc == "" {
		return p.Code + ": " + p.Message
	}
	return loc + ": " + p.Code + ": " + p.Message
}

// astFindings turns OPA's parse, compile and load errors into findings.
func astFindings(err error, code string) []policyFinding {
	var out []policyFinding
	add := func(e *ast.Error) {
		p := policyFinding{Code: e.Code, Message: e.Message}
		if e.Location != nil {
			p.File, p.Row, p.Col = e.Location.File, e.Location.Row, e.Location.Col
		}
		out = append(out, p)
	}
	var walk func(error)
	walk = func(err error) {
		var ae *ast.Error
		var aes ast.Errors
		var les oloader.Errors
		switch {
		case errors.As(err, &aes):
			for _, e := range aes {
				add(e)
			}
		case errors.As(err, &les):
			for _, e := range les {
				walk(e)
			}
		case errors.As(err, &ae):
			add(ae)
		default:
			out = append(out, policyFinding{Code: code, Message: err.Error()})
		}
	}
	walk(err)
	return out
}

// findingsError is a list of findings as one error (exit 2).
type findingsError []policyFinding

func (fe findingsError) Error() string {
	lines := make([]string, len(fe))
	for i, p := range fe {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

func compileError(err error) error { return findingsError(astFindings(err, "compile_error")) }
func loadError(err error) error    { return findingsError(astFindings(err, "load_error")) }

func writeTestResults(w io.Writer, f testFlags, results []*tester.Result, report *cover.Report) error {
	ch := func() chan *tester.Result {
		c := make(chan *tester.Result, len(results))
		for _, r := range results {
			c <- r
		}
		close(c)
		return c
	}
	if f.format == string(render.JUnit) {
		return render.Write(w, render.JUnit, &render.Doc{Suites: testSuites(results, report, f.threshold)})
	}
	if f.format == string(render.JSON) {
		if report == nil {
			return tester.JSONReporter{Output: w}.Report(ch())
		}
		return writeJSONTo(w, struct {
			Tests    []*tester.Result `json:"tests"`
			Coverage *cover.Report    `json:"coverage"`
		}{nonNil(results), report})
	}
	if err := (tester.PrettyReporter{Output: w, Verbose: f.verbose}).Report(ch()); err != nil {
		return err
	}
	if report == nil {
		return nil
	}
	files := make([]string, 0, len(report.Files))
	for name := range report.Files {
		files = append(files, name)
	}
	sort.Strings(files)
	fmt.Fprintf(w, "coverage: %.2f%% of %d lines in %d policy files\n", report.Coverage,
		report.CoveredLines+report.NotCoveredLines, len(files))
	for _, name := range files {
		fr := report.Files[name]
		fmt.Fprintf(w, "  %6.2f%%  %s\n", fr.Coverage, name)
		if f.verbose {
			for _, r := range fr.NotCovered {
				fmt.Fprintf(w, "           not covered: %s:%d-%d\n", name, r.Start.Row, r.End.Row)
			}
		}
	}
	return nil
}

// testSuites is a test run as JUnit XML: a testsuite per package, a
// testcase per test, and with coverage a testsuite "coverage" whose
// testcase fails below threshold.
func testSuites(results []*tester.Result, report *cover.Report, threshold float64) *render.JUnitSuites {
	doc := &render.JUnitSuites{Name: "policycheck test"}
	for _, r := range results { // sorted by package
		if n := len(doc.Suites); n == 0 || doc.Suites[n-1].Name != r.Package {
			doc.Suites = append(doc.Suites, render.JUnitSuite{Name: r.Package})
		}
		c := render.JUnitCase{Classname: r.Package, Name: r.Name, Duration: r.Duration, SystemOut: string(r.Output)}
		where := ""
		if r.Location != nil {
			where = r.Location.String() + ": "
		}
		switch {
		case r.Error != nil:
			c.Errors = []render.JUnitProblem{{Message: r.Error.Error(), Type: "error", Text: where + r.Error.Error() + "\n"}}
		case r.Fail:
			text := where + "test failed\n"
			if r.FailedAt != nil {
				text += fmt.Sprintf("failed at %s: %s\n", r.FailedAt.Location, r.FailedAt)
			}
			c.Failures = []render.JUnitProblem{{Message: "test failed: " + r.Package + "." + r.Name, Type: "fail", Text: text}}
		case r.Skip:
			c.Skipped = &render.JUnitSkipped{Message: "todo test"}
		}
		su := &doc.Suites[len(doc.Suites)-1]
		su.Cases = append(su.Cases, c)
	}
	if report != nil {
		files := make([]string, 0, len(report.Files))
		for name := range report.Files {
			files = append(files, name)
		}
		sort.Strings(files)
		var out strings.Builder
		for _, name := range files {
			fmt.Fprintf(&out, "%6.2f%%  %s\n", report.Files[name].Coverage, name)
		}
		c := render.JUnitCase{Classname: "coverage", Name: fmt.Sprintf("coverage >= %.2f%%", threshold), SystemOut: out.String()}
		if report.Coverage < threshold {
			c.Failures = []render.JUnitProblem{{Message: fmt.Sprintf("coverage %.2f%% is below the threshold %.2f%%", report.Coverage, threshold),
				Type: "coverage", Text: out.String()}}
		}
		doc.Suites = append(doc.Suites, render.JUnitSuite{Name: "coverage", Cases: []render.JUnitCase{c}})
	}
	return doc
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// writeJSONTo writes v as the sidecar answers it (internal/ground/jsonout).
func writeJSONTo(w io.Writer, v any) error {
	return render.WriteJSON(w, v)
}

// policyCoverage restricts a coverage report to the given modules (the
// tracer reports every file it saw, tests included) and recomputes the
// totals.
func policyCoverage(rep cover.Report, modules map[string]*ast.Module) *cover.Report {
	out := &cover.Report{Files: map[string]*cover.FileReport{}}
	for name, fr := range rep.Files {
		if _, ok := modules[name]; !ok {
			continue
		}
		out.Files[name] = fr
		out.CoveredLines += fr.CoveredLines
		out.NotCoveredLines += fr.NotCoveredLines
	}
	if total := out.CoveredLines + out.NotCoveredLines; total > 0 {
		out.Coverage = 100 * float64(out.CoveredLines) / float64(total)
	}
	return out
}

// countTestRules counts the distinct test rules (test_*) of modules whose
// full name matches run ("" for all), as the runner selects them.
func countTestRules(modules map[string]*ast.Module, run string) int {
	re, _ := regexp.Compile(run) // checked before
	seen := map[string]bool{}
	for _, m := range modules {
		for _, r := range m.Rules {
			name := r.Head.Ref()[0].Value.String()
			if !strings.HasPrefix(name, "test_") {
				continue
			}
			full := m.Package.Path.String() + "." + name
			if re != nil && !re.MatchString(full) {
				continue
			}
			seen[full] = true
		}
	}
	return len(seen)
}
