// Package regolint enforces the handful of Regal rules that matter most to
// policycheck's Rego, for CI, which does not run Regal itself. Regal covers
// these rules and more: with the repository's .regal/config.yaml it reports
// nothing on policies/, examples/policies, examples/candidate and
// policy_test, linted together (docs/testing.md, "Linting").
//
// The rules, with the Regal rule each stands for:
//
//   - v1-syntax: the module parses as Rego v1 (`if`, `contains`), and does
//     not `import rego.v1` or `future.keywords` (Regal: use-rego-v1,
//     rule-named-if, deprecated-builtin family).
//   - package-metadata: a policy module (not a test) opens with a
//     `# METADATA` block with a title (Regal: custom/missing-metadata).
//   - entrypoint-metadata: the rules the engine reads (contract.Table:
//     decision, prepare_tools, hide, deny, require_approval) carry a `# METADATA` block on at least one
//     of their definitions (Regal: custom/missing-metadata).
//   - test-naming: tests live in *_test.rego files whose package ends in
//     _test, and every rule there that looks like a test is named test_*
//     (Regal: test-outside-test-package, file-missing-test-suffix).
//   - filter-nondeterminism: a capability filter module
//     (policycheck.capabilities.*) calls no nondeterministic built-in
//     (http.send, time.now_ns, rand.*, …): filter results are cached.
//   - line-length: no line is longer than 120 columns (Regal: line-length).
//
// Lint is a pure function of the file contents and safe for concurrent use.
package regolint

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/internal/contract"
)

// MaxLineLength is the longest line allowed, in columns (runes).
const MaxLineLength = 120

// Rule names, stable for allowlists.
const (
	RuleV1Syntax             = "v1-syntax"
	RulePackageMetadata      = "package-metadata"
	RuleEntrypointMetadata   = "entrypoint-metadata"
	RuleTestNaming           = "test-naming"
	RuleFilterNondeterminism = "filter-nondeterminism"
	RuleLineLength           = "line-length"
)

// entrypoints are the rules the engine evaluates, by package root: the
// operator contract's table.
var entrypoints = func() map[string][]string {
	out := map[string][]string{}
	for _, e := range contract.Table {
		out[e.Root] = append(out[e.Root], e.Name)
	}
	return out
}()

// Finding is one violation.
type Finding struct {
	Rule    string
	File    string
	Row     int
	Message string
}

func (f Finding) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", f.File, f.Row, f.Rule, f.Message)
}

// Lint checks one Rego file.
func Lint(file, text string) []Finding {
	var out []Finding
	add := func(rule string, row int, format string, args ...any) {
		out = append(out, Finding{Rule: rule, File: file, Row: row, Message: fmt.Sprintf(format, args...)})
	}
	for i, line := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(line); n > MaxLineLength {
			add(RuleLineLength, i+1, "line is %d columns long, more than %d", n, MaxLineLength)
		}
	}
	m, err := ast.ParseModuleWithOpts(file, text, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
	if err != nil {
		add(RuleV1Syntax, errRow(err), "does not parse as Rego v1: %v", err)
		return out
	}
	isTest := strings.HasSuffix(file, "_test.rego")
	pkg := strings.TrimPrefix(m.Package.Path.String(), "data.")

	for _, imp := range m.Imports {
		path := imp.Path.String()
		if path == "rego.v1" || strings.HasPrefix(path, "future.keywords") {
			add(RuleV1Syntax, imp.Location.Row, "import %s is a no-op in Rego v1: remove it", path)
		}
	}

	if !isTest && !hasPackageTitle(m) {
		add(RulePackageMetadata, m.Package.Location.Row, "package %s has no # METADATA block with a title", pkg)
	}

	if !isTest {
		for root, names := range entrypoints {
			if pkg != root && !strings.HasPrefix(pkg, root+".") && !strings.HasPrefix(pkg, root+"[") {
				continue
			}
			for _, name := range names {
				first, annotated := 0, false
				for _, r := range m.Rules {
					if ruleName(r) != name {
						continue
					}
					if first == 0 {
						first = r.Location.Row
					}
					if len(r.Annotations) > 0 {
						annotated = true
					}
				}
				if first > 0 && !annotated {
					add(RuleEntrypointMetadata, first, "entrypoint rule %s has no # METADATA block", name)
				}
			}
		}
	}

	switch {
	case isTest && !strings.HasSuffix(pkg, "_test"):
		add(RuleTestNaming, m.Package.Location.Row, "test file's package %s does not end in _test", pkg)
	case !isTest:
		for _, r := range m.Rules {
			if strings.HasPrefix(ruleName(r), "test_") {
				add(RuleTestNaming, r.Location.Row, "test %s outside a *_test.rego file", ruleName(r))
			}
		}
	}
	if isTest {
		for _, r := range m.Rules {
			name := ruleName(r)
			if strings.HasPrefix(strings.ToLower(name), "test") && !strings.HasPrefix(name, "test_") {
				add(RuleTestNaming, r.Location.Row, "test-like rule %s is not named test_<behaviour>", name)
			}
		}
	}

	if strings.HasPrefix(pkg, "policycheck.capabilities.") || strings.HasPrefix(pkg, "policycheck.capabilities[") {
		// Calls are expressions (f(x)) or terms nested in them (f(x) > 0).
		check := func(name string, loc *ast.Location) {

			if b, ok := ast.BuiltinMap[name]; ok && b.Nondeterministic {
				add(RuleFilterNondeterminism, loc.Row,
					"filter calls the nondeterministic built-in %s: filter results are cached", name)
			}
		}
		ast.WalkExprs(m, func(e *ast.Expr) bool {
			if e.IsCall() {
				check(e.Operator().String(), e.Location)
			}
			return false
		})
		ast.WalkTerms(m, func(t *ast.Term) bool {
			if c, ok := t.Value.(ast.Call); ok && len(c) > 0 {
				check(c[0].String(), t.Location)
			}
			return false
		})
	}

	sort.SliceStable(out, func(i, j int) bool { return out[i].Row < out[j].Row })
	return out
}

func ruleName(r *ast.Rule) string {
	ref := r.Head.Ref()
	if len(ref) == 0 {
		return r.Head.Name.String()
	}
	return ref[0].Value.String()
}

func hasPackageTitle(m *ast.Module) bool {
	for _, a := range m.Annotations {
		if a.Scope == "package" && a.Title != "" {
			return true
		}
	}
	return false
}

func errRow(err error) int {
	if errs, ok := err.(ast.Errors); ok && len(errs) > 0 && errs[0].Location != nil {
		return errs[0].Location.Row
	}
	return 0
}
