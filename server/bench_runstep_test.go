package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/internal/testkit/floor"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/server"
)

// discardWriter is an http.ResponseWriter that keeps nothing.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// stepWorkload is issue 36's incremental workload as TestSideBySide
// builds it: a run primed with a 1,000-message generated history and its
// registry, then one message appended per request, each with the run's
// generation (of run id).
type stepWorkload struct {
	prime  []byte   // offset 0: the registry and the first 1,000 messages
	bodies [][]byte // the steps, in order
}

const (
	stepMessages = 1000 // the history a run is primed with
	stepsPerRun  = 2000 // the steps built for each run
)

func newStepWorkload(b *testing.B, tools int, seed int64, id string) stepWorkload {
	o := gen.Default(stepMessages)
	o.Tools = tools
	reg := gen.Registry(1, o)
	grow := o
	grow.Messages = stepMessages + stepsPerRun
	all := gen.Messages(seed, grow)
	first := mustJSON(b, toRaw(all[:stepMessages]))
	w := stepWorkload{prime: mustJSON(b, map[string]any{"offset": 0, "registry": json.RawMessage(reg), "messages": json.RawMessage(first)})}
	generation := server.RunGeneration("", id, mustJSON(b, json.RawMessage(reg)), first)
	for i := range stepsPerRun {
		off := stepMessages + i
		msgs := mustJSON(b, toRaw(all[off:off+1]))
		w.bodies = append(w.bodies, mustJSON(b, map[string]any{"offset": off, "messages": json.RawMessage(msgs), "context": json.RawMessage(`{"user": "load"}`),
			"generation": generation}))
		generation = server.RunGeneration(generation, id, nil, msgs)
	}
	return w
}

// stepHandler returns the handler of side, a new server with each run
// ids[k] primed with ws[k] ("sidecar") or the floor, and the path of a
// step of the run id: the floor's asks for as many bytes as the
// sidecar's first decision.
func stepHandler(b *testing.B, side string, ids []string, ws []stepWorkload) (http.Handler, func(id string) string) {
	srv, err := newServer()
	require.NoError(b, err)
	h := srv.Handler()
	reply := 0
	for k, id := range ids {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/runs/"+id+"/decide", bytes.NewReader(ws[k].prime)))
		require.Equal(b, http.StatusOK, rec.Code, rec.Body.String())
		reply = rec.Body.Len()
	}
	if side == "floor" {
		return &floor.Handler{}, func(string) string { return "/?reply=" + strconv.Itoa(reply) }
	}
	return h, func(id string) string { return "/v1/runs/" + id + "/decide" }
}

// BenchmarkRunStepAgainstFloor is one incremental step of issue 36's
// side-by-side workload (stepWorkload) in process, the bodies built
// before the clock starts. side=floor sends the same bodies to a handler
// that reads each and answers as many bytes as the run's first decision.
// Both through http.Handler.ServeHTTP, no network: the cost the server
// adds above reading the body, per step. Every 2,000 steps a new server
// takes over (its run primed untimed), so that no step is answered from
// what an earlier run of the same messages left in a cache.
func BenchmarkRunStepAgainstFloor(b *testing.B) {
	for _, tools := range []int{10, 100} {
		w := newStepWorkload(b, tools, 100, "step")
		for _, side := range []string{"sidecar", "floor"} {
			b.Run("tools="+strconv.Itoa(tools)+"/side="+side, func(b *testing.B) {
				var h http.Handler
				reqs := make([]*http.Request, stepsPerRun)
				start := func() {
					var path func(string) string
					h, path = stepHandler(b, side, []string{"step"}, []stepWorkload{w})
					for j := range reqs {
						reqs[j] = httptest.NewRequest(http.MethodPost, path("step"), bytes.NewReader(w.bodies[j]))
					}
				}
				start()
				out := &discardWriter{h: http.Header{}}
				b.ReportAllocs()
				i := 0
				// Process CPU time, less the untimed priming of new runs.
				var untimed time.Duration
				cpu0, _ := cputime.Process()
				for b.Loop() {
					if i == stepsPerRun {
						b.StopTimer()
						u0, _ := cputime.Process()
						start()
						i = 0
						u1, _ := cputime.Process()
						untimed += u1 - u0
						b.StartTimer()
					}
					clear(out.h)
					out.code = 0
					h.ServeHTTP(out, reqs[i])
					if out.code != 0 && out.code != http.StatusOK {
						b.Fatalf("step %d: %d", i, out.code)
					}
					i++
				}
				if cpu1, ok := cputime.Process(); ok {
					b.ReportMetric(float64(cpu1-cpu0-untimed)/float64(b.N), "cpu-ns/op")
				}
			})
		}
	}
}

// BenchmarkRunStepLoopback drives the same steps over loopback HTTP
// (httptest.Server) from 4 closed-loop clients, each on a run of its own,
// the load generator in the same process as the server (as
// TestSideBySide's is on the same machine). It reports the steps' p50
// and p99 latency and the process's CPU per step (server, client and
// both ends of the loopback). At most 4 x 2,000 steps (-benchtime
// 8000x): a run holds 2,000. Run it with -cpu 2 on an otherwise idle
// machine; latencies of a loaded one say little.
func BenchmarkRunStepLoopback(b *testing.B) {
	const clients = 4
	for _, tools := range []int{10, 100} {
		ws := make([]stepWorkload, clients)
		for k := range ws {
			ws[k] = newStepWorkload(b, tools, int64(100+k), "c"+strconv.Itoa(k))
		}
		for _, side := range []string{"sidecar", "floor"} {
			b.Run("tools="+strconv.Itoa(tools)+"/side="+side, func(b *testing.B) {
				per := (b.N + clients - 1) / clients
				if per > stepsPerRun {
					b.Fatalf("at most %d steps", clients*stepsPerRun)
				}
				ids := make([]string, clients)
				for k := range ids {
					ids[k] = "c" + strconv.Itoa(k)
				}
				// Each client's run on one server (primed untimed).
				h, path := stepHandler(b, side, ids, ws)
				ts := httptest.NewServer(h)
				defer ts.Close()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
				defer client.CloseIdleConnections()
				send := func(k, i int) time.Duration {
					t0 := time.Now()
					resp, err := client.Post(ts.URL+path(ids[k]), "application/json", bytes.NewReader(ws[k].bodies[i]))
					if err != nil {
						b.Error(err)
						return 0
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("client %d step %d: %d", k, i, resp.StatusCode)
					}
					return time.Since(t0)
				}
				lat := make([][]time.Duration, clients)
				var wg sync.WaitGroup
				b.ResetTimer()
				cpu0, _ := cputime.Process()
				for k := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range per {
							lat[k] = append(lat[k], send(k, i))
						}
					}()
				}
				wg.Wait()
				cpu1, ok := cputime.Process()
				b.StopTimer()
				all := slices.Concat(lat...)
				slices.Sort(all)
				if ok {
					b.ReportMetric(float64(cpu1-cpu0)/float64(len(all)), "cpu-ns/op")
				}
				b.ReportMetric(float64(all[len(all)/2]), "p50-ns")
				b.ReportMetric(float64(all[len(all)*99/100]), "p99-ns")
			})
		}
	}
}
