package mcpinterop_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/testkit/mcpinterop"
)

var update = flag.Bool("update", false, "rewrite docs/gateway-interop.md's conformance table from this run")

// freePort is a loopback port nothing listens on just now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// startEverythingServer runs the Go SDK's conformance everything-server
// on streamable HTTP with sessions (-stateless=false: the scenarios in
// which the server asks the client, sampling and elicitation, need a
// session, as the Go SDK's own scripts/server-conformance.sh runs it),
// and returns its URL.
func startEverythingServer(t *testing.T, bin string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(bin, fmt.Sprintf("-http=127.0.0.1:%d", port), "-stateless=false")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url := fmt.Sprintf("http://localhost:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(t, mcpinterop.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d", port)))
	return url
}

// runConformance runs the suite against url and fails the test when it
// cannot run.
func runConformance(t *testing.T, deps, url string) map[string]mcpinterop.ScenarioResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, log, err := mcpinterop.Conformance(ctx, deps, url, "")
	require.NoError(t, err, "%s", log)
	return res
}

// scenarios is res's scenario names, sorted.
func scenarios(res map[string]mcpinterop.ScenarioResult) []string {
	var out []string
	for name := range res {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// TestConformanceUpstreamAlone: the Go SDK's conformance everything-server,
// with nothing in front of it, passes every server scenario of the
// conformance suite for 2025-11-25 (the active suite and the pending
// scenarios). It is the reference
// the gateway is compared with.
func TestConformanceUpstreamAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance suite")
	}
	deps := mcpinterop.Deps(t)
	url := startEverythingServer(t, mcpinterop.BuildEverythingServer(t))
	res := runConformance(t, deps, url)
	require.NotEmpty(t, res)
	for _, name := range scenarios(res) {
		r := res[name]
		t.Logf("%s: %d passed, %d failed", name, r.Passed, r.Failed)
		require.True(t, r.OK(), "%s: %v", name, r.Failures)
	}
}

// interopDoc is the page that records the comparison.
func interopDoc() string {
	return filepath.Join(conformance.ModuleRoot(), "docs", "gateway-interop.md")
}

// cell is a scenario's result as the table shows it.
func cell(r mcpinterop.ScenarioResult, ok bool) string {
	if !ok {
		return "not run"
	}
	if r.OK() {
		return fmt.Sprintf("pass (%d)", r.Passed)
	}
	msg := strings.Join(r.Failures, "; ")
	msg = strings.NewReplacer("|", "\\|", "\n", " ").Replace(msg)
	if len(msg) > 160 {
		msg = msg[:157] + "..."
	}
	return fmt.Sprintf("**fail** (%d of %d): %s", r.Failed, r.Passed+r.Failed, msg)
}

// run is one run of the suite: the table's column head, the results and,
// through the gateway, how the gateway reaches the upstream ("stdio" or
// "http").
type run struct {
	head, upstream string
	res            map[string]mcpinterop.ScenarioResult
}

// tableHead begins the conformance table's header row.
const tableHead = "| scenario | upstream alone |"

