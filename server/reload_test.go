package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/servetest"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// hideRule is an operator rules package hiding tool.
func hideRule(tool string) string {
	return "package policycheck.rules.test\n\nhide contains \"" + tool + "\"\n"
}

// availableAfter decides body and returns the tools available next.
func availableAfter(t *testing.T, rs *running, body []byte) []string {
	t.Helper()
	status, out := rs.post(t, "/v1/decide", body)
	require.Equal(t, http.StatusOK, status, string(out))
	var d engine.Decision
	require.NoError(t, json.Unmarshal(out, &d))
	return d.Available
}

// available decides testHistory and returns the tools available next.
func available(t *testing.T, rs *running) []string {
	t.Helper()
	return availableAfter(t, rs, []byte(`{"history": `+testHistory+`}`))
}

// policyRevision reads the policy revision being served from /health.
func policyRevision(t *testing.T, rs *running) string {
	t.Helper()
	_, h := health(t, rs)
	return h.PolicyRevision
}

// TestReload: Reload swaps in the policies as the files now hold them;
// unchanged files swap nothing; policies that do not compile are refused
// with their error while the last good ones keep serving; /metrics counts
// each outcome.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "hide.rego")
	require.NoError(t, os.WriteFile(file, []byte(hideRule("get_time")), 0o600))
	rs := start(t, testReg(t), withEngine(engine.PolicyPaths(dir)))
	ctx := context.Background()
	before := available(t, rs)
	require.NotContains(t, before, "get_time")
	rev := policyRevision(t, rs)

	require.NoError(t, os.WriteFile(file, []byte(hideRule("secret_op")), 0o600))
	require.Equal(t, before, available(t, rs), "nothing changes before Reload")
	swapped, err := rs.srv.Reload(ctx)
	require.NoError(t, err)
	require.True(t, swapped)
	got := available(t, rs)
	require.Contains(t, got, "get_time")
	require.NotContains(t, got, "secret_op")
	require.NotEqual(t, rev, policyRevision(t, rs))
	rev = policyRevision(t, rs)

	swapped, err = rs.srv.Reload(ctx)
	require.NoError(t, err)
	require.False(t, swapped, "the same policies are not swapped in again")

	require.NoError(t, os.WriteFile(file, []byte("package policycheck.rules.test\n\nhide contains x if {"), 0o600))
	swapped, err = rs.srv.Reload(ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), "hide.rego")
	require.False(t, swapped)
	require.Equal(t, rev, policyRevision(t, rs), "the last good policies keep serving")
	require.Equal(t, got, available(t, rs))

	_, metrics := rs.do(t, http.MethodGet, "/metrics", nil)
	for _, want := range []string{`policycheck_policy_reloads_total{result="swapped"} 1`, `policycheck_policy_reloads_total{result="unchanged"} 1`, `policycheck_policy_reloads_total{result="refused"} 1`} {
		require.Contains(t, string(metrics), want)
	}
}

// TestReloadUnderLoad: decisions made while the policies are reloaded
// over and over are each made wholly by one of them (go test -race
// checks the swap).
func TestReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "hide.rego")
	rs := start(t, testReg(t), withEngine(engine.PolicyPaths(dir)))
	answer := map[string]string{} // tool hidden -> the available tools
	load := func(tool string) {
		require.NoError(t, os.WriteFile(file, []byte(hideRule(tool)), 0o600))
		_, err := rs.srv.Reload(context.Background())
		require.NoError(t, err)
	}
	for _, tool := range []string{"secret_op", "get_time"} {
		load(tool)
		answer[tool] = strings.Join(available(t, rs), ",")
	}
	require.NotEqual(t, answer["secret_op"], answer["get_time"])
	decideWhile(t, rs, answer, func() {
		for i := range 20 {
			load([]string{"secret_op", "get_time"}[i%2])
		}
	})
}

