package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/internal/testkit/gatewaytest"
	"github.com/policycheck/policycheck/internal/testkit/redistest"
	"github.com/policycheck/policycheck/internal/testkit/servetest"
	"github.com/policycheck/policycheck/loader"
)

// scaling.md's gateway section, started for real: redis-server, three
// `policycheck gateway` processes (the page's command line), HAProxy (the
// page's block), and Go SDK clients.

// gwUpstream is the MCP server behind every gateway: the same in each
// replica's process and in the reference.
func gwUpstream() *mcp.Server {
	obj := `{"type":"object"}`
	return gatewaytest.NewUpstream(nil,
		&mcp.Tool{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		&mcp.Tool{Name: "write_file", InputSchema: json.RawMessage(obj)},
		&mcp.Tool{Name: "issue_refund", InputSchema: json.RawMessage(obj)},
		&mcp.Tool{Name: "deploy", InputSchema: json.RawMessage(obj)})
}

// TestGatewayUpstreamHelper is the upstream the gateways run: this test
// binary again, serving gwUpstream on stdio.
func TestGatewayUpstreamHelper(t *testing.T) {
	if os.Getenv("PC_GATEWAY_UPSTREAM") != "1" {
		t.Skip("the upstream of TestScalingGateway's gateways, run by them")
	}
	_ = gwUpstream().Run(context.Background(), &mcp.StdioTransport{})
	os.Exit(0)
}

// gwCall is one call of a scripted session.
type gwCall struct {
	name string
	args map[string]any
}

// gwScript is a session's i-th call.
func gwScript(i int) gwCall {
	switch i % 7 {
	case 0:
		return gwCall{"search_tools", map[string]any{"queries": []any{"write"}}}
	case 1:
		return gwCall{"files/write_file", map[string]any{"n": float64(i)}}
	case 2:
		return gwCall{"read_file", map[string]any{"path": fmt.Sprintf("/f%d", i)}}
	case 3:
		return gwCall{"read_file", map[string]any{}}
	case 4:
		return gwCall{"load_capability", map[string]any{"id": "refunds"}}
	case 5:
		return gwCall{"issue_refund", map[string]any{"n": float64(i)}}
	}
	return gwCall{"deploy", map[string]any{"n": float64(i)}}
}

// gwProc is one gateway process.
type gwProc struct {
	name string
	port int
	line string // the page's command line, filled in but $PORT
	cmd  *exec.Cmd
	log  *servetest.Log
}

func (p *gwProc) url() string { return "http://127.0.0.1:" + strconv.Itoa(p.port) }

// start runs the command line and waits until the gateway serves.
func (p *gwProc) start(t *testing.T, path string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "exec "+strings.ReplaceAll(p.line, "$PORT", strconv.Itoa(p.port)))
	cmd.Env = append(os.Environ(), "PATH="+path)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p.cmd, p.log = cmd, &servetest.Log{}
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		said := false
		for sc.Scan() {
			_, _ = p.log.Write([]byte(sc.Text() + "\n"))
			if !said && strings.Contains(sc.Text(), "serving MCP at") {
				said = true
				close(serving)
			}
		}
	}()
	select {
	case <-serving:
	case <-time.After(60 * time.Second):
		t.Fatalf("gateway %s did not serve: %s", p.name, p.log)
	}
}

