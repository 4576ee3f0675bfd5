package servetest_test

import (
	"net/http"
	"os"
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
