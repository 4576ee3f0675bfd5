// Package servetest runs the policycheck command's serve in a process of
// its own, as an operator deploys it, for the tests that need that: the
// side-by-side load test beside stock OPA, the peak-memory measurement
// and the README's approval harness. It builds the command from this
// module, starts it on a free loopback port (or where the test's --addr
// says, a Unix domain socket among them), and stops it when the test
// ends. It runs the load tests' floor (the floor command beside it: a
// server that reads each body and answers, and decides nothing) the same
// way. It also finds the python3 that runs the README's Python snippets
// against such a server.
package servetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/testkit/syncbuf"
)

// Build builds the policycheck command and returns its path: into a
// directory the test removes, or, in a package whose TestMain runs its
// tests through Main, once for all the package's tests.
func Build(t testing.TB) string {
	t.Helper()
	return build(t, "policycheck", "./cmd/policycheck")
}

// BuildFloor builds the floor command (internal/testkit/servetest/floor) as
// Build builds policycheck, and returns its path.
func BuildFloor(t testing.TB) string {
	t.Helper()
	return build(t, "floor", "./internal/testkit/servetest/floor")
}

// Main runs a package's tests (m.Run) with each command Build and
// BuildFloor build built once and shared by all of them (the source does
// not change while they run: a link of the command costs seconds, a dozen
// times over in a package of serve tests), removes the builds, and returns
// m.Run's code. A package's TestMain calls it in place of m.Run.
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "servetest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "servetest:", err)
		return 1
	}
	shared.mu.Lock()
	shared.dir, shared.built = dir, map[string]string{}
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	shared.dir, shared.built = "", nil
	shared.mu.Unlock()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "servetest:", err)
	}
	return code
}

// shared holds the builds of a test binary whose TestMain runs Main: its
// directory (empty outside Main) and the commands built there, by name.
var shared struct {
	mu    sync.Mutex
	dir   string
	built map[string]string
}

func build(t testing.TB, name, pkg string) string {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.dir == "" {
		return buildInto(t, t.TempDir(), name, pkg)
	}
	if bin, ok := shared.built[name]; ok {
		return bin
	}
	bin := buildInto(t, shared.dir, name, pkg)
	shared.built[name] = bin
	return bin
}

func buildInto(t testing.TB, dir, name, pkg string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building %s needs the go command: %v", name, err)
	}
	bin := filepath.Join(dir, name)
	build := exec.Command(goBin, "build", "-o", bin, pkg)
	build.Dir = conformance.ModuleRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, out)
	}
	return bin
}

// Process is `policycheck serve` running in a process of its own.
type Process struct {
	URL string // http://host:port
	// Socket is the path of the Unix domain socket the server listens
	// on, when an argument said --addr unix://PATH; URL's host then names
	// nothing, and only Client's connections reach the server.
	Socket string
	// Said is what the server logged before it said where it listens
	// (its warnings about the address among it).
	Said string
	PID  int
	cmd  *exec.Cmd
	// logged is all it has logged so far (see Logged).
	logged *Log
	// readDone is closed when standard error is read to its end.
	readDone chan struct{}
}

// Log is a server's log, written as it comes (by a process's reader, or
// as the io.Writer of an in-process server's logger) and read by a test
// meanwhile: the test kit's one locked buffer.
type Log = syncbuf.Buffer

// Logged returns all the server has logged on standard error so far
// (its decision log among it when OPA's console decision logger is on);
// after Stop or Terminate, all of it.
func (p *Process) Logged() string { return p.logged.String() }

// Client returns an HTTP client whose connections reach p: over TCP, or
// to its socket.
func (p *Process) Client() *http.Client {
	if p.Socket == "" {
		return &http.Client{}
	}
	sock := p.Socket
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// Start runs `bin serve --addr 127.0.0.1:0 args...` in the test's working
// directory (an --addr in args takes the first's place) and returns once
// the server says where it listens. The
// server is stopped (SIGTERM, then SIGKILL after 10 s) by Stop or when
// the test ends.
func Start(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	return StartIn(t, "", bin, args...)
}

// StartIn is Start with the server's working directory dir (the test's
// when dir is ""), for a command line written for another directory, such
// as the README's, which names its files from the repository root.
func StartIn(t testing.TB, dir, bin string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	return start(t, "policycheck serve", "policycheck serving", cmd)
}

// Python3 returns the python3 interpreter, for the tests that run the
// README's Python snippets against a server. Without one the test is
// skipped outside CI and fails under CI=true (.ci/run installs it).
func Python3(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is required under CI (the README's Python snippets run on it)")
		}
		t.Skip("python3 is not installed: the README's Python snippets are not run")
	}
	return p
}

