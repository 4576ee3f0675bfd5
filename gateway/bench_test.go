package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/internal/testkit/cputime"
)

// directClient is a Go SDK client of f straight, no gateway.
func directClient(b *testing.B, f *fakeUpstream) *mcp.ClientSession {
	ct, st := mcp.NewInMemoryTransports()
	if _, err := f.srv.Connect(context.Background(), st, nil); err != nil {
		b.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// session times n calls of read_file on cs, one after the other.
func session(b *testing.B, cs *mcp.ClientSession, n int) []time.Duration {
	ctx := context.Background()
	out := make([]time.Duration, n)
	p := &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/etc/motd"}}
	for i := range n {
		start := time.Now()
		res, err := cs.CallTool(ctx, p)
		out[i] = time.Since(start)
		if err != nil || res.IsError {
			b.Fatalf("call %d: %v %v", i, err, res)
		}
	}
	return out
}

// memDelta is what sessions allocated: bytes and garbage collections.
type memDelta struct{ bytes, gcs uint64 }

func (d *memDelta) add(before, after runtime.MemStats) {
	d.bytes += after.TotalAlloc - before.TotalAlloc
	d.gcs += uint64(after.NumGC - before.NumGC)
}

func readMem() runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// BenchmarkSession runs, side by side in each iteration, a session of n
// calls through the gateway and the same calls straight to the upstream
// (both over the Go SDK's in-memory transports), and reports each one's
// per-call p50 and p99 and what the gateway adds: with the collector as
// the environment sets it (gc=default: GOGC, unset is 100), and as
// `policycheck gateway --memory-limit 512MiB` sets it (gc=memory-limit:
// collections only as the heap nears the limit, benchLimit).
func BenchmarkSession(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, gc := range []string{"default", "memory-limit"} {
			b.Run(fmt.Sprintf("calls=%d/gc=%s", n, gc), func(b *testing.B) {
				if gc == "memory-limit" {
					defer withMemoryLimit(benchLimit)()
				}
				benchSession(b, n)
			})
		}
	}
}

// benchLimit is the memory limit of BenchmarkSession's gc=memory-limit.
const benchLimit = 512 << 20

// withMemoryLimit runs the collector as --memory-limit does (no
// proportional goal, the soft limit limit) until the returned function
// restores what was set before.
func withMemoryLimit(limit int64) func() {
	runtime.GC()
	pct := debug.SetGCPercent(-1)
	lim := debug.SetMemoryLimit(limit)
	return func() {
		debug.SetMemoryLimit(lim)
		debug.SetGCPercent(pct)
		runtime.GC()
	}
}

// benchSession is one BenchmarkSession of n calls per iteration.
func benchSession(b *testing.B, n int) {
	f := newFakeUpstream()
	g := newTestGateway(b, f, nil)
	var gw, direct []time.Duration
	var gwCPU, directCPU time.Duration
	var gwMem, directMem memDelta
	for i := 0; i < b.N; i++ {
		cs := connect(b, g, gateway.Principal{Name: fmt.Sprintf("bench%d", i)}, nil)
		m0 := readMem()
		c0, _ := cputime.Process()
		gw = append(gw, session(b, cs, n)...)
		c1, _ := cputime.Process()
		gwMem.add(m0, readMem())
		dc := directClient(b, f)
		m2 := readMem()
		c2, _ := cputime.Process()
		direct = append(direct, session(b, dc, n)...)
		c3, _ := cputime.Process()
		directMem.add(m2, readMem())
		_ = dc.Close()
		gwCPU += c1 - c0
		directCPU += c3 - c2
	}
	calls := float64(b.N * n)
	b.ReportMetric(float64(gwCPU.Microseconds())/calls, "gateway-cpu-µs/call")
	b.ReportMetric(float64(directCPU.Microseconds())/calls, "direct-cpu-µs/call")
	// What the garbage collector is given: the bytes allocated
	// per call and the collections per 1,000 calls, which load
	// on the machine does not change (GOGC as the run's
	// environment says; unset is 100).
	b.ReportMetric(float64(gwMem.bytes)/calls, "gateway-alloc-B/call")
	b.ReportMetric(float64(directMem.bytes)/calls, "direct-alloc-B/call")
	b.ReportMetric(float64(gwMem.gcs)*1000/calls, "gateway-gc/1000calls")
	b.ReportMetric(float64(directMem.gcs)*1000/calls, "direct-gc/1000calls")
	if v := os.Getenv("GOGC"); v != "" {
		b.Logf("GOGC=%s", v)
	}
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		gq, dq := quantile(gw, q.q), quantile(direct, q.q)
		b.ReportMetric(float64(gq.Microseconds()), "gateway-"+q.name+"-µs")
		b.ReportMetric(float64(dq.Microseconds()), "direct-"+q.name+"-µs")
		b.ReportMetric(float64((gq - dq).Microseconds()), "added-"+q.name+"-µs")
	}
}

// BenchmarkListTools1000 lists 1,000 upstream tools, all mapped by the
// registry, through the gateway and straight.
func BenchmarkListTools1000(b *testing.B) {
	const n = 1000
	f := &fakeUpstream{srv: mcp.NewServer(&mcp.Implementation{Name: "many"}, nil)}
	var reg strings.Builder
	reg.WriteString("tools:\n")
	for i := range n {
		name := fmt.Sprintf("tool_%04d", i)
		f.srv.AddTool(&mcp.Tool{Name: name, Description: "Tool number " + name, InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		fmt.Fprintf(&reg, "  - name: %s\n    upstream: files\n", name)
	}
	r := mustRegistry(b, reg.String())
	g, err := gateway.New(context.Background(), gateway.Config{Registry: r, Upstreams: []gateway.Upstream{f.upstreamSpec("files")}})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	for _, via := range []string{"gateway", "direct"} {
		b.Run(via, func(b *testing.B) {
			var cs *mcp.ClientSession
			if via == "gateway" {
				cs = connect(b, g, gateway.Principal{Name: "lister"}, nil)
			} else {
				cs = directClient(b, f)
				defer cs.Close()
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			defer cputime.PerOp(b)()
			for i := 0; i < b.N; i++ {
				res, err := cs.ListTools(ctx, nil)
				if err != nil || len(res.Tools) != n {
					b.Fatalf("%v %d", err, len(res.Tools))
				}
			}
		})
	}
}

// BenchmarkSessionMemory reports the heap a session of n calls holds in
// the gateway (its history, as JSON and as the run's messages, and its
// facts).
func BenchmarkSessionMemory(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("calls=%d", n), func(b *testing.B) {
			f := newFakeUpstream()
			g := newTestGateway(b, f, nil)
			var per float64
			for i := 0; i < b.N; i++ {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				cs := connect(b, g, gateway.Principal{Name: fmt.Sprintf("mem%d", i)}, nil)
				session(b, cs, n)
				_ = cs.Close()
				runtime.GC()
				runtime.ReadMemStats(&after)
				per = float64(after.HeapAlloc) - float64(before.HeapAlloc)
			}
			b.ReportMetric(per/1024, "KiB/session")
			b.ReportMetric(per/float64(n), "B/call")
		})
	}
}
