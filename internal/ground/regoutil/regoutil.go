// Package regoutil holds the small Rego helpers that the engine and the
// command line share: naming a filter package's capability, finding the
// filter rules and the nondeterministic built-ins they reach, finding the
// packages the engine never reads, parsing the shipped policies, and
// describing a Rego result's JSON type in messages.
package regoutil

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/policies"
)

// CapabilityOf returns the capability id of a filter package path
// (data.policycheck.capabilities.<id>, or ["<id>"] for ids that are not
// Rego identifiers), or "" for any other path.
func CapabilityOf(p ast.Ref) string {
	if len(p) != 4 || !p[0].Equal(ast.DefaultRootDocument) {
		return ""
	}
	if p[1].Value.Compare(ast.String("policycheck")) != 0 || p[2].Value.Compare(ast.String("capabilities")) != 0 {
		return ""
	}
	s, ok := p[3].Value.(ast.String)
	if !ok {
		return ""
	}
	return string(s)
}

// JSONKind names the JSON type of a value converted from a Rego result,
// with its article ("a string", "an array", "null"), for error messages.
func JSONKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a number"
}

// FilterRules returns every prepare_tools rule of the filter packages
// (policycheck.capabilities.<id>) in c, in module order.
func FilterRules(c *ast.Compiler) []*ast.Rule {
	var out []*ast.Rule
	for _, m := range c.Modules {
		if CapabilityOf(m.Package.Path) == "" {
			continue
		}
		for _, r := range m.Rules {
			if ref := r.Head.Ref(); len(ref) > 0 && ref[0].Value.Compare(ast.Var("prepare_tools")) == 0 {
				out = append(out, r)
			}
		}
	}
	return out
}

// NondeterministicCall is a call of a nondeterministic built-in.
type NondeterministicCall struct {
	Builtin string
	Expr    *ast.Expr
}

// NondeterministicCalls returns every call of a nondeterministic built-in
// (http.send, time.now_ns, rand.*, …) that root reaches, through the rules
// and functions it depends on. seen may be shared across roots to report
// each call once; nil means a fresh set.
func NondeterministicCalls(c *ast.Compiler, root *ast.Rule, seen map[*ast.Rule]bool) []NondeterministicCall {
	if seen == nil {
		seen = map[*ast.Rule]bool{}
	}
	var out []NondeterministicCall
	var visit func(r *ast.Rule)
	visit = func(r *ast.Rule) {
		if seen[r] {
			return
		}
		seen[r] = true
		ast.WalkExprs(r, func(e *ast.Expr) bool {
			if !e.IsCall() {
				return false
			}
			name := e.Operator().String()
			if b, ok := ast.BuiltinMap[name]; ok && b.Nondeterministic {
				out = append(out, NondeterministicCall{Builtin: name, Expr: e})
			}
			return false
		})
		for dep := range c.Graph.Dependencies(r) {
			if dr, ok := dep.(*ast.Rule); ok {
				visit(dr)
			}
		}
	}
	visit(root)
	return out
}

// ShippedModule is one shipped default policy, parsed.
type ShippedModule struct {
	// File names the module as the command line reports it:
	// "policycheck:policies/<path>".
	File   string
	Text   string
	Module *ast.Module
}

// ShippedModules parses the shipped default policies (tests excluded), in
// file order.
func ShippedModules() ([]ShippedModule, error) {
	fsys := policies.FS()
	var out []ShippedModule
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".rego" || strings.HasSuffix(p, "_test.rego") {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		name := "policycheck:policies/" + p
		m, err := ast.ParseModuleWithOpts(name, string(b), ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			return fmt.Errorf("shipped policy %s: %w", p, err)
		}
		out = append(out, ShippedModule{File: name, Text: string(b), Module: m})
		return nil
	})
	return out, err
}

// EngineReads reports whether the engine evaluates rules of package pkg
// by its name: policycheck.rules.*, policycheck.capabilities.*,
// policycheck.availability and policycheck.lib*. A module in any other
// package is read only if a module the engine reads refers to it.
func EngineReads(pkg ast.Ref) bool {
	p := strings.TrimPrefix(pkg.String(), "data.")
	switch {
	case strings.HasPrefix(p, "policycheck.rules."), strings.HasPrefix(p, "policycheck.rules["),
		strings.HasPrefix(p, "policycheck.capabilities."), strings.HasPrefix(p, "policycheck.capabilities["),
		p == "policycheck.availability", strings.HasPrefix(p, "policycheck.lib"):
		return true
	}
	return false
}

// UnreadPackages returns, sorted by file, the modules (file -> module, as
// in ast.Compiler.Modules) that the engine never evaluates: outside the
// packages EngineReads names, and referred to by no module of another
// package. Their rules are dead: usually a typo in the package line.
func UnreadPackages(modules map[string]*ast.Module) []*ast.Module {
	files := make([]string, 0, len(modules))
	for f := range modules {
		files = append(files, f)
	}
	sort.Strings(files)
	var out []*ast.Module
	for _, file := range files {
		m := modules[file]
		if EngineReads(m.Package.Path) || referenced(modules, m.Package.Path) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// referenced reports whether a module of another package refers to pkg
// (or to a document inside it, or to one containing it).
func referenced(modules map[string]*ast.Module, pkg ast.Ref) bool {
	found := false
	for _, m := range modules {
		if m.Package.Path.Equal(pkg) {
			continue
		}
		ast.WalkRefs(m, func(r ast.Ref) bool {
			if found || !r.HasPrefix(ast.DefaultRootRef) {
				return found
			}
			g := r.ConstantPrefix()
			if g.HasPrefix(pkg) || (len(g) > 1 && pkg.HasPrefix(g)) {
				found = true
			}
			return found
		})
		if found {
			return true
		}
	}
	return false
}
