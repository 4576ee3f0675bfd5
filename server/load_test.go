package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/server"
)

var (
	loadFlag = flag.Bool("load", false, "run TestLoad, the bounded load test (loopback only; prints decisions/s and p50/p99)")
	loadOPA  = flag.String("load-opa", "", "path of a stock opa binary: TestLoad also measures `opa run --server` on the naive pure-Rego baseline")
)

// loadConfig is one load scenario.
type loadConfig struct {
	messages int   // history length (the incremental path starts its runs primed to this length)
	clients  []int // concurrent clients
	full     int   // requests per full-history measurement
	inc      int   // requests per incremental measurement
	seeds    int   // distinct agent histories (and registries); 0: one per client
	cold     int   // never-seen histories per cold measurement
}

// TestLoad is the bounded load test: go test -run TestLoad -load -v ./server/
// (add -load-opa /path/to/opa for the stock OPA baseline). It decides
// generated histories over loopback at 1, 4, 16 and 100 clients, with a
// fixed request count per measurement, and prints decisions/s and p50/p99
// latency. It asserts nothing about time.
func TestLoad(t *testing.T) {
	if !*loadFlag {
		t.Skip("the load test runs with -load")
	}
	runLoad(t, loadConfig{messages: 1000, clients: []int{1, 4, 16, 100}, full: 400, inc: 4000, cold: 20})
}

// TestLoadSmoke is the small version CI runs: the same code paths, a few
// requests, every one of which must succeed.
func TestLoadSmoke(t *testing.T) {
	runLoad(t, loadConfig{messages: 40, clients: []int{1, 4}, full: 8, inc: 16, seeds: 1, cold: 4})
}

type result struct {
	name     string
	clients  int
	n        int
	elapsed  time.Duration
	lat      []time.Duration
	failures int
	cpu      time.Duration // process CPU (server and clients) over the measurement
}

func (r result) String() string {
	sort.Slice(r.lat, func(i, j int) bool { return r.lat[i] < r.lat[j] })
	pct := func(p float64) time.Duration {
		if len(r.lat) == 0 {
			return 0
		}
		return r.lat[min(len(r.lat)-1, int(p*float64(len(r.lat))))]
	}
	cpu := "n/a"
	if r.cpu > 0 {
		cpu = (r.cpu / time.Duration(r.n)).Round(10 * time.Microsecond).String()
	}
	return fmt.Sprintf("%-36s clients=%-3d requests=%-5d %8.1f decisions/s  p50=%-9v p99=%-9v cpu/decision=%-8s failures=%d",
		r.name, r.clients, r.n, float64(r.n)/r.elapsed.Seconds(), pct(0.50).Round(10*time.Microsecond),
		pct(0.99).Round(10*time.Microsecond), cpu, r.failures)
}

// drive runs n requests over the given number of clients; next(client, i)
// sends client's i-th request and reports whether it succeeded.
func drive(name string, clients, n int, next func(client, i int) bool) result {
	res := result{name: name, clients: clients, n: n}
	lats := make([][]time.Duration, clients)
	fails := make([]int, clients)
	var wg sync.WaitGroup
	cpu0, _ := cputime.Process()
	begin := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; i < n; i += clients {
				t0 := time.Now()
				ok := next(c, i/clients)
				lats[c] = append(lats[c], time.Since(t0))
				if !ok {
					fails[c]++
				}
			}
		}(c)
	}
	wg.Wait()
	res.elapsed = time.Since(begin)
	if cpu1, ok := cputime.Process(); ok && cpu0 > 0 {
		res.cpu = cpu1 - cpu0
	}
	for c := range lats {
		res.lat = append(res.lat, lats[c]...)
		res.failures += fails[c]
	}
	return res
}

func send(client *http.Client, url string, body []byte) bool {
	return sendParts(client, url, body)
}

