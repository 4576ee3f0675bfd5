package server_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// TestServeUsageErrors: policycheck serve refuses bad flags and inputs
// with exit status 2 before it listens.
func TestServeUsageErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	badPolicy := filepath.Join(dir, "bad.rego")
	require.NoError(t, os.WriteFile(badPolicy, []byte("package x\n\nallow if {"), 0o600))
	badConfig := filepath.Join(dir, "opa.yaml")
	require.NoError(t, os.WriteFile(badConfig, []byte("bundles: [1, 2]\n"), 0o600))
	okConfig := filepath.Join(dir, "labels.yaml")
	require.NoError(t, os.WriteFile(okConfig, []byte("labels:\n  team: tools\n"), 0o600))
	live := filepath.Join(dir, "live.sock")
	ln, err := net.Listen("unix", live) // answers (the kernel queues) without accepting
	require.NoError(t, err)
	defer ln.Close()
	tests := []struct {
		note string
		args []string
		want string
	}{
		// A flag that would change nothing, or be read as another value.
		{note: "a mask that is not a JSON pointer", args: []string{"--config", okConfig, "--mask-context", "user/email"}},
		{note: "a mask with a bad escape", args: []string{"--config", okConfig, "--mask-context", "/a~2b"}},
		{note: "a mask without decision logs", args: []string{"--mask-context", "/user"}},
		{note: "no time for a decision", args: []string{"--timeout", "0s"}},
		{note: "negative timeout", args: []string{"--timeout", "-1s"}},
		{note: "negative body timeout", args: []string{"--body-timeout", "-1s"}},
		{note: "negative run ttl", args: []string{"--run-ttl", "-1m"}},
		{note: "negative shutdown grace", args: []string{"--shutdown-grace", "-1s"}},
		{note: "no shadow queue", args: []string{"--shadow-queue", "0"}},
		{note: "no shadow queue bytes", args: []string{"--shadow-queue-bytes", "0"}, want: "--shadow-queue-bytes must be at least 1"},
		{note: "a shadow queue without a shadow policy", args: []string{"--shadow-queue", "10"}, want: "--shadow-queue bounds the decisions waiting for the shadow policy, and --shadow-policy is not given"},
		{note: "shadow queue bytes without a shadow policy", args: []string{"--shadow-queue-bytes", "1000"}, want: "--shadow-queue-bytes bounds"},
		{note: "unknown flag", args: []string{"--nope"}},
		{note: "missing registry file", args: []string{"--registry", filepath.Join(dir, "missing.yaml")}},
		{note: "tls cert without key", args: []string{"--tls-cert", empty}},
		{note: "empty token file", args: []string{"--token-file", empty}},
		{note: "policy that does not parse", args: []string{"--policy", badPolicy}},
		{note: "bad OPA config", args: []string{"--config", badConfig}},
		{note: "address in use or invalid", args: []string{"--addr", "256.0.0.1:1"}},
		{note: "negative prefix cache", args: []string{"--prefix-cache-bytes", "-1"}},
		{note: "negative run table", args: []string{"--runs", "-5"}},
		{note: "negative decision cache", args: []string{"--decision-cache", "-1"}},
		{note: "a unix address without a path", args: []string{"--addr", "unix://"}, want: "names no socket path"},
		{note: "socket permissions not octal", args: []string{"--addr", "unix://" + filepath.Join(dir, "s.sock"), "--unix-socket-perm", "rw-r--r--"}, want: "octal"},
		{note: "socket permissions past 777", args: []string{"--addr", "unix://" + filepath.Join(dir, "s.sock"), "--unix-socket-perm", "1777"}, want: "octal"},
		{note: "socket permissions for a TCP address", args: []string{"--addr", "127.0.0.1:0", "--unix-socket-perm", "700"}, want: "applies to a Unix domain socket"},
		{note: "a socket path that is a file", args: []string{"--addr", "unix://" + empty}, want: "exists and is not a socket"},
		{note: "a socket another server answers on", args: []string{"--addr", "unix://" + live}, want: "another server is listening"},
		{note: "a socket in a directory that does not exist", args: []string{"--addr", "unix://" + filepath.Join(dir, "missing", "s.sock")}, want: "no such file"},
		{note: "client CAs without TLS", args: []string{"--tls-ca-cert", empty}, want: "--tls-ca-cert asks clients for certificates over TLS"},
		{note: "h2c with TLS", args: []string{"--h2c", "--tls-cert", empty, "--tls-key", empty}, want: "--h2c serves HTTP/2 without TLS"},
		{note: "watch without files", args: []string{"--watch"}, want: "--watch reloads the --policy, --registry, --shadow-policy and --receipt-key files, and none is given"},
		{note: "a watch interval without watch", args: []string{"--policy", dir, "--watch-interval", "2s"}, want: "--watch-interval is how often --watch looks"},
		{note: "no watch interval", args: []string{"--policy", dir, "--watch", "--watch-interval", "0s"}, want: "--watch-interval must be positive"},
		{note: "watch drops without watch", args: []string{"--policy", dir, "--watch-drops", "accept"}, want: "--watch-drops is what --watch does with policies that drop rules, and --watch is not given"},
		{note: "an unknown watch drops", args: []string{"--policy", dir, "--watch", "--watch-drops", "warn"}, want: `--watch-drops is refuse or accept, not "warn"`},
		{note: "an unknown log format", args: []string{"--log-format", "logfmt"}, want: `--log-format must be text or json, not "logfmt"`},
		{note: "an unknown log level", args: []string{"--log-level", "trace"}, want: `--log-level must be debug, info, warn or error, not "trace"`},
		{note: "-v against --log-level", args: []string{"-v", "--log-level", "error"}, want: "-v logs at debug level, which --log-level error contradicts"},
		{note: "one address for both", args: []string{"--addr", "127.0.0.1:18181", "--diagnostic-addr", "127.0.0.1:18181"}, want: "--diagnostic-addr 127.0.0.1:18181 is --addr too"},
		{note: "a diagnostic socket without a path", args: []string{"--diagnostic-addr", "unix://"}, want: "--diagnostic-addr unix:// names no socket path"},
		{note: "socket permissions for two TCP addresses", args: []string{"--addr", "127.0.0.1:0", "--diagnostic-addr", "127.0.0.1:0", "--unix-socket-perm", "700"}, want: "applies to a Unix domain socket"},
		{note: "a diagnostic address it cannot listen on", args: []string{"--addr", "127.0.0.1:0", "--diagnostic-addr", "256.0.0.1:1"}, want: "--diagnostic-addr 256.0.0.1:1: "},
		{note: "a diagnostic socket another server answers on", args: []string{"--addr", "127.0.0.1:0", "--diagnostic-addr", "unix://" + live}, want: "--diagnostic-addr unix://" + live + ": another server is listening"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli.Run(append([]string{"serve"}, tc.args...), nil, &stdout, &stderr)
			require.Equal(t, cli.ExitBadUsage, code, stderr.String())
			require.Contains(t, stderr.String(), "policycheck:")
			require.Contains(t, stderr.String(), tc.want)
		})
	}
	// The file was not taken over.
	fi, err := os.Lstat(empty)
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular())
}

