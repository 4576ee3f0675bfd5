package policytest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/conformance/runner"
)

var update = flag.Bool("update", false, "rewrite the committed fixtures under recorded/")

// fixture is one recorded run: the arguments of `policycheck facts
// --format input` that produce its input document.
type fixture struct {
	suite, name string
	registry    string   // registry file
	history     string   // history file
	context     string   // context file, optional
	policies    []string // --policy paths whose filters the input captures
}

func (f fixture) dir() string { return filepath.Join("recorded", f.suite, f.name) }

// exampleFixtures are recorded from the example registry and histories.
func exampleFixtures() []fixture {
	ex := func(name, history, ctx string, policies ...string) fixture {
		f := fixture{suite: "examples", name: name, registry: "../examples/registry.yaml",
			history: "../examples/histories/" + history + ".json", policies: policies}
		if ctx != "" {
			f.context = "../examples/context/" + ctx + ".json"
		}
		return f
	}
	return []fixture{
		ex("refund", "refund", ""),
		ex("after_compaction", "after-compaction", ""),
		ex("refund_after_lookup", "refund-after-lookup", ""),
		ex("vault_rotate_support", "vault-rotate", "support", "../examples/policies/vault"),
		ex("vault_rotate_admin", "vault-rotate", "admin", "../examples/policies/vault"),
	}
}

// conformanceCases are the shared corpus cases recorded as fixtures.
var conformanceCases = []string{
	"anchored-deferred-tool-anthropic-without-content",
	"capability-tool-after-compaction-refused-until-reloaded",
	"pre-compaction-discovered-tool-refused-until-rediscovered",
	"search-discovery-and-capability-load-coexist",
	"seed-same-response-load-then-call-refused",
	"unknown-tool-lists-only-available-tools",
	"seed-processor-injected-load-applies-filter",
	"seed-route2-control-honored-compaction",
	"seed-route2-foreign-compaction-applies-filter",
	"seed-route2-contentless-compaction-applies-filter",
}

// conformanceFixtures writes each selected case's registry, history and
// filters to a temporary directory, so that the fixture is produced by the
// command line like any other.
func conformanceFixtures(t *testing.T) []fixture {
	t.Helper()
	byName := map[string]conformance.Case{}
	for _, c := range conformance.Cases(t) {
		byName[strings.TrimSuffix(filepath.Base(c.File), ".json")] = c
	}
	tmp := t.TempDir()
	var out []fixture
	for _, name := range conformanceCases {
		c, ok := byName[name]
		require.True(t, ok, "conformance case %s is gone", name)
		dir := filepath.Join(tmp, name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		f := fixture{suite: "conformance", name: strings.ReplaceAll(name, "-", "_"),
			registry: filepath.Join(dir, "registry.json"), history: filepath.Join(dir, "history.json")}
		require.NoError(t, os.WriteFile(f.registry, c.Registry, 0o644))
		require.NoError(t, os.WriteFile(f.history, c.History, 0o644))
		for _, src := range runner.FilterModules(c) {
			p := filepath.Join(dir, filepath.Base(src.File))
			require.NoError(t, os.WriteFile(p, []byte(src.Text), 0o644))
			f.policies = append(f.policies, p)
		}
		out = append(out, f)
	}
	return out
}

// inputDocument runs `policycheck facts --format input` in-process.
func inputDocument(t *testing.T, f fixture) []byte {
	t.Helper()
	args := []string{"facts", "--format", "input", "--registry", f.registry, "--history", f.history}
	if f.context != "" {
		args = append(args, "--context", f.context)
	}
	for _, p := range f.policies {
		args = append(args, "--policy", p)
	}
	var out, errb bytes.Buffer
	code := cli.Run(args, strings.NewReader(""), &out, &errb)
	require.Equal(t, cli.ExitOK, code, errb.String())
	return out.Bytes()
}

// registryDocument runs `policycheck registry` in-process:
// data.policycheck.registry as the engine builds it, with sets as sorted
// arrays (fixture.rego restores them).
func registryDocument(t *testing.T, file string) []byte {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run([]string{"registry", "--registry", file}, strings.NewReader(""), &out, &errb)
	require.Equal(t, cli.ExitOK, code, errb.String())
	return out.Bytes()
}

// checkFile compares a committed fixture file with its regenerated
// content, or rewrites it under -update.
func checkFile(t *testing.T, path string, want []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, want, 0o644))
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s is missing: run go test ./policy_test -run TestFixturesAreFresh -update", path)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale (the engine's input document or the registry changed): "+
			"run go test ./policy_test -run TestFixturesAreFresh -update and review the diff", path)
	}
}