// sendParts sends the concatenation of parts as the body, streamed from
// the slices the client already holds: the agents share their CPU with
// the server under test, so they do not copy a megabyte per request.
func sendParts(client *http.Client, url string, parts ...[]byte) bool {
	readers := make([]io.Reader, len(parts))
	n := 0
	for i, p := range parts {
		readers[i] = bytes.NewReader(p)
		n += len(p)
	}
	req, err := http.NewRequest(http.MethodPost, url, io.MultiReader(readers...))
	if err != nil {
		return false
	}
	req.ContentLength = int64(n)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// agent is one simulated agent run: its registry and its messages (a
// history of its own, from its own seed).
type agent struct {
	registry []byte
	msgs     [][]byte
	joined   []byte // "[m0,m1,..." without the closing bracket
	ends     []int  // ends[i]: length of joined holding messages 0..i
}

func newAgent(seed int64, messages int) *agent {
	o := gen.Default(messages)
	return agentOf(gen.Registry(seed, o), gen.Messages(seed, o))
}

// agentOf is an agent with the registry and messages given, its history
// joined once so each request sends a prefix of it.
func agentOf(registry []byte, msgs [][]byte) *agent {
	a := &agent{registry: registry, msgs: msgs}
	a.joined = append(a.joined, '[')
	for i, m := range a.msgs {
		if i > 0 {
			a.joined = append(a.joined, ',')
		}
		a.joined = append(a.joined, m...)
		a.ends = append(a.ends, len(a.joined))
	}
	return a
}

// fullParts is the body of /v1/decide for the first n messages, in parts
// that share the agent's bytes.
func (a *agent) fullParts(n int) [][]byte {
	head := append(append([]byte(`{"registry":`), a.registry...), `,"context":{"user":"load"},"history":`...)
	return [][]byte{head, a.joined[:a.ends[n-1]], []byte("]}")}
}

// fullBody is the body of /v1/decide for the first n messages.
func (a *agent) fullBody(n int) []byte {
	body := make([]byte, 0, a.ends[n-1]+len(a.registry)+64)
	body = append(body, `{"registry":`...)
	body = append(body, a.registry...)
	body = append(body, `,"context":{"user":"load"},"history":`...)
	body = append(body, a.joined[:a.ends[n-1]]...)
	return append(body, "]}"...)
}

func runLoad(t *testing.T, cfg loadConfig) {
	maxClients := slicesMax(cfg.clients)
	// Client k of a measurement with c clients sends about max(full,
	// inc)/c requests, each one message longer than the last: give each
	// agent the messages its busiest measurement needs.
	// The full-history measurements walk each agent's history forward,
	// one stretch per client count, so that no measurement resends what
	// an earlier one sent.
	base := make([][]int, len(cfg.clients)) // base[level][k]: history length before the level
	agents := make([]*agent, maxClients)
	for k := range agents {
		need, walked := 0, 0
		for level, c := range cfg.clients {
			base[level] = append(base[level], cfg.messages+walked)
			if k < c {
				walked += cfg.full/c + 2
				need = max(need, cfg.inc/c+2)
			}
		}
		need = max(need, walked)
		if cfg.seeds > 0 && k >= cfg.seeds {
			agents[k] = agents[k%cfg.seeds]
			continue
		}
		agents[k] = newAgent(int64(1000+k), cfg.messages+need)
	}
	engines := withEngineCache(2*maxClients + 8)

	// Full history: each request is the agent's history so far, one
	// message longer than its previous request. The server has seen the
	// conversation before (untimed): the agent's history decoded and
	// checked whole, then once extended (which builds the facts tracker
	// that later extensions reuse; about 1-2 ms at 1,000 messages, once per
	// conversation). Without that second warm-up request, at 100 clients a
	// quarter of the 400 timed requests would be first extensions.
	var results []result
	for _, variant := range []struct {
		name string
		opts []option
	}{
		{"full history (decoder+schema)", []option{withSchema()}},
		{"full history (decoder only)", nil},
	} {
		rs := start(t, append([]option{engines}, variant.opts...)...)
		rs.client.Transport.(*http.Transport).MaxIdleConnsPerHost = maxClients
		for level, c := range cfg.clients {
			for k := 0; k < c; k++ { // each agent's history so far, untimed
				require.True(t, send(rs.client, rs.url+"/v1/decide", agents[k].fullBody(base[level][k]-1)))
				require.True(t, send(rs.client, rs.url+"/v1/decide", agents[k].fullBody(base[level][k])))
			}
			r := drive(variant.name, c, cfg.full, func(k, i int) bool {
				return sendParts(rs.client, rs.url+"/v1/decide", agents[k].fullParts(base[level][k]+1+i)...)
			})
			results = append(results, r)
			t.Log(r)
		}
		// Each variant measured on its own: the last server's caches
		// would otherwise weigh on the collector during the next.
		rs.stop()
		runtime.GC()
	}

	// Cold: every request a history the server has never seen.
	for vi, variant := range []struct {
		name string
		opts []option
	}{
		{"full, never seen (decoder+schema)", []option{withSchema()}},
		{"full, never seen (decoder only)", nil},
	} {
		rs := start(t, append([]option{engines}, variant.opts...)...)
		rs.client.Transport.(*http.Transport).MaxIdleConnsPerHost = maxClients
		// One registry, so that only decoding and checking are measured.
		reg := agents[0].registry
		require.True(t, send(rs.client, rs.url+"/v1/decide", agents[0].fullBody(cfg.messages)))
		for level, c := range []int{1, 4} {
			cold := make([][]byte, cfg.cold)
			for j := range cold {
				a := newAgent(int64(5000+(2*vi+level)*cfg.cold+j), cfg.messages)
				a.registry = reg
				cold[j] = a.fullBody(cfg.messages)
			}
			r := drive(variant.name, c, cfg.cold, func(k, i int) bool {
				return send(rs.client, rs.url+"/v1/decide", cold[i*c+k])
			})
			results = append(results, r)
			t.Log(r)
		}
		rs.stop()
		runtime.GC()
	}

	// Incremental: each agent's run is primed with its first messages
	// (untimed), then each timed request appends one message.
	rs := start(t, engines, withRuns(4*maxClients, 0))
	rs.client.Transport.(*http.Transport).MaxIdleConnsPerHost = maxClients
	for _, c := range cfg.clients {
		per := cfg.inc/c + 1
		bodies := make([][][]byte, c)
		ids := make([]string, c)
		for k := 0; k < c; k++ {
			a := agents[k]
			ids[k] = "load-" + strconv.Itoa(c) + "-" + strconv.Itoa(k)
			first := mustJSON(t, toRaw(a.msgs[:cfg.messages]))
			prime := mustJSON(t, map[string]any{"offset": 0, "registry": json.RawMessage(a.registry), "messages": json.RawMessage(first)})
			require.True(t, send(rs.client, rs.url+"/v1/runs/"+ids[k]+"/decide", prime))
			generation := server.RunGeneration("", ids[k], mustJSON(t, json.RawMessage(a.registry)), first)
			for i := 0; i < per; i++ {
				off := cfg.messages + i
				msgs := mustJSON(t, toRaw(a.msgs[off:off+1]))
				bodies[k] = append(bodies[k], mustJSON(t, map[string]any{
					"offset": off, "messages": json.RawMessage(msgs), "context": json.RawMessage(`{"user": "load"}`), "generation": generation,
				}))
				generation = server.RunGeneration(generation, ids[k], nil, msgs)
			}
		}
		r := drive("incremental (1 new message)", c, cfg.inc, func(k, i int) bool {
			return send(rs.client, rs.url+"/v1/runs/"+ids[k]+"/decide", bodies[k][i])
		})
		results = append(results, r)
		t.Log(r)
	}

	if *loadOPA != "" {
		results = append(results, loadStockOPA(t, cfg, agents[0].fullBody(cfg.messages), agents[0].registry)...)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "load: %d-message histories (internal/testkit/gen, one seed per client, %d bytes for client 0), GOMAXPROCS=%d\n",
		cfg.messages, len(agents[0].fullBody(cfg.messages)), runtimeProcs())
	for _, r := range results {
		fmt.Fprintln(&out, r)
		require.Zero(t, r.failures, r.name)
	}
	if *loadFlag {
		fmt.Print(out.String())
	}
}

// loadStockOPA measures stock `opa run --server` evaluating the naive
// pure-Rego baseline (engine/testdata/baseline/naive.rego) on the same
// history and registry, sent raw as OPA input.
func loadStockOPA(t *testing.T, cfg loadConfig, fullBody, regDoc []byte) []result {
	var doc struct {
		History json.RawMessage `json:"history"`
	}
	require.NoError(t, json.Unmarshal(fullBody, &doc))
	history := doc.History
	policy := filepath.Join(conformance.ModuleRoot(), "engine", "testdata", "baseline", "naive.rego")
	if _, err := os.Stat(policy); err != nil {
		t.Logf("no baseline policy: %v", err)
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, *loadOPA, "run", "--server", "--addr", addr, "--log-level", "error", policy)
	require.NoError(t, cmd.Start())
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: slicesMax(cfg.clients)}}
	defer client.CloseIdleConnections()
	url := "http://" + addr + "/v1/data/policycheck/baseline/naive/decision"
	body := mustJSON(t, map[string]any{"input": map[string]json.RawMessage{"history": history, "registry": regDoc}})
	for i := 0; ; i++ {
		if send(client, url, body) {
			break
		}
		require.Less(t, i, 200, "opa did not come up")
		time.Sleep(50 * time.Millisecond)
	}
	var out []result
	for _, c := range cfg.clients {
		n := max(cfg.full/20, c)
		r := drive("stock opa run --server (naive.rego)", c, n, func(int, int) bool { return send(client, url, body) })
		r.cpu = 0 // the test process only sends: OPA's CPU is not ours to count
		out = append(out, r)
		t.Log(r)
	}
	return out
}

func toRaw(msgs [][]byte) []json.RawMessage {
	out := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		out[i] = m
	}
	return out
}

func slicesMax(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