// signal sends sig; SIGKILL also waits for the process.
func (p *gwProc) signal(sig syscall.Signal) {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL {
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

// gwClient is a Go SDK client on 2026-07-28 (stateless requests) of the
// gateway at url.
func gwClient(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	// The SDK falls back to a 2025-11-25 session when its server/discover
	// fails (a replica killed while the request was on its way): such a
	// session lives in one replica, and round robin sends its next request
	// elsewhere. A client connects again then, as docs/scaling.md says.
	var err error
	for range 5 {
		tr := &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: gatewaytest.Bearer{Token: token}}, MaxRetries: -1}
		var cs *mcp.ClientSession
		cs, err = mcp.NewClient(&mcp.Implementation{Name: "scaling-test"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err == nil && cs.InitializeResult().ProtocolVersion == "2026-07-28" {
			t.Cleanup(func() { _ = cs.Close() })
			return cs
		}
		if err == nil {
			_ = cs.Close()
			err = fmt.Errorf("connected on %s, not 2026-07-28", cs.InitializeResult().ProtocolVersion)
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err)
	return nil
}

// gwLogged is a decision-log line.
type gwLogged struct {
	Principal string          `json:"principal"`
	Call      string          `json:"tool_call_id"`
	Tool      string          `json:"tool"`
	Verdict   string          `json:"verdict"`
	Decision  json.RawMessage `json:"decision"`
	replica   string
}

// readDecisionLogs reads the replicas' decision logs, by principal then
// tool_call_id; a call logged twice fails the test.
func readDecisionLogs(t *testing.T, files map[string]string) map[string]map[string]gwLogged {
	t.Helper()
	out := map[string]map[string]gwLogged{}
	for replica, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var l gwLogged
			require.NoError(t, json.Unmarshal(line, &l))
			l.replica = replica
			if out[l.Principal] == nil {
				out[l.Principal] = map[string]gwLogged{}
			}
			if prev, dup := out[l.Principal][l.Call]; dup {
				t.Fatalf("%s's %s decided twice, by %s and %s", l.Principal, l.Call, prev.replica, replica)
			}
			out[l.Principal][l.Call] = l
		}
	}
	return out
}

// gwCluster is scaling.md's gateway deployment.
type gwCluster struct {
	rds        *redistest.Server
	procs      []*gwProc
	proxy      string
	tokens     map[string]string
	principals []string
	logs       map[string]string // replica → its decision log
	path       string
}

// startGatewayCluster starts scaling.md's gateway section: Redis with
// AOF, the gateways (replicas of them; with 1, HAProxy's three server
// lines name the same one) and HAProxy.
func startGatewayCluster(t *testing.T, replicas int) *gwCluster {
	t.Helper()
	haproxy := haproxyBin(t)
	rds := redistest.Start(t, true)
	bin := servetest.Build(t)
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()

	// The registry, the tokens (a principal per scripted session, and an
	// operator), the command line.
	regPath := filepath.Join(dir, "tools.yaml")
	require.NoError(t, os.WriteFile(regPath, []byte(gatewaytest.Registry), 0o600))
	principals := []string{"p1", "p2", "p3", "p4", "p5"}
	tokens := map[string]string{}
	var entries []map[string]any
	for _, p := range principals {
		tokens[p] = p + "-token-0123456789abcdef"
		entries = append(entries, map[string]any{"token": tokens[p], "principal": p})
	}
	entries = append(entries, map[string]any{"token": "operator-token-0123456789", "principal": "ops", "operator": true})
	rawTokens, err := json.Marshal(map[string]any{"tokens": entries})
	require.NoError(t, err)
	tokenPath := filepath.Join(dir, "tokens.json")
	require.NoError(t, os.WriteFile(tokenPath, rawTokens, 0o600))

	page, err := os.ReadFile("scaling.md")
	require.NoError(t, err)
	lines := regexp.MustCompile(`(?m)^policycheck gateway .*$`).FindAllString(string(page), -1)
	require.Len(t, lines, 1, "scaling.md shows one gateway command line")
	upstream := fmt.Sprintf("'env PC_GATEWAY_UPSTREAM=1 %s -test.run=^TestGatewayUpstreamHelper$'", self)
	ports := freePorts(t, 4)
	procs := make([]*gwProc, replicas)
	logs := map[string]string{}
	for i := range procs {
		name := fmt.Sprintf("g%d", i+1)
		logs[name] = filepath.Join(dir, name+".jsonl")
		line := lines[0]
		for from, to := range map[string]string{
			"--registry tools.yaml":          "--registry " + regPath,
			"files=$UPSTREAM":                "files=" + upstream,
			"--token-file tokens.json":       "--token-file " + tokenPath,
			"redis://127.0.0.1:6379/0":       rds.URL,
			"--decision-log decisions.jsonl": "--decision-log " + logs[name],
			"policycheck gateway --addr":     bin + " gateway --addr",
		} {
			require.Equal(t, 1, strings.Count(line, from), "the command line names %s once", from)
			line = strings.Replace(line, from, to, 1)
		}
		procs[i] = &gwProc{name: name, port: ports[1+i], line: line}
	}
	for i := range 3 {
		t.Setenv(fmt.Sprintf("PC_REPLICA%d_PORT", i+1), strconv.Itoa(ports[1+min(i, replicas-1)]))
	}
	t.Setenv("PC_FRONTEND_PORT", strconv.Itoa(ports[0]))
	path := os.Getenv("PATH")
	for _, p := range procs {
		p.start(t, path)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.signal(syscall.SIGCONT)
			p.signal(syscall.SIGKILL)
		}
	})

	proxy := startHAProxy(t, haproxy, dir, "haproxy gateway", ports[0], func() string { return "g1: " + procs[0].log.String() })

	return &gwCluster{rds: rds, procs: procs, proxy: proxy, tokens: tokens, principals: principals, logs: logs, path: path}
}

