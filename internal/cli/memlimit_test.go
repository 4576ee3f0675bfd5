package cli_test

import (
	"bufio"
	"context"
	"io"
	"math"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"

	"github.com/policycheck/policycheck/internal/cli"
)

// gcOff is what /gc/gogc:percent reads with GOGC=off.
const gcOff = math.MaxUint64

// collector reads the garbage collector's settings: GOGC's percent
// (gcOff when off) and the soft memory limit.
func collector() (percent, limit uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// serveCollector runs policycheck gateway in process with extra flags
// under ctx until it serves, reads the collector's settings then, stops
// it (SIGTERM) and checks it exited 0 and left the settings as they were.
// It returns what the gateway wrote on stderr until it served.
func serveCollector(t *testing.T, ctx context.Context, extra ...string) (said string, pct, lim uint64) {
	t.Helper()
	dir := t.TempDir()
	reg := writeFile(t, dir, "tools.yaml", "tools:\n  - name: read_file\n    upstream: files\n")
	// Empty, they set nothing: the flag is not refused for them.
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	pct0, lim0 := collector()
	if pct0 == gcOff {
		t.Skip("the collector is already off (GOGC=off): nothing to tell apart")
	}
	errR, errW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		defer errW.Close()
		done <- cli.RunContext(ctx, append([]string{"gateway", "--registry", reg, "--upstream", "files=true",
			"--start-timeout", "1ms", "--addr", "127.0.0.1:0"}, extra...), strings.NewReader(""), io.Discard, errW)
	}()
	sc := bufio.NewScanner(errR)
	var lines strings.Builder
	serving := false
	for !serving && sc.Scan() {
		lines.WriteString(sc.Text() + "\n")
		serving = strings.Contains(sc.Text(), "serving MCP at")
	}
	go func() { _, _ = io.Copy(io.Discard, errR) }()
	if !serving {
		t.Fatalf("the gateway stopped (exit %d) before it served:\n%s", <-done, lines.String())
	}
	pct, lim = collector()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != cli.ExitOK {
		t.Fatalf("exit %d", code)
	}
	if pct1, lim1 := collector(); pct1 != pct0 || lim1 != lim0 {
		t.Errorf("after: GOGC %d%%, limit %d; want %d%% and %d as before", pct1, lim1, pct0, lim0)
	}
	return lines.String(), pct, lim
}

// TestGatewayMemoryLimit: policycheck gateway --memory-limit runs the
// collector as GOGC=off with GOMEMLIMIT would while it serves, says so,
// and leaves the settings as they were when it stops.
func TestGatewayMemoryLimit(t *testing.T) {
	said, pct, lim := serveCollector(t, context.Background(), "--memory-limit", "384MiB")
	if !strings.Contains(said, "the garbage collector runs as the heap nears 384MiB (--memory-limit)") {
		t.Errorf("the gateway did not say how the collector runs: %q", said)
	}
	if pct != gcOff || lim != 384<<20 {
		t.Errorf("while serving: GOGC %d%%, limit %d; want off and %d", pct, lim, 384<<20)
	}
}

// TestGatewayMemoryLimitBadUsage: a --memory-limit that is not a size,
// is too small, or meets the environment's own setting is refused
// before anything starts (exit 2).
func TestGatewayMemoryLimitBadUsage(t *testing.T) {
	dir := t.TempDir()
	reg := writeFile(t, dir, "tools.yaml", "tools:\n  - name: read_file\n    upstream: files\n")
	args := func(v string) []string {
		return []string{"gateway", "--registry", reg, "--upstream", "files=true", "--start-timeout", "1ms", "--addr", "no-port", "--memory-limit", v}
	}
	for _, tc := range []struct{ value, want string }{
		{"lots", `--memory-limit "lots": want a whole number of bytes with an optional unit`},
		{"512MB", `--memory-limit "512MB": want a whole number of bytes`},
		{"-1GiB", `--memory-limit "-1GiB": want a whole number of bytes`},
		{"MiB", `--memory-limit "MiB": want a whole number of bytes`},
		{"9000000TiB", `--memory-limit "9000000TiB": too large`},
		{"63MiB", `--memory-limit "63MiB": want at least 64MiB`},
		{"1048576", `--memory-limit "1048576": want at least 64MiB`},
	} {
		if res := run(t, "", args(tc.value)...); res.code != cli.ExitBadUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tc.value, res.code, res.stderr, tc.want)
		}
	}
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "200")
			want := "--memory-limit and the environment's " + env + "=200 both set the garbage collector: unset one"
			if res := run(t, "", args("1GiB")...); res.code != cli.ExitBadUsage || !strings.Contains(res.stderr, want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", res.code, res.stderr, want)
			}
		})
	}
}