// conformanceTable is the markdown table of the runs, one column each,
// one row per scenario any ran.
func conformanceTable(runs ...run) string {
	names := map[string]bool{}
	for _, r := range runs {
		for n := range r.res {
			names[n] = true
		}
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var b strings.Builder
	b.WriteString("| scenario |")
	for _, r := range runs {
		b.WriteString(" " + r.head + " |")
	}
	b.WriteString("\n| --- |" + strings.Repeat(" --- |", len(runs)) + "\n")
	passed := make([]int, len(runs))
	for _, n := range sorted {
		fmt.Fprintf(&b, "| `%s` |", n)
		for i, r := range runs {
			res, ok := r.res[n]
			if ok && res.OK() {
				passed[i]++
			}
			b.WriteString(" " + cell(res, ok) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("| **scenarios passed** |")
	for _, p := range passed {
		fmt.Fprintf(&b, " **%d of %d** |", p, len(sorted))
	}
	b.WriteString("\n")
	return b.String()
}

// docTable is the conformance table in docs/gateway-interop.md: the lines
// from its header row to the first line that is not a table row.
func docTable(doc string) (start, end int, ok bool) {
	start = strings.Index(doc, tableHead)
	if start < 0 {
		return 0, 0, false
	}
	end = start
	for end < len(doc) && doc[end] == '|' {
		nl := strings.IndexByte(doc[end:], '\n')
		if nl < 0 {
			return start, len(doc), true
		}
		end += nl + 1
	}
	return start, end, true
}

// TestConformanceThroughGateway: the conformance suite's server scenarios
// run against the Go SDK's everything-server alone and through
// `policycheck gateway` in front of it (the allow-all registry
// testdata/conformance/registry.yaml with --import everything=everything,
// no token file), once with the
// upstream run over stdio and once reached over streamable HTTP. The
// gateway passes every scenario the upstream passes alone, but for the
// known gaps testdata/conformance/gateway-gaps.txt lists with why (the
// test fails on a failure not listed, and on a listed scenario that
// passes); both results are docs/gateway-interop.md's table (-update
// rewrites it from this run).
func TestConformanceThroughGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance suite")
	}
	deps := mcpinterop.Deps(t)
	server := mcpinterop.BuildEverythingServer(t)
	alone := runConformance(t, deps, startEverythingServer(t, server))
	registry := filepath.Join(mcpinterop.Here(), "testdata", "conformance", "registry.yaml")
	// The suite's dns-rebinding scenario sends Host and Origin headers of
	// localhost with the URL's port: the URL names localhost.
	throughStdio := runConformance(t, deps, strings.Replace(startGateway(t, policycheckBin(t),
		"--registry", registry, "--import", "everything=everything", upstreamFlag("everything", []string{server}),
	).URL, "127.0.0.1", "localhost", 1))
	throughHTTP := runConformance(t, deps, strings.Replace(startGateway(t, policycheckBin(t),
		"--registry", registry, "--import", "everything=everything", "--upstream", "everything="+startEverythingServer(t, server),
	).URL, "127.0.0.1", "localhost", 1))
	runs := []run{
		{"upstream alone", "", alone},
		{"through the gateway, upstream over stdio", "stdio", throughStdio},
		{"through the gateway, upstream over HTTP", "http", throughHTTP},
	}
	table := conformanceTable(runs...)
	raw, err := os.ReadFile(interopDoc())
	require.NoError(t, err)
	doc := string(raw)
	start, end, ok := docTable(doc)
	require.True(t, ok, "docs/gateway-interop.md has no conformance table")
	if *update {
		doc = doc[:start] + table + doc[end:]
		require.NoError(t, os.WriteFile(interopDoc(), []byte(doc), 0o644))
	} else {
		assert.Equal(t, table, doc[start:end], "docs/gateway-interop.md's conformance table is not this run's: "+
			"go test ./internal/testkit/mcpinterop -run TestConformanceThroughGateway -update")
	}
	gaps := gatewayGaps(t)
	for _, through := range runs[1:] {
		for _, name := range scenarios(alone) {
			a := alone[name]
			if !a.OK() {
				continue
			}
			g, ran := through.res[name]
			_, known := gaps[name]
			if _, ok := gaps[name+" "+through.upstream]; ok {
				known = true
			}
			switch {
			case !ran:
				t.Errorf("%s: the upstream alone passes (%d checks), %s it did not run", name, a.Passed, through.head)
			case !g.OK() && !known:
				t.Errorf("%s: the upstream alone passes (%d checks), %s it fails: %v", name, a.Passed, through.head, g.Failures)
			case !g.OK():
				t.Logf("%s: a known gap of the gateway (testdata/conformance/gateway-gaps.txt), %s: %v", name, through.head, g.Failures)
			case known:
				t.Errorf("%s passes %s now: take it out of testdata/conformance/gateway-gaps.txt", name, through.head)
			}
		}
	}
	for key := range gaps {
		name, _, _ := strings.Cut(key, " ")
		if _, ok := alone[name]; !ok {
			t.Errorf("testdata/conformance/gateway-gaps.txt lists %s, which the suite did not run", name)
		}
	}
}

// gatewayGaps reads testdata/conformance/gateway-gaps.txt: the scenarios
// the upstream passes alone that fail through the gateway today, each
// with why; a scenario followed by "stdio" or "http" fails only with the
// upstream reached that way.
func gatewayGaps(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(mcpinterop.Here(), "testdata", "conformance", "gateway-gaps.txt"))
	require.NoError(t, err)
	gaps := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, why, ok := strings.Cut(line, " # ")
		require.True(t, ok && why != "", "gateway-gaps.txt: %q says no why", line)
		if _, upstream, qualified := strings.Cut(name, " "); qualified {
			require.Contains(t, []string{"stdio", "http"}, upstream, "gateway-gaps.txt: %q", line)
		}
		require.NotContains(t, gaps, name, "gateway-gaps.txt: %s twice", name)
		gaps[name] = why
	}
	return gaps
}