// decideWhile has four clients decide testHistory while swap runs, and
// returns how many decisions they made: each must have answered 200 with
// the available tools of one of answers' values.
func decideWhile(t *testing.T, rs *running, answers map[string]string, swap func()) int {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	decided := 0
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, body := rs.post(t, "/v1/decide", []byte(`{"history": `+testHistory+`}`))
				var d engine.Decision
				_ = json.Unmarshal(body, &d)
				got := strings.Join(d.Available, ",")
				mu.Lock()
				decided++
				if status != http.StatusOK || !slices.Contains(slices.Collect(maps.Values(answers)), got) {
					bad = append(bad, string(body))
				}
				mu.Unlock()
			}
		})
	}
	swap()
	close(stop)
	wg.Wait()
	require.Empty(t, bad)
	require.Positive(t, decided)
	return decided
}

// registryRevision reads the configured registry's revision from /health.
func registryRevision(t *testing.T, rs *running) string {
	t.Helper()
	_, h := health(t, rs)
	return h.RegistryRevision
}

// parsedRegistry parses a JSON registry.
func parsedRegistry(t *testing.T, raw string) *facts.Registry {
	t.Helper()
	reg, err := loader.ParseRegistry("test", []byte(raw))
	require.NoError(t, err)
	return reg
}

