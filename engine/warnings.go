package engine

import (
	"fmt"
	"strings"

	"github.com/policycheck/policycheck/internal/ground/regoutil"
)

// CodeUnreadPackage is the code of the warning about a module in a
// package the engine never evaluates.
const CodeUnreadPackage = "package_outside_policycheck"

// OnWarning registers f to be called, each time a policy set compiles (New,
// and every Reload, bundle revisions included), with each problem that
// does not stop the policies from loading but deserves the operator's
// eye: today, a module in a package the engine never reads (see
// Warnings). f must not block.
func OnWarning(f func(PolicyProblem)) Option {
	return func(c *config) { c.onWarning = append(c.onWarning, f) }
}

// Warnings returns the problems found when the current policy set
// compiled that did not stop it from loading: each module in a package the
// engine never evaluates (outside policycheck.rules.*,
// policycheck.capabilities.*, policycheck.availability and
// policycheck.lib*, and imported by none of them), whose rules can never
// take part in a decision.
func (e *Engine) Warnings() []PolicyProblem { return e.snap.Load().warnings }

// unreadPackageWarnings finds the modules of the compiled set whose rules
// no decision can reach.
func unreadPackageWarnings(c *compiled) []PolicyProblem {
	var out []PolicyProblem
	for _, m := range regoutil.UnreadPackages(c.compiler.Modules) {
		p := PolicyProblem{Code: CodeUnreadPackage, Message: fmt.Sprintf(
			"package %s is outside the packages the engine reads (policycheck.rules.*, policycheck.capabilities.*, "+
				"policycheck.availability, policycheck.lib*) and no policy imports it: its rules are never evaluated",
			strings.TrimPrefix(m.Package.Path.String(), "data."))}
		if loc := m.Package.Location; loc != nil {
			p.File, p.Row, p.Col = loc.File, loc.Row, loc.Col
		}
		out = append(out, p)
	}
	return out
}
