package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/internal/testkit/floor"
	"github.com/policycheck/policycheck/internal/testkit/gen"
)

// BenchmarkGrowingAgainstFloor takes issue 36's growing-history ratio in
// process: one client sends a stateless conversation's history so far,
// one message longer a request, with the registry and a context in the
// body as TestSideBySide's agents do (agent.fullParts), to the sidecar's
// handler (server=sidecar, server.DefaultConfig) and, in the same run, to
// the floor's (server=floor, internal/testkit/floor: read the body, answer as many
// bytes as the sidecar's decision). Both are served by httptest.NewServer
// over the loopback and driven by the same http.Client, so cpu-ns/op (the
// process's CPU per request) holds the client's share as well, the same
// in both: the difference between the two is the sidecar's cost beyond
// the floor. Each conversation is primed untimed (its history two
// messages shorter, one shorter, whole), as the harness does.
//
// A conversation grows by room messages (400 at 1,000 messages, as the
// harness's one client sends; 100 at 10,000), then the next one, from
// another seed, is primed (untimed) and takes over: cpu-ns/op counts the
// CPU of the timed requests only.
func BenchmarkGrowingAgainstFloor(b *testing.B) {
	for _, msgs := range []int{1000, 10000} {
		room := 400
		if msgs > 1000 {
			room = 100
		}
		for _, tools := range []int{10, 100} {
			o := gen.Default(msgs + room + 2)
			o.Tools = tools
			reg := gen.Registry(1, o)
			var convs []*agent
			conv := func(k int) *agent {
				for len(convs) <= k {
					convs = append(convs, agentOf(reg, gen.Messages(int64(100+len(convs)), o)))
				}
				return convs[k]
			}
			for _, impl := range []string{"floor", "sidecar"} {
				b.Run(fmt.Sprintf("messages=%d/tools=%d/server=%s", msgs, tools, impl), func(b *testing.B) {
					srv, err := newServer()
					if err != nil {
						b.Fatal(err)
					}
					sc := httptest.NewServer(srv.Handler())
					defer sc.Close()
					client := &http.Client{Transport: &http.Transport{}}
					defer client.CloseIdleConnections()
					url := sc.URL + "/v1/decide"
					var fl *httptest.Server
					if impl == "floor" {
						fl = httptest.NewServer(&floor.Handler{})
						defer fl.Close()
					}
					// prime starts conversation k: its history sent three
					// times to the sidecar, and the floor's URL answering
					// as many bytes as the sidecar's decision.
					prime := func(k int) *agent {
						a, reply := conv(k), 0
						for _, n := range []int{msgs - 2, msgs - 1, msgs} {
							reply = answerLen(b, client, sc.URL+"/v1/decide", a.fullBody(n))
						}
						if fl != nil {
							url = fl.URL + "/?reply=" + strconv.Itoa(reply)
							answerLen(b, client, url, a.fullBody(msgs))
						}
						return a
					}
					k, i := 0, 0
					a := prime(k)
					b.SetBytes(int64(a.ends[msgs-1]))
					var cpu time.Duration
					n := 0
					for b.Loop() {
						if i++; i > room {
							b.StopTimer()
							k, i = k+1, 1
							a = prime(k)
							b.StartTimer()
						}
						c0, _ := cputime.Process()
						if !sendParts(client, url, a.fullParts(msgs+i)...) {
							b.Fatalf("conversation %d, request %d failed", k, i)
						}
						c1, _ := cputime.Process()
						cpu += c1 - c0
						n++
					}
					if cpu > 0 {
						b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/op")
					}
				})
			}
		}
	}
}