// TestReloadRegistry: Reload with ReplaceRegistry swaps the configured
// registry in with the policies: stateless requests, a run that began
// before (at its next step) and a history the prefix cache remembers all
// decide with the new one; the same registry again swaps nothing; a
// registry the policies do not compile against (a filter for a
// capability it drops) is refused, policies and registry together, and
// the last good pair keeps serving.
func TestReloadRegistry(t *testing.T) {
	dir := t.TempDir()
	rs := start(t, testReg(t), withEngine(engine.PolicyPaths(dir)))
	ctx := context.Background()
	withExtra := `{"capabilities":[{"id":"vault","defer_loading":false},{"id":"extra","defer_loading":false}],` +
		`"tools":[{"name":"get_time"},{"name":"secret_op","capability":"vault"},{"name":"extra_tool","capability":"extra"},{"name":"new_tool"}]}`
	withNew := `{"capabilities":[{"id":"vault","defer_loading":false}],` +
		`"tools":[{"name":"get_time"},{"name":"secret_op","capability":"vault"},{"name":"new_tool"}]}`

	first := `{"history": [{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}]}`
	step := func(offset int, msg string) []string {
		status, out := rs.post(t, "/v1/runs/r1/decide", []byte(`{"offset": `+strconv.Itoa(offset)+`, "messages": [`+msg+`]}`))
		require.Equal(t, http.StatusOK, status, string(out))
		var d engine.Decision
		require.NoError(t, json.Unmarshal(out, &d))
		return d.Available
	}
	require.NotContains(t, step(0, `{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}`), "new_tool")
	// A history sent twice is remembered whole by the prefix cache.
	for range 2 {
		require.NotContains(t, availableAfter(t, rs, []byte(first)), "new_tool")
	}
	rev, regRev := policyRevision(t, rs), registryRevision(t, rs)

	swapped, err := rs.srv.Reload(ctx, server.ReplaceRegistry(parsedRegistry(t, withNew)))
	require.NoError(t, err)
	require.True(t, swapped)
	require.Contains(t, available(t, rs), "new_tool")
	require.NotEqual(t, regRev, registryRevision(t, rs))
	require.Equal(t, rev, policyRevision(t, rs), "the policies did not change")
	require.Contains(t, step(1, `{"kind":"response","parts":[{"part_kind":"text","content":"ok"}]}`), "new_tool", "a run's next step decides with the new registry")
	grown := strings.TrimSuffix(first, "]}") + `,{"kind":"response","parts":[{"part_kind":"text","content":"ok"}]}]}`
	require.Contains(t, availableAfter(t, rs, []byte(grown)), "new_tool", "a remembered prefix is not resumed over the old registry")

	swapped, err = rs.srv.Reload(ctx, server.ReplaceRegistry(parsedRegistry(t, withNew)))
	require.NoError(t, err)
	require.False(t, swapped, "the same registry, parsed again, is not swapped in again")

	// A filter for a capability only the next registry has: neither
	// compiles without the other, and together they are swapped in.
	filter := []byte("package policycheck.capabilities.extra\n\nprepare_tools := {t.name | some t in input.tools; t.name != \"extra_tool\"}\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "extra.rego"), filter, 0o600))
	_, err = rs.srv.Reload(ctx)
	require.ErrorContains(t, err, "extra")
	swapped, err = rs.srv.Reload(ctx, server.ReplaceRegistry(parsedRegistry(t, withExtra)))
	require.NoError(t, err)
	require.True(t, swapped)
	got := available(t, rs)
	require.Contains(t, got, "new_tool")
	require.NotContains(t, got, "extra_tool", "the filter the new registry let in decides")
	rev, regRev = policyRevision(t, rs), registryRevision(t, rs)

	// Dropping the capability the filter names is refused: the pair in
	// place keeps serving.
	swapped, err = rs.srv.Reload(ctx, server.ReplaceRegistry(parsedRegistry(t, withNew)))
	require.ErrorContains(t, err, "extra")
	require.False(t, swapped)
	require.Equal(t, rev, policyRevision(t, rs))
	require.Equal(t, regRev, registryRevision(t, rs))
	require.Equal(t, got, available(t, rs))

	_, err = rs.srv.Reload(ctx, server.ReplaceRegistry(nil))
	require.ErrorContains(t, err, "nil")
	_, err = rs.srv.Reload(ctx, server.ReadRegistry(func() (*facts.Registry, error) {
		return nil, errors.New("registry.yaml: not a registry")
	}))
	require.ErrorContains(t, err, "registry.yaml: not a registry")
	_, err = rs.srv.Reload(ctx, server.ReadRegistry(nil))
	require.ErrorContains(t, err, "no function", "a nil reader is refused, not read as no new registry")
	require.Equal(t, regRev, registryRevision(t, rs))
	for result, n := range map[string]float64{"swapped": 2, "unchanged": 1, "refused": 5} {
		require.Equal(t, n, metricValue(t, rs, `policycheck_policy_reloads_total{result="`+result+`"}`), result)
	}
	require.Equal(t, 1.0, metricValue(t, rs, "policycheck_policy_reload_failing"), "the last reload was refused")
	swapped, err = rs.srv.Reload(ctx, server.ReplaceRegistry(parsedRegistry(t, withExtra)))
	require.NoError(t, err)
	require.False(t, swapped)
	require.Zero(t, metricValue(t, rs, "policycheck_policy_reload_failing"), "a reload that is not refused clears it")
}

// TestReloadShadow: Reload compiles the shadow policy again from its
// files, with the enforced policies: the candidate as now written is
// the one compared; a candidate that does not compile refuses the whole
// reload, the enforced policies' change included.
func TestReloadShadow(t *testing.T) {
	enforced, candidate := t.TempDir(), t.TempDir()
	shadowFile := filepath.Join(candidate, "candidate.rego")
	require.NoError(t, os.WriteFile(shadowFile, []byte(hideRule("nothing_at_all")), 0o600))
	rs := start(t, testReg(t), withEngine(engine.PolicyPaths(enforced)), withShadow(candidate))
	ctx := context.Background()
	// testHistory dispatches a call of secret_op: the candidate that
	// hides it refuses the call.
	disagreements := func() float64 {
		_, body := rs.do(t, http.MethodGet, "/metrics", nil)
		m := regexp.MustCompile(`(?m)^policycheck_shadow_disagreements_total\{kind="call",transition="execute->\w+"\} (\d+)$`).FindSubmatch(body)
		if m == nil {
			return 0
		}
		n, err := strconv.ParseFloat(string(m[1]), 64)
		require.NoError(t, err)
		return n
	}
	shadowed := func() float64 { return metricValue(t, rs, "policycheck_shadow_decisions_total") }
	// The worker counts a decision before its disagreements: the
	// counts that follow are read once the next decision is counted.
	decideShadowed := func() {
		n := shadowed()
		available(t, rs)
		require.Eventually(t, func() bool { return shadowed() > n }, 10*time.Second, 5*time.Millisecond)
	}
	decideShadowed()
	require.Zero(t, disagreements(), "the candidate agrees")

	require.NoError(t, os.WriteFile(shadowFile, []byte(hideRule("secret_op")), 0o600))
	decideShadowed()
	require.Zero(t, disagreements(), "nothing changes before Reload")
	swapped, err := rs.srv.Reload(ctx)
	require.NoError(t, err)
	require.True(t, swapped, "the shadow policy changed")
	decideShadowed()
	require.Eventually(t, func() bool { return disagreements() == 1 }, 10*time.Second, 5*time.Millisecond,
		"the candidate as rewritten hides secret_op")

	rev := policyRevision(t, rs)
	require.NoError(t, os.WriteFile(filepath.Join(enforced, "hide.rego"), []byte(hideRule("get_time")), 0o600))
	require.NoError(t, os.WriteFile(shadowFile, []byte("package policycheck.rules.test\n\nhide contains x if {"), 0o600))
	swapped, err = rs.srv.Reload(ctx)
	require.ErrorContains(t, err, "shadow policy")
	require.False(t, swapped)
	require.Equal(t, rev, policyRevision(t, rs), "the enforced change waits for a candidate that compiles")
	require.Contains(t, available(t, rs), "get_time")
}

// TestReloadRegistryUnderLoad: decisions made while the registry is
// swapped over and over, with a shadow policy recompiled at each swap,
// are each made wholly with one registry, and every one is shadowed by
// the candidate of its own state (go test -race checks the swap).
func TestReloadRegistryUnderLoad(t *testing.T) {
	candidate := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(candidate, "hide.rego"), []byte(hideRule("get_time")), 0o600))
	regs := map[string]*facts.Registry{
		"plain":    parsedRegistry(t, testRegistry),
		"new_tool": parsedRegistry(t, strings.Replace(testRegistry, `{"name":"get_time"}`, `{"name":"get_time"},{"name":"new_tool"}`, 1)),
	}
	rs := start(t, withRegistry(regs["plain"]), withShadow(candidate))
	answer := map[string]string{}
	for _, name := range []string{"new_tool", "plain"} {
		_, err := rs.srv.Reload(context.Background(), server.ReplaceRegistry(regs[name]))
		require.NoError(t, err)
		answer[name] = strings.Join(available(t, rs), ",")
	}
	require.NotEqual(t, answer["plain"], answer["new_tool"])
	decided := decideWhile(t, rs, answer, func() {
		for i := range 20 {
			_, err := rs.srv.Reload(context.Background(), server.ReplaceRegistry(regs[[]string{"new_tool", "plain"}[i%2]]))
			require.NoError(t, err)
		}
	})
	// Every decision was shadowed (or dropped, had the queue been
	// full), none skipped for a registry the shadow was not compiled
	// with, none failed.
	require.Eventually(t, func() bool {
		return metricValue(t, rs, "policycheck_shadow_decisions_total")+shadowDropped(t, rs) >= float64(decided)
	}, 10*time.Second, 5*time.Millisecond)
	require.Zero(t, metricValue(t, rs, "policycheck_shadow_skipped_total"))
	require.Zero(t, metricValue(t, rs, "policycheck_shadow_errors_total"))
}

