package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/loader"
)

// logOnlyRules is an operator package marked log-only: its deny and hide
// are reported as would_deny and would_hide, not enforced.
func logOnlyRules(marker string) string {
	return `# METADATA
# title: Refund ceiling, observed
# description: Log-only while we watch what it would do.
# custom:
#   ` + marker + `
package policycheck.rules.observe

deny contains {"reason": "refund above 40", "message": "Refunds above 40 need a supervisor."} if {
	input.call.tool == "issue_refund"
	input.call.args.amount > 40
}

hide contains "search_docs"
`
}

func examplesEngine(t *testing.T, extra ...string) (*engine.Engine, error) {
	t.Helper()
	root := filepath.Join(conformance.ModuleRoot(), "examples")
	reg, err := loader.ReadRegistry(filepath.Join(root, "registry.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	opts := []engine.Option{engine.Registry(reg), engine.PolicyPaths(filepath.Join(root, "policies"))}
	for i, src := range extra {
		opts = append(opts, engine.Modules(engine.Source{File: "extra" + string(rune('a'+i)) + ".rego", Text: src}))
	}
	return engine.New(context.Background(), opts...)
}

// TestLogOnlyRulesChangeNoVerdict: a log-only package's deny and hide
// change nothing the decision enforces (the JSON without would_deny and
// would_hide equals the decision without the package) and are reported
// on the call and the decision; the same package enforced denies.
func TestLogOnlyRulesChangeNoVerdict(t *testing.T) {
	ctx := context.Background()
	plain, err := examplesEngine(t)
	if err != nil {
		t.Fatal(err)
	}
	logOnly, err := examplesEngine(t, logOnlyRules("policycheck: {enforcement: log_only}"))
	if err != nil {
		t.Fatal(err)
	}
	enforced, err := examplesEngine(t, logOnlyRules("policycheck: {enforcement: enforce}"))
	if err != nil {
		t.Fatal(err)
	}
	sawDeny, sawHide := false, false
	for _, name := range []string{"refund-after-lookup.json", "refund.json"} {
		raw, err := os.ReadFile(filepath.Join(conformance.ModuleRoot(), "examples", "histories", name))
		if err != nil {
			t.Fatal(err)
		}
		h, err := loader.DecodeHistory(name, raw, loader.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		sawDeny, sawHide = decideLogOnly(t, ctx, h, plain, logOnly, enforced, sawDeny, sawHide)
	}
	if !sawDeny || !sawHide {
		t.Fatalf("the histories exercised would_deny %v, would_hide %v", sawDeny, sawHide)
	}
}

func decideLogOnly(t *testing.T, ctx context.Context, h facts.History, plain, logOnly, enforced *engine.Engine, sawDeny, sawHide bool) (bool, bool) {
	t.Helper()
	for n := 1; n <= len(h); n++ {
		req := engine.Request{History: h[:n], Context: map[string]any{"group": "support"}}
		dp, _ := plain.Decide(ctx, req)
		dl, _ := logOnly.Decide(ctx, req)
		if len(dl.WouldHide) > 0 {
			sawHide = true
			if !strings.Contains(strings.Join(dl.WouldHide, ","), "search_docs") {
				t.Errorf("prefix %d: would_hide %v", n, dl.WouldHide)
			}
		}
		for _, c := range dl.Calls {
			if len(c.WouldDeny) > 0 {
				sawDeny = true
				if c.Verdict != engine.Execute || !strings.Contains(c.WouldDeny[0], "would be denied by policycheck.rules.observe") {
					t.Errorf("prefix %d: %+v", n, c)
				}
			}
		}
		// Without the reports, the decisions are equal but for the
		// policy revision in the fingerprint.
		dl.WouldHide = nil
		for i := range dl.Calls {
			dl.Calls[i].WouldDeny = nil
		}
		dl.Fingerprint, dp.Fingerprint = "", ""
		a, _ := json.Marshal(dp)
		b, _ := json.Marshal(dl)
		if string(a) != string(b) {
			t.Errorf("prefix %d: a log-only rule changed the decision:\n%s\n%s", n, a, b)
		}
		de, _ := enforced.Decide(ctx, req)
		for i, c := range de.Calls {
			if c.Tool == "issue_refund" && c.Verdict != engine.Denied {
				t.Errorf("prefix %d: the enforced rule did not deny: %+v", n, de.Calls[i])
			}
		}
	}
	return sawDeny, sawHide
}

// TestMistypedLogOnlyMarkerIsRefused: a marker the engine does not read
// exactly is refused at load with its location, never taken as log-only.
func TestMistypedLogOnlyMarkerIsRefused(t *testing.T) {
	for marker, want := range map[string]string{
		"policycheck: {enforcement: logonly}":      `custom.policycheck.enforcement of package policycheck.rules.observe is "logonly"`,
		"policycheck: {enforcement: true}":         "custom.policycheck.enforcement of package policycheck.rules.observe is true",
		"policycheck: {enforcment: log_only}":      "custom.policycheck.enforcment of package policycheck.rules.observe is not a marker",
		"enforcement: log_only":                    "custom.enforcement of package policycheck.rules.observe is not read: markers go under custom.policycheck",
		"policycheck: {enforcement: [log_only]}":   "custom.policycheck.enforcement",
		"policycheck: {enforcement: \"LOG_ONLY\"}": `is "LOG_ONLY"`,
	} {
		_, err := examplesEngine(t, logOnlyRules(marker))
		var pe *engine.PolicyError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "extraa.rego:") {
			t.Errorf("%s: got %v, want a PolicyError containing %q", marker, err, want)
		}
	}
}

// TestExplanationNamesOnlyEnforcedHiders: a tool hidden by an enforced
// rules package and also named by a log-only one is explained by the
// enforced package alone: the log-only package hid nothing.
func TestExplanationNamesOnlyEnforcedHiders(t *testing.T) {
	ctx := context.Background()
	e, err := examplesEngine(t, logOnlyRules("policycheck: {enforcement: log_only}"), "package policycheck.rules.tidy\n\nhide contains \"search_docs\"\n")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(conformance.ModuleRoot(), "examples", "histories", "refund.json"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := loader.DecodeHistory("refund.json", raw, loader.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Decide(ctx, engine.Request{History: h, Context: map[string]any{"group": "support"}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(d.Removed("search_docs"), "\n")
	if !strings.Contains(got, "policycheck.rules.tidy.hide (extrab.rego:3:1)") {
		t.Errorf("the enforced hider is not named: %q", got)
	}
	if strings.Contains(got, "observe") {
		t.Errorf("a log-only package is named as hiding the tool: %q", got)
	}
}
