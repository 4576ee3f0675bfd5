package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-policy-agent/opa/v1/plugins/bundle"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/cli"
)

// wrongShape is a rule meant to stop the history's call to secret_op,
// written in a shape the engine does not read as written.
type wrongShape struct {
	note string
	// pkg is the rule's package; body the module after the package line
	// and a blank line, so the rule sits on row 3.
	pkg, body string
	// decision: a replacement availability policy (--no-defaults).
	decision bool
	// dynamic: the shape is legal at load and fails closed at run time
	// (its type is known only then).
	dynamic bool
}

const (
	rulesPkg  = "policycheck.rules.x"
	filterPkg = "policycheck.capabilities.vault" // vault owns secret_op and is always on
	availPkg  = "policycheck.availability"
	stop      = `input.call.tool == "secret_op"`
	okVerdict = `[{"verdict": "denied", "rule": "deny", "denials": []} | some _ in input.dispatch.calls]`
)

var wrongShapes = []wrongShape{
	// deny
	{note: "deny as a function", pkg: rulesPkg, body: `deny(x) if x == "secret_op"`},
	{note: "deny as a partial object", pkg: rulesPkg, body: `deny[x] := true if x := input.call.tool`},
	{note: "deny as a string", pkg: rulesPkg, body: `deny := "no"`},
	{note: "deny as an array", pkg: rulesPkg, body: `deny := ["no"] if ` + stop},
	{note: "deny as an object", pkg: rulesPkg, body: `deny := {"secret_op": true}`},
	{note: "deny holding a number", pkg: rulesPkg, body: `deny contains 42 if ` + stop},
	{note: "deny object with another key", pkg: rulesPkg, body: `deny contains {"msg": "no"} if ` + stop},
	{note: "deny object with a number reason", pkg: rulesPkg, body: `deny contains {"reason": 1, "message": "no"} if ` + stop},
	{note: "deny holding arrays", pkg: rulesPkg, body: `deny contains ["no"] if ` + stop},
	{note: "deny as a number with else", pkg: rulesPkg, body: `deny := 1 if ` + stop + ` else := 0`},
	{note: "deny holding numbers by type", pkg: rulesPkg, body: `deny contains n if {` + stop + `; n := count(input.call.args)}`},
	{note: "deny in a nested package", pkg: rulesPkg + ".y", body: `deny if ` + stop},
	{note: "deny in the rules root", pkg: "policycheck.rules", body: `deny if ` + stop},
	{note: "deny holding a number at run time", pkg: rulesPkg, dynamic: true,
		body: `deny contains n if {` + stop + "; n := json.unmarshal(`42`)}"},
	{note: "deny a string at run time", pkg: rulesPkg, dynamic: true, body: "deny := json.unmarshal(`\"no\"`) if " + stop},
	{note: "deny misspelt", pkg: rulesPkg, body: `deny_call contains "no" if ` + stop},
	{note: "deny on a misspelt call field", pkg: rulesPkg, body: `deny if input.call.name == "secret_op"`},
	{note: "deny on a misspelt context", pkg: rulesPkg, body: `deny if { ` + stop + `; input.contxt.env != "dev" }`},
	// hide
	{note: "hide as a string", pkg: rulesPkg, body: `hide := "secret_op"`},
	{note: "hide misspelt", pkg: rulesPkg, body: `hidden contains "secret_op"`},
	{note: "hide holding objects", pkg: rulesPkg, body: `hide contains {"name": "secret_op"}`},
	{note: "hide as a function", pkg: rulesPkg, body: `hide(x) := {x}`},
	{note: "hide as a boolean", pkg: rulesPkg, body: `hide := true`},
	{note: "hide as an object", pkg: rulesPkg, body: `hide := {"secret_op": true}`},
	{note: "hide holding a number", pkg: rulesPkg, body: `hide contains 1`},
	{note: "hide as an array", pkg: rulesPkg, body: `hide := ["secret_op"]`},
	{note: "hide as a partial object", pkg: rulesPkg, body: `hide[x] := true if x := "secret_op"`},
	{note: "hide a string at run time", pkg: rulesPkg, dynamic: true, body: "hide := json.unmarshal(`\"secret_op\"`)"},
	{note: "hide an array at run time", pkg: rulesPkg, dynamic: true, body: "hide := json.unmarshal(`[\"secret_op\"]`)"},
	{note: "hide naming a framework tool", pkg: rulesPkg, body: `hide := {"secret_op", "search_tools"}`},
	{note: "hide naming a framework tool at run time", pkg: rulesPkg, dynamic: true,
		body: "hide := {\"secret_op\", concat(\"_\", [\"search\", \"tools\"])}"},
	// prepare_tools
	{note: "filter as an array", pkg: filterPkg, body: `prepare_tools := ["get_time"]`},
	{note: "filter misspelt", pkg: filterPkg, body: `prepare_tool := {"get_time"}`},
	{note: "filter on a misspelt tool field", pkg: filterPkg, body: `prepare_tools contains t.name if { some t in input.tools; t.name != "secret_op"; input.tools[0].nme }`},
	{note: "filter as a string", pkg: filterPkg, body: `prepare_tools := "get_time"`},
	{note: "filter as a boolean", pkg: filterPkg, body: `prepare_tools if input.context`},
	{note: "filter as a function", pkg: filterPkg, body: `prepare_tools(x) := {x}`},
	{note: "filter as a partial object", pkg: filterPkg, body: `prepare_tools[x] := true if x := "get_time"`},
	{note: "filter holding objects", pkg: filterPkg, body: `prepare_tools contains {"name": "get_time"}`},
	{note: "filter in a nested package", pkg: filterPkg + ".x", body: `prepare_tools := {"get_time"}`},
	{note: "filter an array at run time", pkg: filterPkg, dynamic: true, body: "prepare_tools := json.unmarshal(`[\"get_time\"]`)"},
	// the availability decision, replaced
	{note: "decision as a partial set", pkg: availPkg, decision: true, body: `decision contains "get_time"`},
	{note: "decision as a function", pkg: availPkg, decision: true, body: `decision(x) := x`},
	{note: "decision as a string", pkg: availPkg, decision: true, body: `decision := "deny secret_op"`},
	{note: "decision missing keys", pkg: availPkg, decision: true, body: `decision := {"available": {"get_time"}}`},
	{note: "decision with a misspelt key", pkg: availPkg, decision: true,
		body: `decision := {"available": set(), "advertised": set(), "dispatch_available": set(), "verdict": ` + okVerdict + `}`},
	{note: "decision with arrays", pkg: availPkg, decision: true,
		body: `decision := {"available": [], "advertised": [], "dispatch_available": [], "verdicts": ` + okVerdict + `}`},
	{note: "decision with an unknown verdict at run time", pkg: availPkg, decision: true, dynamic: true,
		body: `decision := {"available": set(), "advertised": set(), "dispatch_available": set(), ` +
			`"verdicts": [{"verdict": "deny"} | some _ in input.dispatch.calls]}`},
}