// TestServeUnixSocket: serve --addr unix://PATH answers over the socket
// what it answers over TCP; the socket's file has --unix-socket-perm (755
// by default) and is gone after shutdown; a socket file left by a server
// that was killed is replaced.
func TestServeUnixSocket(t *testing.T) {
	bin, reg, body := exampleServe(t)
	sock := filepath.Join(t.TempDir(), "pc.sock")

	tcp := servetest.Start(t, bin, "--registry", reg)
	status, want := (&running{url: tcp.URL, client: tcp.Client()}).post(t, "/v1/decide", body)
	require.Equal(t, http.StatusOK, status, string(want))
	tcp.Stop()

	decideOverSocket := func(args ...string) fs.FileMode {
		t.Helper()
		p := servetest.Start(t, bin, append([]string{"--registry", reg, "--addr", "unix://" + sock}, args...)...)
		require.Equal(t, sock, p.Socket)
		fi, err := os.Lstat(sock)
		require.NoError(t, err)
		require.Equal(t, fs.ModeSocket, fi.Mode().Type())
		client := p.Client()
		defer client.CloseIdleConnections()
		status, got := (&running{url: p.URL, client: client}).post(t, "/v1/decide", body)
		require.Equal(t, http.StatusOK, status, string(got))
		require.Equal(t, string(want), string(got))
		p.Stop()
		_, err = os.Lstat(sock)
		require.ErrorIs(t, err, fs.ErrNotExist, "the socket is removed on shutdown")
		return fi.Mode().Perm()
	}
	require.Equal(t, fs.FileMode(0o700), decideOverSocket("--unix-socket-perm", "0700"))
	require.Equal(t, fs.FileMode(0o660), decideOverSocket("--unix-socket-perm", "660"))

	// A server killed before it could remove its socket leaves the file,
	// and nothing answers on it.
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	_, err = os.Lstat(sock)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o755), decideOverSocket())
}