// TestScalingGateway runs scaling.md's gateway section: see "What the
// gateway test checks" there.
func TestScalingGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis, three gateways and HAProxy")
	}
	c := startGatewayCluster(t, 3)
	rds, procs, proxy, tokens, principals, logs, path := c.rds, c.procs, c.proxy, c.tokens, c.principals, c.logs, c.path
	// Four sessions through HAProxy, concurrently: steps 0-7, then g2
	// killed, steps 8-11, g2 restarted, steps 12-15.
	calls := map[string][]gwCall{}
	var mu sync.Mutex
	phase := func(from, to int) {
		var wg sync.WaitGroup
		for _, p := range principals[:4] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs := gwClient(t, proxy, tokens[p])
				for i := from; i < to; i++ {
					c := gwScript(i)
					if _, _, err := gatewaytest.Call(cs, c.name, c.args); err != nil {
						t.Errorf("%s step %d: %v", p, i, err)
						return
					}
					mu.Lock()
					calls[p] = append(calls[p], c)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	phase(0, 8)
	procs[1].signal(syscall.SIGKILL)
	phase(8, 12)
	procs[1].start(t, path)
	phase(12, 16)

	// p5: the search on g1, the revealed tool on g3 (directly); g3
	// stopped while g1 serves the session, then resumed: its next calls
	// are decided on the store's state.
	direct := func(p *gwProc, i int) (string, bool) {
		cs := gwClient(t, p.url(), tokens["p5"])
		c := gwScript(i)
		text, isErr, err := gatewaytest.Call(cs, c.name, c.args)
		require.NoError(t, err)
		calls["p5"] = append(calls["p5"], c)
		return text, isErr
	}
	direct(procs[0], 0)
	if text, isErr := direct(procs[2], 1); isErr {
		t.Fatalf("the tool a search on g1 revealed, called on g3: %s", text)
	}
	direct(procs[2], 2)
	procs[2].signal(syscall.SIGSTOP)
	for i := 3; i < 8; i++ {
		direct(procs[0], i)
	}
	procs[2].signal(syscall.SIGCONT)
	for i := 8; i < 10; i++ {
		direct(procs[2], i)
	}

	// Every decision is a single gateway's on the same calls.
	got := readDecisionLogs(t, logs)
	want := referenceDecisions(t, calls)
	crossed := 0
	for _, p := range principals {
		require.Len(t, got[p], len(calls[p]), "%s: every call decided once", p)
		for id, w := range want[p] {
			g, ok := got[p][id]
			require.True(t, ok, "%s %s not decided", p, id)
			require.JSONEq(t, string(w), string(g.Decision), "%s %s (%s on %s)", p, id, g.Tool, g.replica)
		}
		// The search then the revealed tool, each time the script runs it.
		for i := 0; i+1 < len(calls[p]); i += 7 {
			s, w := got[p][fmt.Sprintf("gw_%d", i+1)], got[p][fmt.Sprintf("gw_%d", i+2)]
			require.Equal(t, "execute", w.Verdict, "%s: the revealed tool", p)
			if s.replica != w.replica {
				crossed++
			}
		}
	}
	require.Positive(t, crossed, "no search and revealed call landed on two replicas")
	t.Logf("%d searches were followed by the revealed tool's call on another replica", crossed)

	// Redis restarted with AOF: the session is kept.
	cs := gwClient(t, proxy, tokens["p1"])
	rds.Restart(t)
	text, isErr := untilStoreAnswers(t, cs, gwCall{"files/write_file", map[string]any{"after": "aof"}})
	require.False(t, isErr, "after a restart with AOF the revealed tool: %s", text)

	// Without persistence: lost, closed, never widened.
	rds.SetAOF(false)
	rds.Restart(t)
	for range 3 {
		text, isErr = untilStoreAnswers(t, cs, gwCall{"files/write_file", map[string]any{"after": "loss"}})
		require.True(t, isErr, "after a restart without persistence the revealed tool ran: %s", text)
		require.True(t, strings.Contains(text, "no longer in the gateway's session store") || strings.Contains(text, "not available"),
			"after a restart without persistence: %s", text)
	}
	if res, err := cs.ListTools(context.Background(), nil); err == nil {
		for _, tl := range res.Tools {
			require.NotEqual(t, "files/write_file", tl.Name, "a lost session lists the revealed tool")
		}
	}
}

// TestScalingGatewayStickySessions: a 2025-11-25 client that sends no
// session handle holds an MCP session (Mcp-Session-Id) in the replica
// that created it; scaling.md's HAProxy block sends each request naming
// one back there (a stick table filled from the replicas' answers), so
// the session's searches and revealed tools run as on one gateway, and
// every call of it is decided by one replica. Round robin alone sends
// the second request elsewhere, which knows no such MCP session.
func TestScalingGatewayStickySessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis, three gateways and HAProxy")
	}
	c := startGatewayCluster(t, 3)
	tr := &mcp.StreamableClientTransport{Endpoint: c.proxy + "/mcp",
		HTTPClient: &http.Client{Transport: gatewaytest.Bearer{Token: c.tokens["p1"]}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "scaling-test"}, nil).Connect(context.Background(), tr,
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	require.Equal(t, "2025-11-25", cs.InitializeResult().ProtocolVersion)
	for i := range 14 { // the script twice: a third load of the loaded capability would pass its retries
		call := gwScript(i)
		text, isErr, err := gatewaytest.Call(cs, call.name, call.args)
		require.NoError(t, err, "step %d (%s)", i, call.name)
		if i%7 == 1 || i%7 == 5 {
			require.False(t, isErr, "step %d: %s after its reveal or load: %s", i, call.name, text)
		}
	}
	replicas := map[string]int{}
	for _, l := range readDecisionLogs(t, c.logs)["p1"] {
		replicas[l.replica]++
	}
	require.Len(t, replicas, 1, "the session's calls were decided by %v", replicas)
}

