// Package redistest runs a real redis-server for tests: on a free
// loopback port, its data in the test's temporary directory, with or
// without persistence (AOF). Without redis-server the test is skipped
// outside CI and fails under CI=true (scripts/test.sh installs it).
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is one redis-server process.
type Server struct {
	// Addr is HOST:PORT; URL is redis://Addr/0.
	Addr, URL string
	bin       string
	dir       string
	port      int
	aof       bool
	cmd       *exec.Cmd
}

// Bin returns redis-server's path, skipping the test (failing under
// CI=true) without it.
func Bin(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/redis-server"); serr == nil {
			return "/usr/bin/redis-server"
		}
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is required under CI (the gateway's session store tests run on it)")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server): the gateway's Redis session store is not tested")
	}
	return p
}

// Start starts a redis-server, with AOF persistence (appendfsync always)
// when aof is true, else with none; it is killed when the test ends.
func Start(t testing.TB, aof bool) *Server {
	t.Helper()
	bin := Bin(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{bin: bin, dir: t.TempDir(), port: port, aof: aof}
	s.Addr = "127.0.0.1:" + strconv.Itoa(port)
	s.URL = "redis://" + s.Addr + "/0"
	s.start(t)
	t.Cleanup(s.Kill)
	return s
}

func (s *Server) start(t testing.TB) {
	t.Helper()
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir, "--save", "", "--protected-mode", "no"}
	if s.aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s.ping() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Kill()
	t.Fatalf("redis-server on %s does not answer PING", s.Addr)
}

// ping sends PING and reads +PONG.
func (s *Server) ping() bool {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprint(c, "PING\r\n"); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// Kill kills the server with SIGKILL (nothing it had not written
// survives) and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart kills the server and starts it again on the same port and
// directory: with AOF it reads its data back, without it starts empty.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	s.start(t)
}

// SetAOF says whether the server's next start (Restart) persists with
// AOF.
func (s *Server) SetAOF(aof bool) { s.aof = aof }