// TestServeRefusesConfigOptionsItWouldIgnore: an OPA configuration option
// OPA does not know (a misspelt "decision_log" would leave decision
// logging off without a word), nested ones included, or one policycheck
// serve does not act on, stops serve with exit status 2, the file and the
// option named, before it listens.
func TestServeRefusesConfigOptionsItWouldIgnore(t *testing.T) {
	dir := t.TempDir()
	for note, tc := range map[string]struct{ config, want string }{
		"misspelt top-level option": {"services:\n  s:\n    url: http://127.0.0.1:1\ndecision_log:\n  service: s\n", `unknown configuration option "decision_log"`},
		"misspelt nested option":    {"services:\n  s:\n    url: http://127.0.0.1:1\ndecision_logs:\n  service: s\n  reportin: {}\n", `"decision_logs.reportin"`},
		"misspelt bundle option":    {"services:\n  s:\n    url: http://127.0.0.1:1\nbundles:\n  b:\n    service: s\n    resurce: b.tar.gz\n", `"bundles.b.resurce"`},
		"an option serve ignores":   {"caching:\n  inter_query_builtin_cache:\n    max_size_bytes: 1000\n", `configuration option "caching" is not read by policycheck serve`},
		"OPA's server options":      {"server:\n  encoding: {}\n", `"server" is not read`},
	} {
		t.Run(note, func(t *testing.T) {
			path := filepath.Join(dir, "opa.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.config), 0o600))
			var stdout, stderr bytes.Buffer
			code := cli.Run([]string{"serve", "--addr", "127.0.0.1:0", "--config", path, "--registry", filepath.Join("..", "examples", "registry.yaml")}, nil, &stdout, &stderr)
			require.Equal(t, cli.ExitBadUsage, code, stderr.String())
			require.Contains(t, stderr.String(), "--config "+path+": ")
			require.Contains(t, stderr.String(), tc.want)
		})
	}
}

// TestServeWarnsWhenExposed: serve warns, before it says where it
// listens, when others may ask for decisions without a token: on a TCP
// address beyond loopback, or on a socket every user of the host may
// connect to. --token-file silences it; loopback and a socket only its
// owner may write to never raise it.
func TestServeWarnsWhenExposed(t *testing.T) {
	bin, reg, _ := exampleServe(t)
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tok, []byte("s3cret\n"), 0o600))
	sock := "unix://" + filepath.Join(dir, "pc.sock")
	for _, tc := range []struct {
		args []string
		want string // "" for no warning
	}{
		{[]string{"--addr", "0.0.0.0:0"}, "listening beyond loopback without --token-file"},
		{[]string{"--addr", "0.0.0.0:0", "--pprof"}, "read the server's profiles (--pprof)"},
		{[]string{"--addr", "0.0.0.0:0", "--token-file", tok}, ""},
		{[]string{"--addr", "127.0.0.1:0"}, ""},
		{[]string{"--addr", sock, "--unix-socket-perm", "666"}, "every user of this host may connect to (--unix-socket-perm 666)"},
		{[]string{"--addr", sock, "--unix-socket-perm", "666", "--token-file", tok}, ""},
		{[]string{"--addr", sock, "--unix-socket-perm", "664"}, ""},
	} {
		p := servetest.Start(t, bin, append([]string{"--registry", reg}, tc.args...)...)
		if tc.want == "" {
			require.NotContains(t, p.Said, "level=WARN", tc.args)
		} else {
			require.Contains(t, p.Said, "level=WARN", tc.args)
			require.Contains(t, p.Said, tc.want, tc.args)
		}
		p.Stop()
	}
}

