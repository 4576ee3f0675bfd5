package servetest_test

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/servetest"
)

// TestStartServesAndStops: the built command serves /health on the URL
// Start returns, its CPU time is readable, and Stop ends it.
func TestStartServesAndStops(t *testing.T) {
	p := servetest.Start(t, servetest.Build(t))
	resp, err := http.Get(p.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %d", resp.StatusCode)
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil && servetest.CPU(p.PID) <= 0 {
		t.Errorf("no CPU time read for pid %d", p.PID)
	}
	p.Stop()
	if _, err := http.Get(p.URL + "/health"); err == nil {
		t.Fatal("the server still answers after Stop")
	}
	p.Stop() // a second Stop does nothing
}

// TestStartReportsAServerThatDoesNotStart: a serve that refuses its flags
// fails the test at once with what it said, not after a minute's wait.
func TestStartReportsAServerThatDoesNotStart(t *testing.T) {
	bin := servetest.Build(t)
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		servetest.Start(ft, bin, "--timeout", "0s")
	}()
	<-done
	if !ft.failed || !strings.Contains(ft.msg, "--timeout") {
		t.Fatalf("Start did not report the refusal: failed=%v %q", ft.failed, ft.msg)
	}
}

// fakeT records a fatal failure instead of ending the test.
type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeT) Fatal(args ...any) {
	f.failed, f.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
