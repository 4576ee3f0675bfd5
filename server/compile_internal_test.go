package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// TestRegistryCompiledOnce: requests that carry one registry the server
// has not compiled yet, arriving together, share one compilation: the
// registry is read and the engine compiled once, every request gets that
// engine, and the compilations counter says 1. A failure is shared too,
// and not kept: the next request tries again.
func TestRegistryCompiledOnce(t *testing.T) {
	s, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	st := s.state.Load()
	reg, err := loader.ParseRegistry("r.yaml", []byte("tools:\n  - name: get_time\n"))
	if err != nil {
		t.Fatal(err)
	}

	const clients = 8
	var reads atomic.Int32
	read := func() (*facts.Registry, *Error) {
		reads.Add(1)
		// Hold the compilation open while the other requests arrive.
		time.Sleep(100 * time.Millisecond)
		return reg, nil
	}
	engines := make([]*engine.Engine, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			e, herr := s.registryEngine(context.Background(), st, "k1", read)
			if herr != nil {
				t.Error(herr)
				return
			}
			engines[i] = e
		})
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("the registry was read %d times for %d concurrent requests, want 1", n, clients)
	}
	for i, e := range engines {
		if e == nil || e != engines[0] {
			t.Errorf("request %d got engine %p, request 0 %p", i, e, engines[0])
		}
	}
	rec := httptest.NewRecorder()
	s.metrics.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if want := "\npolicycheck_registry_engines_compiled_total 1\n"; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("/metrics lacks %q", want)
	}

	// A registry that does not load: every waiting request gets the
	// error, and nothing is kept.
	bad := func() (*facts.Registry, *Error) {
		reads.Add(1)
		time.Sleep(50 * time.Millisecond)
		return nil, badRequest(CodeBadRegistry, "no", "/registry")
	}
	reads.Store(0)
	for range clients {
		wg.Go(func() {
			if _, herr := s.registryEngine(context.Background(), st, "k2", bad); herr == nil || !strings.Contains(herr.Message, "no") {
				t.Errorf("a refused registry gave %v", herr)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("the refused registry was read %d times, want 1", n)
	}
	if _, herr := s.registryEngine(context.Background(), st, "k2", bad); herr == nil || reads.Load() != 2 {
		t.Errorf("a failed compilation was kept: %v, %d reads", herr, reads.Load())
	}
}
