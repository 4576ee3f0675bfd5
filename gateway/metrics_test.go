package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/caches"
)

// TestCachesTableMetrics: every metric docs/caches.md's table names for
// the gateway's rows (internal/caches: files under gateway/) is on the
// gateway's /metrics.
func TestCachesTableMetrics(t *testing.T) {
	g := newTestGateway(t, newFakeUpstream(), nil)
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, c := range caches.Table {
		if !strings.HasPrefix(c.File, "gateway/") {
			continue
		}
		rows++
		for _, m := range c.Metrics {
			if !strings.Contains(string(page), "\n# TYPE "+m+" ") {
				t.Errorf("%s: /metrics has no %s", c.Name, m)
			}
		}
	}
	if rows == 0 {
		t.Fatal("the table has no row of the gateway")
	}
}