// TestWrongRuleShapes drives each wrong shape through eval, check, and
// serve with the rule in a bundle: each is refused at load by all three
// (at its file and row) or, when its type is known only at run time,
// fails the decision closed; none executes the call it was meant to stop.
func TestWrongRuleShapes(t *testing.T) {
	require.GreaterOrEqual(t, len(wrongShapes), 25)
	dir := t.TempDir()
	regFile, histFile := filepath.Join(dir, "registry.json"), filepath.Join(dir, "history.json")
	require.NoError(t, os.WriteFile(regFile, []byte(testRegistry), 0o600))
	require.NoError(t, os.WriteFile(histFile, []byte(testHistory), 0o600))

	// Two sidecars, with and without the shipped policies, each first
	// serving a good revision that stops secret_op: a refused revision
	// leaves it serving, an accepted one replaces it.
	bsDefault, bsNoDefaults := newBundleServer(t), newBundleServer(t)
	col := newCollector(t)
	good := map[string]string{"/base.rego": "package policycheck.rules.base\n\ndeny contains \"baseline\" if " + stop + "\n"}
	bsDefault.publish(t, "good", good)
	withDefaults := start(t, testReg(t), withOPAConfig(opaConfig(bsDefault.URL, col.URL), "test"))
	bsNoDefaults.publish(t, "good", map[string]string{"/availability.rego": "package policycheck.availability\n\n" +
		`decision := {"available": set(), "advertised": set(), "dispatch_available": set(), "verdicts": ` + okVerdict + "}\n"})
	noDefaults := start(t, testReg(t), withEngine(engine.WithoutDefaults()),
		withOPAConfig(opaConfig(bsNoDefaults.URL, col.URL), "test"))
	ctx := context.Background()
	for _, rs := range []*running{withDefaults, noDefaults} {
		require.NoError(t, bundle.Lookup(rs.srv.Manager()).Trigger(ctx))
		status, d, body := decide(t, rs, "")
		require.Equal(t, 200, status, string(body))
		require.Equal(t, engine.Denied, d.Calls[0].Verdict, "the good revision stops secret_op")
	}

	for i, tc := range wrongShapes {
		t.Run(tc.note, func(t *testing.T) {
			src := "package " + tc.pkg + "\n\n" + tc.body + "\n"
			file := filepath.Join(dir, fmt.Sprintf("shape%d", i), "x.rego")
			require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
			require.NoError(t, os.WriteFile(file, []byte(src), 0o600))
			var flags []string
			if tc.decision {
				flags = []string{"--no-defaults"}
			}

			// eval
			var stdout, stderr bytes.Buffer
			code := cli.Run(append([]string{"eval", "--registry", regFile, "--history", histFile, "--policy", file}, flags...),
				nil, &stdout, &stderr)
			if tc.dynamic {
				require.Equal(t, cli.ExitOK, code, stderr.String())
				var d engine.Decision
				require.NoError(t, json.Unmarshal(stdout.Bytes(), &d))
				assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
				assert.NotEmpty(t, d.Errors, "a run-time failure fails the decision closed, saying why")
				assert.Empty(t, d.Available)
				assert.NotContains(t, strings.Join(d.Errors, "\n"), "gate.rego")
			} else {
				require.Equal(t, cli.ExitBadUsage, code, "eval loaded the shape: %s", stdout.String())
				assert.Contains(t, stderr.String(), "x.rego:3:")
			}

			// check
			stdout.Reset()
			stderr.Reset()
			code = cli.Run(append([]string{"check", file, "--registry", regFile}, flags...), nil, &stdout, &stderr)
			if !tc.dynamic {
				require.Equal(t, cli.ExitBadUsage, code, "check passed a shape eval refuses: %s", stdout.String())
				assert.Contains(t, stdout.String(), "x.rego:3:")
			}

			// serve, the rule in a bundle
			rs, bs := withDefaults, bsDefault
			if tc.decision {
				rs, bs = noDefaults, bsNoDefaults
			}
			rev := fmt.Sprintf("shape%d", i)
			bs.publish(t, rev, map[string]string{"/x.rego": src})
			_ = bundle.Lookup(rs.srv.Manager()).Trigger(ctx)
			_, h := health(t, rs)
			status, d, body := decide(t, rs, "")
			require.Equal(t, 200, status, string(body))
			assert.Equal(t, engine.Denied, d.Calls[0].Verdict, "secret_op executed: %s", body)
			if tc.dynamic {
				assert.Equal(t, rev, h.Bundles["pc"].Serving)
				assert.NotEmpty(t, d.Errors)
			} else {
				assert.NotEqual(t, rev, h.Bundles["pc"].Serving, "the sidecar took in a refused shape")
				assert.Contains(t, h.Bundles["pc"].Error, "x.rego:3:")
			}
		})
	}
}
