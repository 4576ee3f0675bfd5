package gateway_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/gateway/internal/sessionstore"
	"github.com/policycheck/policycheck/internal/testkit/redistest"
)

// BenchmarkReplicas runs sessions of 1,000 read_file calls through 1 and
// 3 replicas (Gateways in this process sharing a session store: memory,
// a real Redis server, or a real three-node Redis Cluster), a session's calls spread round robin over the replicas
// as HAProxy without affinity spreads them, side by side with the same
// calls straight to the upstream: the added latency per call (p50, p99).
// Then 6 such sessions at once: calls per second through the replicas.
// BENCHMARKS.md ("Gateway replicas") reports its figures.
func BenchmarkReplicas(b *testing.B) {
	const calls = 1000
	const concurrent = 6
	for _, store := range []string{"memory", "redis", "cluster"} {
		for _, replicas := range []int{1, 3} {
			b.Run(fmt.Sprintf("store=%s/replicas=%d", store, replicas), func(b *testing.B) {
				var st sessionstore.Store
				switch store {
				case "memory":
					st = sessionstore.NewMemory(sessionstore.Options{})
				case "redis":
					st = redisStore(b, redistest.Start(b, false), sessionstore.Options{})
				case "cluster":
					st = clusterStore(b, sessionstore.Options{})
				}
				f := newFakeUpstream()
				gs := make([]*gateway.Gateway, replicas)
				for i := range gs {
					gs[i] = newTestGateway(b, f, func(c *gateway.Config) {
						c.Logger = nil
						gateway.UseStore(c, st)
					})
				}
				// clients connects one client per replica as principal p.
				clients := func(p string) []*mcp.ClientSession {
					out := make([]*mcp.ClientSession, replicas)
					for i, g := range gs {
						out[i] = connect(b, g, gateway.Principal{Name: p}, nil)
					}
					return out
				}
				var gw, direct []time.Duration
				var rate float64
				for n := 0; n < b.N; n++ {
					gw = append(gw, spread(b, clients(fmt.Sprintf("s%d", n)), calls)...)
					dc := directClient(b, f)
					direct = append(direct, session(b, dc, calls)...)
					_ = dc.Close()

					var wg sync.WaitGroup
					start := time.Now()
					for w := range concurrent {
						cs := clients(fmt.Sprintf("c%d-%d", n, w))
						wg.Add(1)
						go func() {
							defer wg.Done()
							spread(b, cs, calls)
						}()
					}
					wg.Wait()
					rate = float64(concurrent*calls) / time.Since(start).Seconds()
				}
				for _, q := range []struct {
					name string
					q    float64
				}{{"p50", 0.50}, {"p99", 0.99}} {
					gq, dq := quantile(gw, q.q), quantile(direct, q.q)
					b.ReportMetric(float64(gq.Microseconds()), "gateway-"+q.name+"-µs")
					b.ReportMetric(float64((gq - dq).Microseconds()), "added-"+q.name+"-µs")
				}
				b.ReportMetric(rate, "calls/s")
			})
		}
	}
}

// spread times n calls of read_file, the i-th on cs[i % len(cs)].
func spread(b *testing.B, cs []*mcp.ClientSession, n int) []time.Duration {
	ctx := context.Background()
	out := make([]time.Duration, n)
	p := &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/etc/motd"}}
	for i := range n {
		start := time.Now()
		res, err := cs[i%len(cs)].CallTool(ctx, p)
		out[i] = time.Since(start)
		if err != nil || res.IsError {
			b.Errorf("call %d: %v %v", i, err, res)
			return out
		}
	}
	return out
}
