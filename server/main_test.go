package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/policycheck/policycheck/internal/testkit/servetest"
	"github.com/policycheck/policycheck/server"
)

// TestMain fails the package when a test leaks goroutines or file
// descriptors. The tests that run serve in a process of its own share one
// build of the command (servetest.Main).
func TestMain(m *testing.M) {
	before := countFDs()
	code := servetest.Main(m)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
		// Let closed sockets be reaped before counting.
		after := countFDs()
		for i := 0; i < 50 && after > before; i++ {
			time.Sleep(10 * time.Millisecond)
			after = countFDs()
		}
		if after > before {
			fmt.Fprintf(os.Stderr, "file descriptor leak: %d open before the tests, %d after\n", before, after)
			code = 1
		}
	}
	os.Exit(code)
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// running is a server serving on a loopback port.
type running struct {
	srv    *server.Server
	url    string
	addr   string
	client *http.Client
	cancel context.CancelFunc // starts the graceful shutdown
	done   chan error         // Serve's result

	// gens is the client's side of the runs' generations: the last one
	// each run's answer gave (see running.do).
	gensMu sync.Mutex
	gens   map[string]string
}

// stop shuts the server down now, gracefully; the test's cleanup then
// finds it stopped and still checks Serve's result.
func (rs *running) stop() {
	rs.cancel()
	err := <-rs.done
	rs.done <- err
	rs.client.Transport.(*http.Transport).CloseIdleConnections()
}

// start serves a new server on 127.0.0.1:0 until the test ends, then
// shuts it down gracefully and checks that Serve returned nil.
func start(t testing.TB, opts ...option) *running {
	t.Helper()
	srv, err := newServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Start the plugins before returning, so that tests can trigger
	// them; Serve's own Start is then a no-op.
	if err := srv.Start(ctx); err != nil {
		cancel()
		ln.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	rs := &running{srv: srv, url: "http://" + ln.Addr().String(), addr: ln.Addr().String(),
		client: &http.Client{Transport: tr, Timeout: 60 * time.Second}, cancel: cancel, done: done}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Serve: %v", err)
		}
		done <- nil
		tr.CloseIdleConnections()
	})
	return rs
}