// untilStoreAnswers makes call c until the answer is not that the
// session store cannot be reached (Redis restarting).
func untilStoreAnswers(t *testing.T, cs *mcp.ClientSession, c gwCall) (string, bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		text, isErr, err := gatewaytest.Call(cs, c.name, c.args)
		require.NoError(t, err)
		if !strings.Contains(text, "cannot be reached") || time.Now().After(deadline) {
			return text, isErr
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// referenceDecisions makes each principal's calls to one in-process
// gateway (the same registry and upstream, the memory store) and returns
// its decisions, by principal then tool_call_id.
func referenceDecisions(t *testing.T, calls map[string][]gwCall) map[string]map[string]json.RawMessage {
	t.Helper()
	ctx := context.Background()
	reg, err := loader.ParseRegistry("tools.yaml", []byte(gatewaytest.Registry))
	require.NoError(t, err)
	up := gwUpstream()
	var log bytes.Buffer
	g, err := gateway.New(ctx, gateway.Config{Registry: reg, DecisionLog: &log, Upstreams: []gateway.Upstream{{Name: "files", Transport: func() (mcp.Transport, error) {
		c, s := mcp.NewInMemoryTransports()
		_, err := up.Connect(ctx, s, nil)
		return c, err
	}}}})
	require.NoError(t, err)
	defer g.Close()
	for p, cs := range calls {
		ct, st := mcp.NewInMemoryTransports()
		_, err := g.Connect(ctx, st, gateway.Principal{Name: p})
		require.NoError(t, err)
		client, err := mcp.NewClient(&mcp.Implementation{Name: "reference"}, nil).Connect(ctx, ct, nil)
		require.NoError(t, err)
		for _, c := range cs {
			_, _, err := gatewaytest.Call(client, c.name, c.args)
			require.NoError(t, err)
		}
		_ = client.Close()
	}
	out := map[string]map[string]json.RawMessage{}
	for _, line := range bytes.Split(bytes.TrimSpace(log.Bytes()), []byte("\n")) {
		var l gwLogged
		require.NoError(t, json.Unmarshal(line, &l))
		if out[l.Principal] == nil {
			out[l.Principal] = map[string]json.RawMessage{}
		}
		out[l.Principal][l.Call] = l.Decision
	}
	return out
}

var gatewayBench = flag.Bool("gateway-bench", false, "TestScalingGatewayBench: calls per second and latency through HAProxy with one gateway and with three")

// TestScalingGatewayBench measures scaling.md's gateway deployment (real
// processes: Redis, the gateways, HAProxy): five clients at once, each a
// session of read_file calls through HAProxy, with one gateway and with
// three: calls per second and the per-call p50 and p99. BENCHMARKS.md
// ("Gateway replicas") reports its figures.
func TestScalingGatewayBench(t *testing.T) {
	if !*gatewayBench {
		t.Skip("a measurement: run with -args -gateway-bench")
	}
	const calls = 300
	for _, n := range []int{1, 3} {
		c := startGatewayCluster(t, n)
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		start := time.Now()
		for _, p := range c.principals {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs := gwClient(t, c.proxy, c.tokens[p])
				for i := range calls {
					t0 := time.Now()
					_, isErr, err := gatewaytest.Call(cs, "read_file", map[string]any{"path": fmt.Sprintf("/f%d", i)})
					d := time.Since(t0)
					if err != nil || isErr {
						t.Errorf("%s call %d: %v %v", p, i, err, isErr)
						return
					}
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		slices.Sort(lat)
		t.Logf("gateways=%d: %d sessions of %d calls at once through HAProxy: %.0f calls/s, per call p50 %v p99 %v",
			n, len(c.principals), calls, float64(len(lat))/took.Seconds(), lat[len(lat)/2].Round(10*time.Microsecond), lat[len(lat)*99/100].Round(10*time.Microsecond))
	}
}
