package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/loader"
)

// BenchmarkShadowLatency measures what a shadow policy adds to the
// answer's latency: two sidecars on loopback, one with a shadow policy
// (the example policies plus one deny and one hide rule) and one
// without, answer the same /v1/decide requests (every prefix of the
// example histories, context {"group": "support"}), alternated request
// by request so that both see the same machine load. Reported: the p50
// and p99 of each side's request latency, as seen by the client.
func BenchmarkShadowLatency(b *testing.B) {
	examples := filepath.Join(conformance.ModuleRoot(), "examples")
	reg, err := loader.ReadRegistry(filepath.Join(examples, "registry.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	policies := filepath.Join(examples, "policies")
	rule := filepath.Join(b.TempDir(), "candidate.rego")
	if err := os.WriteFile(rule, []byte(shadowCandidate), 0o644); err != nil {
		b.Fatal(err)
	}
	plain := start(b, withRegistry(reg), withEngine(engine.PolicyPaths(policies)))
	shadowed := start(b, withRegistry(reg), withEngine(engine.PolicyPaths(policies)), withShadow(policies, rule))
	var bodies [][]byte
	files, _ := filepath.Glob(filepath.Join(examples, "histories", "*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var msgs []json.RawMessage
		if err := json.Unmarshal(raw, &msgs); err != nil {
			b.Fatal(err)
		}
		for i := 1; i <= len(msgs); i++ {
			body, _ := json.Marshal(map[string]any{"history": msgs[:i], "context": map[string]any{"group": "support"}})
			bodies = append(bodies, body)
		}
	}
	var off, on []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body := bodies[i%len(bodies)]
		for _, side := range []struct {
			rs  *running
			out *[]time.Duration
		}{{plain, &off}, {shadowed, &on}} {
			t0 := time.Now()
			status, _ := side.rs.post(b, "/v1/decide", body)
			*side.out = append(*side.out, time.Since(t0))
			if status != http.StatusOK {
				b.Fatalf("status %d", status)
			}
		}
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[int(p*float64(len(s)-1))].Microseconds())
	}
	b.ReportMetric(pct(off, .5), "p50-off-µs")
	b.ReportMetric(pct(off, .99), "p99-off-µs")
	b.ReportMetric(pct(on, .5), "p50-shadow-µs")
	b.ReportMetric(pct(on, .99), "p99-shadow-µs")
}