func TestFixturesAreFresh(t *testing.T) {
	t.Run("examples", func(t *testing.T) {
		for _, f := range exampleFixtures() {
			checkFile(t, filepath.Join(f.dir(), "input", "data.json"), inputDocument(t, f))
			checkFile(t, filepath.Join(f.dir(), "registry", "data.json"), registryDocument(t, f.registry))
		}
	})
	t.Run("conformance", func(t *testing.T) {
		for _, f := range conformanceFixtures(t) {
			checkFile(t, filepath.Join(f.dir(), "input", "data.json"), inputDocument(t, f))
			checkFile(t, filepath.Join(f.dir(), "registry", "data.json"), registryDocument(t, f.registry))
		}
	})
}

// The Rego replay of every committed fixture agrees with the engine's own
// decision on the recorded run: the fixtures and fixture.rego carry
// everything the policies read.
func TestReplayMatchesTheEngine(t *testing.T) {
	fixtures := exampleFixtures()
	if _, err := conformance.SharedDir(); err == nil {
		fixtures = append(fixtures, conformanceFixtures(t)...)
	}
	ctx := context.Background()
	pq, err := rego.New(
		rego.Query("d := data.policy_test.fixture.replay_default(input)"),
		rego.Load([]string{"../policies/availability/availability.rego", "../policies/lib/gate.rego",
			"../policies/lib/lib.rego", "fixture.rego"}, nil),
	).PrepareForEval(ctx)
	require.NoError(t, err)
	for _, f := range fixtures {
		t.Run(f.suite+"/"+f.name, func(t *testing.T) {
			var fx map[string]any
			for _, part := range []string{"input", "registry"} {
				b, err := os.ReadFile(filepath.Join(f.dir(), part, "data.json"))
				require.NoError(t, err)
				var v any
				require.NoError(t, json.Unmarshal(b, &v))
				if fx == nil {
					fx = map[string]any{}
				}
				fx[part] = v
			}
			rs, err := pq.Eval(ctx, rego.EvalInput(fx))
			require.NoError(t, err)
			require.Len(t, rs, 1)
			replayed := rs[0].Bindings["d"].(map[string]any)

			d := engineDecision(t, f)
			assert.Equal(t, d.Available, sortedNames(replayed["available"]), "available")
			assert.Equal(t, d.Advertised, sortedNames(replayed["advertised"]), "advertised")
			var verdicts []string
			for _, v := range replayed["verdicts"].([]any) {
				verdicts = append(verdicts, v.(map[string]any)["verdict"].(string))
			}
			var want []string
			for _, c := range d.Calls {
				want = append(want, c.Verdict)
			}
			assert.Equal(t, want, verdicts, "verdicts")
		})
	}
}

type decision struct {
	Available  []string `json:"available"`
	Advertised []string `json:"advertised"`
	Calls      []struct {
		Verdict string `json:"verdict"`
	} `json:"calls"`
}

func engineDecision(t *testing.T, f fixture) decision {
	t.Helper()
	args := []string{"eval", "--registry", f.registry, "--history", f.history}
	if f.context != "" {
		args = append(args, "--context", f.context)
	}
	for _, p := range f.policies {
		args = append(args, "--policy", p)
	}
	var out, errb bytes.Buffer
	require.Equal(t, cli.ExitOK, cli.Run(args, strings.NewReader(""), &out, &errb), errb.String())
	var d decision
	require.NoError(t, json.Unmarshal(out.Bytes(), &d))
	return d
}

func sortedNames(v any) []string {
	out := []string{}
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	slices.Sort(out)
	return out
}

// The scenario suites pass under OPA's test runner with the shipped
// policies, as `opa test policies/ policy_test/` runs them.
func TestScenarioSuitesPass(t *testing.T) {
	var out, errb bytes.Buffer
	code := cli.Run([]string{"test", "../policies", ".", "--timeout", "2m"}, strings.NewReader(""), &out, &errb)
	require.Equal(t, cli.ExitOK, code, "%s\n%s", out.String(), errb.String())
}