// TestReloadDrops: policies that drop a package or a rule the serving
// ones define (a guard file deleted, one of two definitions of a rule
// removed) are refused by Reload, named in its error, in /health's
// last_reload and counted in /metrics, while the guard keeps deciding;
// with AllowDrops they are swapped in with a warning naming them. A
// change that drops nothing is taken as before.
func TestReloadDrops(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	write("guard.rego", "package policycheck.rules.guard\n\nhide contains \"get_time\"\n")
	write("shared_a.rego", "package policycheck.rules.shared\n\nhide contains \"nothing_a\"\n")
	write("shared_b.rego", "package policycheck.rules.shared\n\nhide contains \"nothing_b\"\n")
	var logs servetest.Log
	rs := start(t, testReg(t), withEngine(engine.PolicyPaths(dir)),
		withLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx := context.Background()
	require.NotContains(t, available(t, rs), "get_time")
	_, h := health(t, rs)
	require.Nil(t, h.LastReload, "no reload yet")
	rev := policyRevision(t, rs)

	require.NoError(t, os.Remove(filepath.Join(dir, "guard.rego")))
	swapped, err := rs.srv.Reload(ctx)
	require.False(t, swapped)
	var dropped *server.DroppedError
	require.ErrorAs(t, err, &dropped)
	require.Equal(t, []string{"data.policycheck.rules.guard"}, dropped.Packages)
	require.Equal(t, []string{"data.policycheck.rules.guard.hide"}, dropped.Rules)
	require.ErrorContains(t, err, "data.policycheck.rules.guard")
	require.NotContains(t, available(t, rs), "get_time", "the guard keeps deciding")
	require.Equal(t, rev, policyRevision(t, rs))
	status, h := health(t, rs)
	require.Equal(t, http.StatusOK, status, "the last good policies serve")
	require.Equal(t, &server.ReloadHealth{Result: "refused", Error: err.Error(),
		DroppedPackages: dropped.Packages, DroppedRules: dropped.Rules}, h.LastReload)
	require.Equal(t, 1.0, metricValue(t, rs, `policycheck_policy_reload_drops_total{result="refused"}`))
	require.Equal(t, 1.0, metricValue(t, rs, `policycheck_policy_reloads_total{result="refused"}`))
	require.Equal(t, 1.0, metricValue(t, rs, "policycheck_policy_reload_failing"))

	swapped, err = rs.srv.Reload(ctx, server.AllowDrops())
	require.NoError(t, err)
	require.True(t, swapped)
	require.Contains(t, available(t, rs), "get_time", "taken with AllowDrops, the guard is gone")
	_, h = health(t, rs)
	require.Equal(t, &server.ReloadHealth{Result: "swapped",
		DroppedPackages: []string{"data.policycheck.rules.guard"}, DroppedRules: []string{"data.policycheck.rules.guard.hide"}}, h.LastReload)
	require.Equal(t, 1.0, metricValue(t, rs, `policycheck_policy_reload_drops_total{result="swapped"}`))
	require.Zero(t, metricValue(t, rs, "policycheck_policy_reload_failing"))
	require.Regexp(t, `level=WARN msg="reloaded policies that drop[^"]*" packages=\[data.policycheck.rules.guard\] rules=\[data.policycheck.rules.guard.hide\]`, logs.String())

	// One of the package's two definitions of hide removed: the package
	// stays, the rule is defined fewer times.
	require.NoError(t, os.Remove(filepath.Join(dir, "shared_b.rego")))
	_, err = rs.srv.Reload(ctx)
	require.ErrorAs(t, err, &dropped)
	require.Empty(t, dropped.Packages)
	require.Equal(t, []string{"data.policycheck.rules.shared.hide (2 definitions, now 1)"}, dropped.Rules)
	require.Equal(t, 2.0, metricValue(t, rs, `policycheck_policy_reload_drops_total{result="refused"}`))

	// Written back, and a definition changed: nothing dropped.
	write("shared_b.rego", "package policycheck.rules.shared\n\nhide contains \"secret_op\"\n")
	swapped, err = rs.srv.Reload(ctx)
	require.NoError(t, err)
	require.True(t, swapped)
	require.NotContains(t, available(t, rs), "secret_op")
	_, h = health(t, rs)
	require.Equal(t, &server.ReloadHealth{Result: "swapped"}, h.LastReload)
	require.Equal(t, 2.0, metricValue(t, rs, `policycheck_policy_reload_drops_total{result="refused"}`))
}

// TestReloadDropsWithoutARegistry: a server without a registry, whose
// policies compile only against requests' registries (a filter for a
// capability they declare), tells a drop as well.
func TestReloadDropsWithoutARegistry(t *testing.T) {
	dir := t.TempDir()
	filter := "package policycheck.capabilities.vault\n\nprepare_tools := {t.name | some t in input.tools}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vault.rego"), []byte(filter), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "guard.rego"), []byte(hideRule("get_time")), 0o600))
	rs := start(t, withEngine(engine.PolicyPaths(dir)))
	require.Equal(t, "unknown", policyRevision(t, rs))
	body := []byte(`{"registry": ` + testRegistry + `, "history": ` + testHistory + `}`)
	require.NotContains(t, availableAfter(t, rs, body), "get_time")

	require.NoError(t, os.Remove(filepath.Join(dir, "guard.rego")))
	_, err := rs.srv.Reload(context.Background())
	var dropped *server.DroppedError
	require.ErrorAs(t, err, &dropped)
	require.Equal(t, []string{"data.policycheck.rules.test"}, dropped.Packages)
	require.NotContains(t, availableAfter(t, rs, body), "get_time")
}
