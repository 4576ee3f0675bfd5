package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
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

func policyRevision(t *testing.T, rs *running) string {
	t.Helper()
	_, body := rs.do(t, http.MethodGet, "/health", nil)
	var h server.Health
	require.NoError(t, json.Unmarshal(body, &h))
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
	rs := start(t, testReg(t), server.Engine(engine.PolicyPaths(dir)))
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
	rs := start(t, testReg(t), server.Engine(engine.PolicyPaths(dir)))
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
				if status != http.StatusOK || (got != answer["secret_op"] && got != answer["get_time"]) {
					bad = append(bad, string(body))
				}
				mu.Unlock()
			}
		})
	}
	for i := range 20 {
		load([]string{"secret_op", "get_time"}[i%2])
	}
	close(stop)
	wg.Wait()
	require.Empty(t, bad)
	require.Positive(t, decided)
}
