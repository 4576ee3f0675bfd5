package server_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/conformance"
)

// buildPolicycheck builds the policycheck command into a directory the
// test removes, and returns its path.
func buildPolicycheck(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "policycheck")
	build := exec.Command("go", "build", "-o", bin, "./cmd/policycheck")
	build.Dir = conformance.ModuleRoot()
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

// sidecarProcess is `policycheck serve` running in its own process, as an
// operator deploys it.
type sidecarProcess struct {
	url string
	pid int
}

// serveProcess runs `bin serve` on a free loopback port with args until
// stop is called or the test ends.
func serveProcess(t *testing.T, bin string, args ...string) (p *sidecarProcess, stop func()) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(stop)
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`policycheck serving" addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return &sidecarProcess{url: "http://" + a, pid: cmd.Process.Pid}, stop
	case <-time.After(60 * time.Second):
		t.Fatal("policycheck serve did not say where it listens")
	}
	return nil, stop
}

// pidCPU is the user and system CPU time process pid has used (0 where
// /proc does not tell).
func pidCPU(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 14 {
		return 0
	}
	// Fields 14 and 15 of proc(5), utime and stime, in clock ticks
	// (USER_HZ, 100 on Linux).
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}