// TestServeDiagnosticAddr: serve --diagnostic-addr answers /health and
// /metrics there and nothing else, beside a main address on a socket
// (which an HTTP probe cannot reach); the main address still serves
// decisions.
func TestServeDiagnosticAddr(t *testing.T) {
	bin, reg, body := exampleServe(t)
	sock := filepath.Join(t.TempDir(), "pc.sock")
	p := servetest.Start(t, bin, "--registry", reg, "--addr", "unix://"+sock, "--diagnostic-addr", "127.0.0.1:0")
	client := &http.Client{}
	defer client.CloseIdleConnections()
	diag := &running{url: "http://" + diagnosticURL(t, p), client: client}
	status, health := diag.do(t, http.MethodGet, "/health", nil)
	require.Equal(t, http.StatusOK, status, string(health))
	require.Contains(t, string(health), `"status": "ok"`)
	status, metrics := diag.do(t, http.MethodGet, "/metrics", nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(metrics), "policycheck_")
	status, out := diag.post(t, "/v1/decide", body)
	require.Equal(t, http.StatusNotFound, status, string(out))
	sockClient := p.Client()
	defer sockClient.CloseIdleConnections()
	status, out = (&running{url: p.URL, client: sockClient}).post(t, "/v1/decide", body)
	require.Equal(t, http.StatusOK, status, string(out))
}

// TestServeLogsJSON: with --log-format json every line serve logs is a
// JSON object with its time, level and message, warnings included.
func TestServeLogsJSON(t *testing.T) {
	bin, reg, _ := exampleServe(t)
	p := servetest.Start(t, bin, "--registry", reg, "--log-format", "json", "--addr", "0.0.0.0:0")
	lines := strings.Split(strings.TrimSpace(p.Said), "\n")
	require.NotEmpty(t, lines)
	var warned bool
	for _, l := range lines {
		var rec struct{ Time, Level, Msg string }
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		require.NotEmpty(t, rec.Time, l)
		require.NotEmpty(t, rec.Msg, l)
		warned = warned || (rec.Level == "WARN" && strings.Contains(rec.Msg, "beyond loopback"))
	}
	require.True(t, warned, p.Said)
	require.True(t, strings.HasPrefix(p.URL, "http://"), p.URL)
}

// TestServeH2C: serve --h2c answers a client that speaks HTTP/2 without
// TLS; without the flag, such a client gets nothing.
func TestServeH2C(t *testing.T) {
	bin, reg, body := exampleServe(t)
	client := h2cClient()
	defer client.CloseIdleConnections()

	p := servetest.Start(t, bin, "--registry", reg, "--h2c")
	status, out := h2cPost(t, client, p.URL+"/v1/decide", "application/json", body)
	require.Equal(t, http.StatusOK, status, string(out))
	p.Stop()

	plain := servetest.Start(t, bin, "--registry", reg)
	_, err := client.Post(plain.URL+"/v1/decide", "application/json", bytes.NewReader(body))
	require.Error(t, err)
}