// StartFloor runs the floor command bin (see BuildFloor) on a free
// loopback port, as Start runs serve.
func StartFloor(t testing.TB, bin string) *Process {
	t.Helper()
	return start(t, "floor", "floor serving", exec.Command(bin, "--addr", "127.0.0.1:0"))
}

// start runs cmd, the server what, which logs `msg="<msg>" addr=...` on
// standard error once it listens.
func start(t testing.TB, what, msg string, cmd *exec.Cmd) *Process {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{PID: cmd.Process.Pid, cmd: cmd, logged: &Log{}, readDone: make(chan struct{})}
	t.Cleanup(p.Stop)
	type heard struct{ addr, said string } // where it listens, what it said before
	addr := make(chan heard, 1)
	exited := make(chan string, 1) // what it wrote, when it ends before listening
	go func() {
		defer close(p.readDone)
		// Text logs (msg="..." addr=...) or JSON ones (--log-format json).
		re := regexp.MustCompile(`msg="` + regexp.QuoteMeta(msg) + `" addr=(\S+)|"msg":"` + regexp.QuoteMeta(msg) + `","addr":"([^"]+)"`)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 64<<20) // a decision-log record holds a whole input document
		var said strings.Builder
		listening := false
		for sc.Scan() {
			_, _ = p.logged.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !listening {
				listening = true
				addr <- heard{m[1] + m[2], said.String()}
			}
			if !listening {
				said.WriteString(sc.Text() + "\n")
			}
		}
		// A line past the scanner's bound ends the scan: read the rest,
		// so that the server never blocks writing to a full pipe.
		_, _ = io.Copy(io.Discard, stderr)
		if !listening {
			exited <- said.String()
		}
	}()
	select {
	case l := <-addr:
		a := l.addr
		p.Said = l.said
		if sock, ok := strings.CutPrefix(a, "unix://"); ok {
			p.Socket, a = sock, "policycheck.invalid"
		}
		p.URL = "http://" + a
		return p
	case said := <-exited:
		t.Fatalf("%s ended before it listened:\n%s", what, said)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not say where it listens", what)
	}
	return nil
}

// Stop stops the server and waits for it; later calls do nothing.
func (p *Process) Stop() {
	if p.cmd == nil {
		return
	}
	cmd := p.cmd
	p.cmd = nil
	_ = cmd.Process.Signal(syscall.SIGTERM)
	// Standard error is read to its end (the server exited) before Wait
	// closes it.
	select {
	case <-p.readDone:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-p.readDone
	}
	_ = cmd.Wait()
}

// Kill kills the server with SIGKILL, as a crash or the kernel's
// out-of-memory killer would, and waits for it: nothing it had not
// written or sent yet survives. Stop then does nothing.
func (p *Process) Kill() {
	if p.cmd == nil {
		return
	}
	cmd := p.cmd
	p.cmd = nil
	_ = cmd.Process.Kill()
	<-p.readDone
	_ = cmd.Wait()
}

// Terminate sends the server SIGTERM and waits at most wait for it to
// exit (then kills it): it returns how long the server took to exit
// after the signal and its exit error (nil for exit status 0; an error
// saying so when it had to be killed). Stop then does nothing.
func (p *Process) Terminate(wait time.Duration) (time.Duration, error) {
	if p.cmd == nil {
		return 0, errors.New("the server was stopped already")
	}
	cmd := p.cmd
	p.cmd = nil
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	// Standard error is read to its end (the server exited) before Wait
	// closes it, as in Stop.
	select {
	case <-p.readDone:
		took := time.Since(start)
		return took, cmd.Wait()
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-p.readDone
		_ = cmd.Wait()
		return time.Since(start), fmt.Errorf("still running %v after SIGTERM: killed", wait)
	}
}

// CPU is the user and system CPU time process pid has used, read from
// /proc (0 where /proc does not tell).
func CPU(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
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
