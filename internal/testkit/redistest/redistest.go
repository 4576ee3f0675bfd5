// Package redistest runs a real redis-server for tests: on a free
// loopback port, its data in a temporary directory, with or without
// persistence (AOF); or a Redis Cluster of three such servers
// (StartCluster; SharedCluster for the tests of a package to share one,
// since a cluster takes two seconds to say it is ready), each serving a
// third of the hash slots, with what a test needs to tell which node
// serves a key (Cluster.NodeOf); or a lone cluster node that serves no
// slot (StartNode). Do sends a server one command over RESP, so that
// neither redis-cli nor a client library is needed. Without
// redis-server the test is skipped outside CI and fails under CI=true
// (scripts/test.sh installs it).
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	// cluster: a cluster node (its bus on port+10000).
	cluster bool
	cmd     *exec.Cmd
}

// Bin returns redis-server's path, skipping the test (failing under
// CI=true) without it.
func Bin(t testing.TB) string {
	t.Helper()
	p, err := bin()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is required under CI (the gateway's session store tests run on it)")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server): the gateway's Redis session store is not tested")
	}
	return p
}

// errNoRedis: redis-server is not installed.
var errNoRedis = errors.New("redis-server is not installed")

func bin() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err == nil {
		return p, nil
	}
	if _, serr := os.Stat("/usr/bin/redis-server"); serr == nil {
		return "/usr/bin/redis-server", nil
	}
	return "", errNoRedis
}

// Start starts a redis-server, with AOF persistence (appendfsync always)
// when aof is true, else with none; it is killed when the test ends.
func Start(t testing.TB, aof bool) *Server {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{bin: Bin(t), dir: t.TempDir(), port: port, aof: aof}
	s.name()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// name sets s's Addr and URL from its port.
func (s *Server) name() {
	s.Addr = "127.0.0.1:" + strconv.Itoa(s.port)
	s.URL = "redis://" + s.Addr + "/0"
}

// freePort is a loopback port nothing listens on.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the server and waits until it answers PING.
func (s *Server) start() error {
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir, "--save", "", "--protected-mode", "no"}
	if s.aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if s.cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.dir, "nodes.conf"))
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s.ping() {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Kill()
	return fmt.Errorf("redis-server on %s does not answer PING", s.Addr)
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
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// SetAOF says whether the server's next start (Restart) persists with
// AOF.
func (s *Server) SetAOF(aof bool) { s.aof = aof }