// exampleServe builds the command for a test that runs serve in its own
// process, skipped under -short, and returns it with the example
// registry's path and a /v1/decide body of the example refund history.
func exampleServe(t *testing.T) (bin, reg string, body []byte) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the command")
	}
	history, err := os.ReadFile(filepath.Join("..", "examples", "histories", "refund.json"))
	require.NoError(t, err)
	return servetest.Build(t), filepath.Join("..", "examples", "registry.yaml"), append(append([]byte(`{"history": `), history...), '}')
}

// processRunning is p as the in-process tests' helpers take a server,
// its client's idle connections closed when the test ends.
func processRunning(t *testing.T, p *servetest.Process) *running {
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	return &running{url: p.URL, client: client}
}

// diagnosticURL is the URL of the diagnostic address p said it serves.
func diagnosticURL(t *testing.T, p *servetest.Process) string {
	t.Helper()
	m := regexp.MustCompile(`msg="policycheck diagnostics serving" addr=(\S+)`).FindStringSubmatch(p.Said)
	require.NotNil(t, m, p.Said)
	return m[1]
}

// TestServeWatch: serve --watch takes in policy files changed under it:
// a change that compiles decides the next requests; one that does not is
// refused (counted in /metrics) while the last good policies keep
// deciding.
func TestServeWatch(t *testing.T) {
	bin, reg, body := exampleServe(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "hide.rego")
	rule := func(tool string) []byte {
		return []byte("package policycheck.rules.watched\n\nhide contains \"" + tool + "\"\n")
	}
	require.NoError(t, os.WriteFile(file, rule("get_time"), 0o600))
	p := servetest.Start(t, bin, "--registry", reg, "--policy", dir, "--watch", "--watch-interval", "20ms")
	rs := processRunning(t, p)
	decide := func() []string { return availableAfter(t, rs, body) }
	before := decide()
	require.NotContains(t, before, "get_time")
	rev := policyRevision(t, rs)

	require.NoError(t, os.WriteFile(file, rule("search_docs"), 0o600))
	require.Eventually(t, func() bool { return policyRevision(t, rs) != rev }, 10*time.Second, 10*time.Millisecond)
	after := decide()
	require.Contains(t, after, "get_time")
	require.NotContains(t, after, "search_docs")
	rev = policyRevision(t, rs)

	require.NoError(t, os.WriteFile(file, []byte("package policycheck.rules.watched\n\nhide contains x if {"), 0o600))
	require.Eventually(t, func() bool {
		_, m := rs.do(t, http.MethodGet, "/metrics", nil)
		return strings.Contains(string(m), `policycheck_policy_reloads_total{result="refused"} 1`)
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, rev, policyRevision(t, rs))
	require.Equal(t, after, decide())
}

// TestServeWatchAKubernetesVolume: policies mounted as a ConfigMap volume
// (files reached through ..data, which an update points at a new
// ..<timestamp> directory) load once, and serve --watch takes in the
// update.
func TestServeWatchAKubernetesVolume(t *testing.T) {
	bin, reg, body := exampleServe(t)
	dir := t.TempDir()
	publish := func(stamp, tool string) {
		real := filepath.Join(dir, "..2026_12_02_"+stamp)
		require.NoError(t, os.MkdirAll(real, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(real, "hide.rego"), []byte("package policycheck.rules.volume\n\nhidden := \""+tool+"\"\n\nhide contains hidden\n"), 0o644))
		tmp := filepath.Join(dir, "..data_tmp")
		require.NoError(t, os.Symlink(filepath.Base(real), tmp))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, "..data")))
	}
	publish("10_00_00", "get_time")
	require.NoError(t, os.Symlink(filepath.Join("..data", "hide.rego"), filepath.Join(dir, "hide.rego")))
	// A link to a file kept elsewhere, rewritten in place later.
	elsewhere := filepath.Join(t.TempDir(), "more.rego")
	more := func(tool string) {
		require.NoError(t, os.WriteFile(elsewhere, []byte("package policycheck.rules.more\n\nhide contains \""+tool+"\"\n"), 0o644))
	}
	more("nothing_at_all")
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(dir, "more.rego")))
	p := servetest.Start(t, bin, "--registry", reg, "--policy", dir, "--watch", "--watch-interval", "20ms")
	rs := processRunning(t, p)
	available := func() []string { return availableAfter(t, rs, body) }
	require.NotContains(t, available(), "get_time")
	rev := policyRevision(t, rs)
	publish("10_05_00", "search_docs")
	require.Eventually(t, func() bool { return policyRevision(t, rs) != rev }, 10*time.Second, 10*time.Millisecond)
	got := available()
	require.Contains(t, got, "get_time")
	require.NotContains(t, got, "search_docs")

	rev = policyRevision(t, rs)
	more("get_time")
	require.Eventually(t, func() bool { return policyRevision(t, rs) != rev }, 10*time.Second, 10*time.Millisecond)
	require.NotContains(t, available(), "get_time")
}

// TestServeWatchRegistry: serve --watch takes in a changed --registry
// file with the policies (here the shipped ones alone); a registry that
// does not parse is refused (counted in /metrics) while the last good one
// keeps deciding, and a later good one is taken in.
func TestServeWatchRegistry(t *testing.T) {
	bin, example, body := exampleServe(t)
	raw, err := os.ReadFile(example)
	require.NoError(t, err)
	reg := filepath.Join(t.TempDir(), "registry.yaml")
	require.NoError(t, os.WriteFile(reg, raw, 0o600))
	p := servetest.Start(t, bin, "--registry", reg, "--watch", "--watch-interval", "20ms")
	rs := processRunning(t, p)
	decide := func() []string { return availableAfter(t, rs, body) }
	require.NotContains(t, decide(), "new_tool")
	rev, policyRev := registryRevision(t, rs), policyRevision(t, rs)

	withTool := func(name string) []byte {
		return append(append([]byte{}, raw...), "  - name: "+name+"\n"...)
	}
	require.NoError(t, os.WriteFile(reg, withTool("new_tool"), 0o600))
	require.Eventually(t, func() bool { return registryRevision(t, rs) != rev }, 10*time.Second, 10*time.Millisecond)
	require.Contains(t, decide(), "new_tool")
	require.Equal(t, policyRev, policyRevision(t, rs))
	rev = registryRevision(t, rs)

	require.NoError(t, os.WriteFile(reg, append(withTool("other_tool"), "  - capability: nowhere\n"...), 0o600))
	require.Eventually(t, func() bool {
		return metricValue(t, rs, `policycheck_policy_reloads_total{result="refused"}`) == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, rev, registryRevision(t, rs))
	got := decide()
	require.Contains(t, got, "new_tool")
	require.NotContains(t, got, "other_tool")

	require.NoError(t, os.WriteFile(reg, withTool("other_tool"), 0o600))
	require.Eventually(t, func() bool { return registryRevision(t, rs) != rev }, 10*time.Second, 10*time.Millisecond)
	require.Contains(t, decide(), "other_tool")
}

// TestServeWatchShadowPolicy: serve --watch takes in a changed
// --shadow-policy file: the candidate as rewritten is the one the
// decisions that follow are compared with.
func TestServeWatchShadowPolicy(t *testing.T) {
	bin, reg, body := exampleServe(t)
	candidate := filepath.Join(t.TempDir(), "candidate.rego")
	rule := func(tool string) []byte {
		return []byte("package policycheck.rules.candidate\n\nhide contains \"" + tool + "\"\n")
	}
	require.NoError(t, os.WriteFile(candidate, rule("nothing_at_all"), 0o600))
	p := servetest.Start(t, bin, "--registry", reg, "--shadow-policy", candidate, "--watch", "--watch-interval", "20ms")
	rs := processRunning(t, p)
	// The refund history's response calls get_order, which executes.
	lost := `policycheck_shadow_disagreements_total{kind="call",transition="execute->unknown_tool"}`
	availableAfter(t, rs, body)
	require.Eventually(t, func() bool { return metricValue(t, rs, "policycheck_shadow_decisions_total") == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Zero(t, metricValue(t, rs, lost))

	require.NoError(t, os.WriteFile(candidate, rule("get_order"), 0o600))
	require.Eventually(t, func() bool {
		return metricValue(t, rs, `policycheck_policy_reloads_total{result="swapped"}`) == 1
	}, 10*time.Second, 10*time.Millisecond)
	availableAfter(t, rs, body)
	require.Eventually(t, func() bool { return metricValue(t, rs, lost) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the rewritten candidate hides get_order")
}

// TestServeWatchDrops: a guard file deleted under serve --watch is not
// taken in without a word. By default the reload is refused: the guarded
// call stays denied, the refusal is logged naming the package, counted
// in /metrics and shown in /health's last_reload (status degraded while
// it is refused). With --watch-drops
// accept the deletion is taken in, with a warning naming the package, the
// count and /health saying so.
func TestServeWatchDrops(t *testing.T) {
	bin, reg, body := exampleServe(t)
	guard := []byte(`package policycheck.rules.guard

deny contains {"reason": "refunds are guarded", "message": "No refunds."} if input.call.tool == "issue_refund"
`)
	verdict := func(rs *running) string {
		t.Helper()
		status, out := rs.post(t, "/v1/decide", body)
		require.Equal(t, http.StatusOK, status, string(out))
		var d engine.Decision
		require.NoError(t, json.Unmarshal(out, &d))
		for _, c := range d.Calls {
			if c.Tool == "issue_refund" {
				return c.Verdict
			}
		}
		t.Fatalf("no issue_refund call in %s", out)
		return ""
	}
	const pkg = "data.policycheck.rules.guard"
	for _, tc := range []struct {
		mode, result, verdict, log string
	}{
		{mode: "", result: "refused", verdict: engine.Denied, log: `level=ERROR msg="files changed but not reloaded; the last good policies and registry keep serving" err=".*packages ` + pkg},
		{mode: "accept", result: "swapped", verdict: engine.Execute, log: `level=WARN msg="reloaded policies that drop[^"]*" packages="\[\\"` + pkg + `\\"\]" rules="\[\\"` + pkg + `.deny\\"\]"`},
	} {
		t.Run("watch-drops="+tc.mode, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "guard.rego")
			require.NoError(t, os.WriteFile(file, guard, 0o600))
			args := []string{"--registry", reg, "--policy", dir, "--watch", "--watch-interval", "20ms"}
			if tc.mode != "" {
				args = append(args, "--watch-drops", tc.mode)
			}
			p := servetest.Start(t, bin, args...)
			rs := processRunning(t, p)
			require.Equal(t, engine.Denied, verdict(rs))

			require.NoError(t, os.Remove(file))
			drops := `policycheck_policy_reload_drops_total{result="` + tc.result + `"}`
			require.Eventually(t, func() bool { return metricValue(t, rs, drops) == 1 }, 10*time.Second, 10*time.Millisecond)
			require.Equal(t, tc.verdict, verdict(rs))
			status, h := health(t, rs)
			require.Equal(t, http.StatusOK, status)
			if tc.result == "refused" { // degraded while refused (issue 43, item 8)
				require.Equal(t, "degraded", h.Status)
				require.Len(t, h.Reasons, 1)
				require.Contains(t, h.Reasons[0], "policy reload refused")
			} else {
				require.Equal(t, "ok", h.Status)
			}
			require.NotNil(t, h.LastReload)
			require.Equal(t, tc.result, h.LastReload.Result)
			require.Equal(t, []string{pkg}, h.LastReload.DroppedPackages)
			require.Equal(t, []string{pkg + ".deny"}, h.LastReload.DroppedRules)
			require.Eventually(t, func() bool { return regexp.MustCompile(tc.log).MatchString(p.Logged()) }, 10*time.Second, 10*time.Millisecond, "%s", p.Logged())
		})
	}
}
