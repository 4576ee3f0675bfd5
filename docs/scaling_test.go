package docs_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/internal/ground/jsonout"
	"github.com/policycheck/policycheck/internal/testkit/servetest"
	"github.com/policycheck/policycheck/loader"
)

// The deployment of scaling.md, started for real: HAProxy (its block of
// the page, as written, the ports in its environment), three `policycheck
// serve` processes (the page's command line and OPA configuration, the
// bundle server's and collector's URLs put in), an OPA bundle server and
// a decision-log collector, all on loopback.

// bundleName is the bundle scaling.md's OPA configuration names.
const bundleName = "policycheck"

// bundleHost is an OPA bundle server whose bundle can be switched.
type bundleHost struct {
	*httptest.Server
	current atomic.Pointer[[]byte]
}

func newBundleHost(t *testing.T) *bundleHost {
	bh := &bundleHost{}
	bh.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := bh.current.Load()
		if r.URL.Path != "/bundles/"+bundleName+".tar.gz" || b == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(*b)
	}))
	t.Cleanup(bh.Close)
	return bh
}

// publish serves a bundle of revision rev holding modules (path → Rego),
// built by policycheck bundle build as the page builds it (its roots
// written by the command).
func (bh *bundleHost) publish(t *testing.T, rev string, modules map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for path, src := range modules {
		file := filepath.Join(dir, filepath.FromSlash(path))
		require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
		require.NoError(t, os.WriteFile(file, []byte(src), 0o600))
	}
	out := filepath.Join(t.TempDir(), bundleName+".tar.gz")
	var stdout, stderr bytes.Buffer
	code := cli.Run([]string{"bundle", "build", dir, "--revision", rev, "--output", out}, nil, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	bh.current.Store(&raw)
}

// logCollector is a decision-log service counting the events it receives
// by decision id.
type logCollector struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string]int // decision id → events received
}

func newLogCollector(t *testing.T) *logCollector {
	c := &logCollector{seen: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rd io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			defer zr.Close()
			rd = zr
		}
		var events []struct {
			DecisionID string `json:"decision_id"`
		}
		if err := json.NewDecoder(rd).Decode(&events); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, e := range events {
			c.seen[e.DecisionID]++
		}
		c.mu.Unlock()
	}))
	t.Cleanup(c.Close)
	return c
}

// holds reports whether every id has been received.
func (c *logCollector) holds(ids []string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if c.seen[id] == 0 {
			return false
		}
	}
	return true
}

// cluster is scaling.md's deployment.
type cluster struct {
	bin      string
	args     []string // serve's arguments, but --addr's port
	ports    [3]int   // the replicas'
	replicas [3]*servetest.Process
	proxy    string // HAProxy's frontend, http://127.0.0.1:port
	bundles  *bundleHost
	logs     *logCollector
	maxDelay time.Duration // the bundle's polling.max_delay_seconds
}

// replicaNames are the server names of scaling.md's HAProxy backends, in
// the order of PC_REPLICA1_PORT...
var replicaNames = [3]string{"r1", "r2", "r3"}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// haproxyBin returns HAProxy's path: without it the test is skipped
// outside CI and fails under CI=true (scripts/test.sh installs it).
func haproxyBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("haproxy")
	if err != nil {
		// Debian installs it in /usr/sbin, which a non-root PATH may lack.
		if _, serr := os.Stat("/usr/sbin/haproxy"); serr == nil {
			return "/usr/sbin/haproxy"
		}
		if os.Getenv("CI") == "true" {
			t.Fatal("haproxy is required under CI (docs/scaling.md's deployment runs on it)")
		}
		t.Skip("haproxy is not installed: docs/scaling.md's deployment is not run")
	}
	return p
}

// examplePolicies reads the Rego files (tests excluded) matching glob,
// keyed by their bundle path.
func examplePolicies(t *testing.T, into map[string]string, glob string) {
	t.Helper()
	files, err := filepath.Glob(glob)
	require.NoError(t, err)
	require.NotEmpty(t, files, glob)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.rego") {
			continue
		}
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		into["/"+filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f)] = string(raw)
	}
}

// startCluster starts scaling.md's deployment with the bundle r1 (the
// example policies) published. With replicas 1, the three backend lines
// name the same replica.
func startCluster(t *testing.T, replicas int, r1 map[string]string) *cluster {
	t.Helper()
	haproxy := haproxyBin(t)
	page, err := os.ReadFile("scaling.md")
	require.NoError(t, err)
	c := &cluster{bin: servetest.Build(t), bundles: newBundleHost(t), logs: newLogCollector(t)}
	c.bundles.publish(t, "r1", r1)

	// The OPA configuration, with the test's bundle server and collector.
	yamls := codeBlocks(t, "scaling.md", "yaml")
	require.Len(t, yamls, 2, "the replicas' configuration, then its signing block (TestScalingSignedBundle)")
	opa := yamls[0]
	for from, to := range map[string]string{"http://127.0.0.1:8282": c.bundles.URL, "http://127.0.0.1:8383": c.logs.URL} {
		require.Equal(t, 1, strings.Count(opa, from), "scaling.md's OPA configuration names %s once", from)
		opa = strings.Replace(opa, from, to, 1)
	}
	m := regexp.MustCompile(`max_delay_seconds: (\d+)`).FindStringSubmatch(opa)
	require.NotNil(t, m, "the bundle's polling bound")
	secs, _ := strconv.Atoi(m[1])
	c.maxDelay = time.Duration(secs) * time.Second
	dir := t.TempDir()
	opaPath := filepath.Join(dir, "opa.yaml")
	require.NoError(t, os.WriteFile(opaPath, []byte(opa), 0o600))

	// The command line, its port and configuration file put in.
	lines := regexp.MustCompile(`(?m)^policycheck serve .*$`).FindAllString(string(page), -1)
	require.Len(t, lines, 1, "scaling.md shows one serve command line")
	fields := strings.Fields(lines[0])
	for _, f := range fields[2:] {
		switch {
		case f == "127.0.0.1:$PORT", f == "--addr":
		case f == "opa.yaml":
			c.args = append(c.args, opaPath)
		default:
			c.args = append(c.args, f)
		}
	}
	require.Contains(t, lines[0], "--addr 127.0.0.1:$PORT")

	ports := freePorts(t, 4)
	for i := range c.ports {
		c.ports[i] = ports[1+min(i, replicas-1)]
		t.Setenv(fmt.Sprintf("PC_REPLICA%d_PORT", i+1), strconv.Itoa(c.ports[i]))
	}
	t.Setenv("PC_FRONTEND_PORT", strconv.Itoa(ports[0]))
	for i := range replicas {
		c.start(t, i)
	}

	c.proxy = startHAProxy(t, haproxy, dir, "haproxy", ports[0], func() string { return "" })
	return c
}

// startHAProxy runs scaling.md's block marked block as HAProxy's
// configuration (written in dir), stops it when the test ends, and
// returns its frontend's URL once its /health answers 200; more says
// what else to show when it does not.
func startHAProxy(t *testing.T, haproxy, dir, block string, port int, more func() string) string {
	t.Helper()
	blocks := codeBlocks(t, "scaling.md", block)
	require.Len(t, blocks, 1)
	cfg := filepath.Join(dir, "haproxy.cfg")
	require.NoError(t, os.WriteFile(cfg, []byte(blocks[0]), 0o600))
	cmd := exec.Command(haproxy, "-db", "-f", cfg)
	var said servetest.Log
	cmd.Stdout, cmd.Stderr = &said, &said
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	proxy := "http://127.0.0.1:" + strconv.Itoa(port)
	require.Eventually(t, func() bool {
		resp, err := http.Get(proxy + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "HAProxy does not answer /health: %s\n%s", &said, more())
	return proxy
}

// start starts replica i on its port and waits until it is ready (its
// first bundle activated).
func (c *cluster) start(t *testing.T, i int) {
	t.Helper()
	args := append([]string{"--addr", "127.0.0.1:" + strconv.Itoa(c.ports[i])}, c.args...)
	c.replicas[i] = servetest.StartIn(t, "..", c.bin, args...)
	require.Eventually(t, func() bool { return c.health(t, i).Status != "not_ready" }, 10*time.Second, 20*time.Millisecond,
		"replica %d never ready", i+1)
}

type replicaHealth struct {
	Status         string `json:"status"`
	PolicyRevision string `json:"policy_revision"`
	Bundles        map[string]struct {
		Serving string `json:"serving"`
	} `json:"bundles"`
}

// health is replica i's /health, asked directly.
func (c *cluster) health(t *testing.T, i int) replicaHealth {
	t.Helper()
	var h replicaHealth
	resp, err := http.Get(c.replicas[i].URL + "/health")
	if err != nil {
		return h
	}
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	return h
}

// answer is one decision answered through the proxy.
type answer struct {
	body     []byte
	replica  string // X-Replica
	id       string // Policycheck-Decision-Id
	rev      string // Policycheck-Policy-Revision
	resent   bool   // the run took the 409 path for it
	upto     int    // messages of the history decided on
	duration time.Duration
}

// post sends body to path through the proxy.
func (c *cluster) post(client *http.Client, path string, body any) (int, []byte, http.Header, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, nil, nil, err
	}
	resp, err := client.Post(c.proxy+path, "application/json", bytes.NewReader(raw))
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header, err
}

// scalingRun is one agent run driven as docs/sidecar.md's Python client
// (Run.decide) drives it: the new messages with the offset sent so far
// and the generation of the last answer, and on 409 the whole history
// with offset 0.
type scalingRun struct {
	id         string
	context    json.RawMessage
	raw        []json.RawMessage // the history, as sent
	history    facts.History     // the same, decoded for the reference
	ctxDoc     any
	sent       int
	generation string // the last answer's
	answers    []answer
	conflicts  []string // the replicas that answered 409 (X-Replica)
}

// decide sends the history up to upto.
func (r *scalingRun) decide(c *cluster, client *http.Client, upto int) error {
	start := time.Now()
	path := "/v1/runs/" + r.id + "/decide"
	body := map[string]any{"offset": r.sent, "messages": r.raw[r.sent:upto], "context": r.context}
	if r.sent > 0 && r.generation != "" {
		body["generation"] = r.generation
	}
	status, out, h, err := c.post(client, path, body)
	resent := false
	if err == nil && status == http.StatusConflict {
		resent = true
		r.conflicts = append(r.conflicts, h.Get("X-Replica"))
		body["offset"], body["messages"] = 0, r.raw[:upto]
		delete(body, "generation")
		status, out, h, err = c.post(client, path, body)
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", r.id, err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("run %s up to %d: status %d: %s", r.id, upto, status, out)
	}
	var g struct {
		Generation string `json:"generation"`
	}
	if err := json.Unmarshal(out, &g); err != nil {
		return fmt.Errorf("run %s up to %d: %w", r.id, upto, err)
	}
	r.sent, r.generation = upto, g.Generation
	r.answers = append(r.answers, answer{body: out, replica: h.Get("X-Replica"), id: h.Get("Policycheck-Decision-Id"),
		rev: h.Get("Policycheck-Policy-Revision"), resent: resent, upto: upto, duration: time.Since(start)})
	return nil
}

// newRuns makes n runs over the example histories of at least four
// messages, contexts in turn.
func newRuns(t *testing.T, n int) []*scalingRun {
	t.Helper()
	var histories []string
	for _, f := range []string{"after-compaction", "refund", "refund-after-lookup", "vault-rotate"} {
		histories = append(histories, filepath.Join("..", "examples", "histories", f+".json"))
	}
	contexts := []string{"admin", "support", "viewer"}
	var runs []*scalingRun
	for i := range n {
		raw, err := os.ReadFile(histories[i%len(histories)])
		require.NoError(t, err)
		r := &scalingRun{id: fmt.Sprintf("run-%02d", i)}
		require.NoError(t, json.Unmarshal(raw, &r.raw))
		r.history, err = loader.DecodeHistory(histories[i%len(histories)], raw, loader.DefaultLimits())
		require.NoError(t, err)
		require.Len(t, r.history, len(r.raw))
		r.context, err = os.ReadFile(filepath.Join("..", "examples", "context", contexts[i%len(contexts)]+".json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(r.context, &r.ctxDoc))
		runs = append(runs, r)
	}
	return runs
}

// phase has every run with messages left send up to step's end (two
// messages a step: a request and its response), concurrently.
func phase(t *testing.T, c *cluster, runs []*scalingRun, step int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(runs))
	for _, r := range runs {
		upto := min(2*step, len(r.raw))
		if upto <= r.sent {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.decide(c, http.DefaultClient, upto); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// referenceEngine compiles what a replica compiles from the bundle:
// the shipped policies and the bundle's modules, named as OPA's store
// names them (the bundle's name, then the path).
func referenceEngine(t *testing.T, reg *facts.Registry, modules map[string]string) *engine.Engine {
	t.Helper()
	var srcs []engine.Source
	for path, src := range modules {
		srcs = append(srcs, engine.Source{File: bundleName + path, Text: src})
	}
	sort.Slice(srcs, func(i, j int) bool { return srcs[i].File < srcs[j].File })
	eng, err := engine.New(context.Background(), engine.Registry(reg), engine.Modules(srcs...))
	require.NoError(t, err)
	return eng
}

// decisionMap decodes a decision's JSON, without the run's generation
// (the engine's Run has none: it is the sidecar's) and, when without says
// so, without the run's step and retries.
func decisionMap(t *testing.T, raw []byte, without bool) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), string(raw))
	delete(m, "generation")
	if without {
		delete(m, "step")
		delete(m, "retries")
	}
	return m
}

// TestScaling runs docs/scaling.md's deployment: concurrent runs through
// HAProxy; the replica holding most runs killed (SIGKILL) after their
// first step, once the collector holds their decisions, and restarted; a
// new bundle revision published meanwhile. Every decision is the one a
// single in-process engine makes on the same history with the same
// policy revision; every run finishes, those the killed replica held
// through the 409 path; every decision is logged exactly once; every
// replica serves the new revision within the polling bound.
func TestScaling(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three sidecars and HAProxy")
	}
	ctx := context.Background()
	r1 := map[string]string{}
	examplePolicies(t, r1, filepath.Join("..", "examples", "policies", "*", "*.rego"))
	r2 := map[string]string{}
	examplePolicies(t, r2, filepath.Join("..", "examples", "policies", "*", "*.rego"))
	examplePolicies(t, r2, filepath.Join("..", "examples", "candidate", "*.rego"))

	c := startCluster(t, 3, r1)
	reg, err := loader.ReadRegistry(filepath.Join("..", "examples", "registry.yaml"))
	require.NoError(t, err)
	engines := map[string]*engine.Engine{}
	for _, mods := range []map[string]string{r1, r2} {
		eng := referenceEngine(t, reg, mods)
		rev, _ := eng.Revision()
		engines[rev] = eng
	}
	require.Len(t, engines, 2, "the two revisions compile to two policy revisions")
	rev1, _ := referenceEngine(t, reg, r1).Revision()
	for i := range c.replicas {
		require.Equal(t, rev1, c.health(t, i).PolicyRevision, "replica %d compiles the bundle as the reference does", i+1)
	}

	runs := newRuns(t, 12)
	phase(t, c, runs, 1)

	// The replica holding most runs that have steps left, killed once
	// the collector holds every decision so far (OPA's decision-log
	// plugin loses what it has not uploaded: scaling.md says so).
	held := map[string][]*scalingRun{}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.answers[0].id)
		if r.sent < len(r.raw) {
			held[r.answers[0].replica] = append(held[r.answers[0].replica], r)
		}
	}
	victim := -1
	for i, name := range replicaNames {
		if victim < 0 || len(held[name]) > len(held[replicaNames[victim]]) {
			victim = i
		}
	}
	require.NotEmpty(t, held[replicaNames[victim]], "runs held by a replica: %v", held)
	require.Eventually(t, func() bool { return c.logs.holds(ids) }, 5*time.Second, 20*time.Millisecond,
		"the collector receives the first decisions")
	c.replicas[victim].Kill()
	killed := held[replicaNames[victim]]

	phase(t, c, runs, 2)
	for _, r := range killed {
		a := r.answers[len(r.answers)-1]
		require.True(t, a.resent, "run %s, held by the killed replica, took the 409 path", r.id)
		require.NotEqual(t, replicaNames[victim], a.replica)
	}

	// Back on its port; HAProxy's check finds it up.
	c.start(t, victim)
	require.Eventually(t, func() bool {
		for range 6 {
			resp, err := http.Get(c.proxy + "/health")
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.Header.Get("X-Replica") == replicaNames[victim] {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "HAProxy sends requests to the restarted replica")

	// The roll-out, under the runs' last steps.
	published := time.Now()
	c.bundles.publish(t, "r2", r2)
	phase(t, c, runs, 3)
	phase(t, c, runs, 4)
	rolled := map[int]time.Duration{}
	bound := c.maxDelay + 5*time.Second // the polling bound, plus the download and compilation on a loaded machine
	require.Eventually(t, func() bool {
		for i := range c.replicas {
			if _, ok := rolled[i]; !ok && c.health(t, i).Bundles[bundleName].Serving == "r2" {
				rolled[i] = time.Since(published)
			}
		}
		return len(rolled) == len(c.replicas)
	}, bound, 20*time.Millisecond, "every replica serves r2 within %v of its publication: %v", bound, rolled)
	t.Logf("r2 on each replica after %v (polling max_delay_seconds %v)", rolled, c.maxDelay)

	// Stateless decisions on the whole histories, round robin, all on r2.
	stateless := map[string]bool{}
	var statelessAnswers []answer
	for _, r := range runs {
		status, out, h, err := c.post(http.DefaultClient, "/v1/decide", map[string]any{"history": r.raw, "context": r.context})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, string(out))
		stateless[h.Get("X-Replica")] = true
		statelessAnswers = append(statelessAnswers, answer{body: out, id: h.Get("Policycheck-Decision-Id")})
		rev2, _ := referenceEngine(t, reg, r2).Revision()
		d, err := engines[rev2].Decide(ctx, engine.Request{History: r.history, Context: r.ctxDoc})
		require.NoError(t, err)
		var want bytes.Buffer
		require.NoError(t, jsonout.Encode(&want, d))
		require.Equal(t, decisionMap(t, want.Bytes(), false), decisionMap(t, out, false), "run %s, stateless", r.id)
	}
	require.Len(t, stateless, 3, "round robin reaches every replica")

	// Every run decision is the reference's: a single engine.Run fed the
	// same steps, rebound to the revision the replica decided with.
	// After a resend the replica's run restarts its step count and
	// retry accounting from that history (engine.Run counts the steps it
	// was given), so step and retries are compared only until then.
	resends, decisions := 0, 0
	ids = ids[:0]
	for _, r := range runs {
		ref := engines[rev1].NewRun()
		from, diverged := 0, false
		for _, a := range r.answers {
			decisions++
			ids = append(ids, a.id)
			if a.resent {
				resends++
				diverged = true
			}
			got := decisionMap(t, a.body, diverged)
			eng := engines[a.rev]
			require.NotNil(t, eng, "run %s: a revision of neither bundle: %q", r.id, a.rev)
			ref.Rebind(eng)
			sd, err := ref.Step(ctx, r.history[from:a.upto], r.ctxDoc)
			require.NoError(t, err)
			from = a.upto
			var want bytes.Buffer
			require.NoError(t, jsonout.Encode(&want, sd))
			require.Equal(t, decisionMap(t, want.Bytes(), diverged), got, "run %s up to %d", r.id, a.upto)
		}
		require.Equal(t, len(r.raw), r.sent, "run %s finished", r.id)
	}
	require.GreaterOrEqual(t, resends, len(killed))

	// Every decision in the collector exactly once.
	for _, a := range statelessAnswers {
		ids = append(ids, a.id)
	}
	require.Eventually(t, func() bool { return c.logs.holds(ids) }, 5*time.Second, 20*time.Millisecond,
		"the collector receives every decision")
	c.logs.mu.Lock()
	for _, id := range ids {
		require.Equal(t, 1, c.logs.seen[id], "decision %s logged once", id)
	}
	require.Len(t, c.logs.seen, len(ids), "no event but the decisions answered")
	c.logs.mu.Unlock()
	t.Logf("%d runs, %d run decisions, %d of them through the 409 path (%d runs on the killed replica %s), %d stateless",
		len(runs), decisions, resends, len(killed), replicaNames[victim], len(statelessAnswers))

	readmeClientSurvives(t, c, engines)
}

// Two conversations of three messages, and the step that follows
// either: in staleOld a search revealed search_docs, so the step's call
// executes; in staleNew the model asked the time, so the true history
// says not_available_yet (server/rungeneration_test.go uses the same).
const (
	staleOld = `[
 {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "What do the docs say about returns?"}]},
 {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "search_tools", "tool_call_id": "s1", "tool_kind": "tool-search", "args": {"queries": ["docs"]}}]},
 {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "search_tools", "tool_call_id": "s1", "tool_kind": "tool-search", "content": {"discovered_tools": [{"name": "search_docs"}]}}]}
]`
	staleNew = `[
 {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "What time is it? Then look up returns."}]},
 {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "get_time", "tool_call_id": "g1", "args": {}}]},
 {"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "get_time", "tool_call_id": "g1", "content": "09:00"}]}
]`
	staleStep = `{"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "search_docs", "tool_call_id": "c1", "args": {"query": "returns"}}]}`
)

// staleRun is a scalingRun of conv (a JSON array) and staleStep.
func staleRun(t *testing.T, id, conv string, ctxDoc json.RawMessage) *scalingRun {
	t.Helper()
	r := &scalingRun{id: id, context: ctxDoc}
	require.NoError(t, json.Unmarshal([]byte(conv), &r.raw))
	r.raw = append(r.raw, json.RawMessage(staleStep))
	return r
}

// routedTo waits until HAProxy sends run id's requests to replica want
// (or, with away, to any other), probing with a step no replica takes
// (an offset none holds: 409 wherever it lands, the run unchanged) and
// a short timeout: a probe sent to a stopped replica waits in its socket.
func (c *cluster) routedTo(t *testing.T, id, want string, away bool) {
	t.Helper()
	probe := &http.Client{Timeout: 300 * time.Millisecond}
	require.Eventually(t, func() bool {
		status, _, h, err := c.post(probe, "/v1/runs/"+id+"/decide", map[string]any{"offset": 999, "messages": []any{}})
		if err != nil || status != http.StatusConflict {
			return false
		}
		return (h.Get("X-Replica") == want) != away
	}, 15*time.Second, 50*time.Millisecond, "HAProxy routes run %s to %s (away: %v)", id, want, away)
}

// TestScalingStalledReplica: behind scaling.md's HAProxy, the replica
// holding run R is stopped (SIGSTOP) after R's first three messages; R's
// next step goes to another replica, which answers 409; the client
// deletes R there and starts it again at offset 0 with another
// conversation of the same length; the stopped replica resumes (SIGCONT)
// and R's requests return to it. It holds R at the length of the
// client's next step, with the old conversation: it must answer 409
// (other generation), not decide the step on a history that is not the
// client's, and after the client's resend the step is decided on the
// true history (search_docs not_available_yet, not execute).
func TestScalingStalledReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three sidecars and HAProxy")
	}
	r1 := map[string]string{}
	examplePolicies(t, r1, filepath.Join("..", "examples", "policies", "*", "*.rego"))
	c := startCluster(t, 3, r1)
	ctxDoc, err := os.ReadFile(filepath.Join("..", "examples", "context", "support.json"))
	require.NoError(t, err)
	const id = "stalled-run"

	// R's first three messages, on the replica its id hashes to.
	old := staleRun(t, id, staleOld, ctxDoc)
	require.NoError(t, old.decide(c, http.DefaultClient, 3))
	holder := slices.Index(replicaNames[:], old.answers[0].replica)
	require.GreaterOrEqual(t, holder, 0, "X-Replica %q", old.answers[0].replica)
	p := c.replicas[holder]

	require.NoError(t, syscall.Kill(p.PID, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(p.PID, syscall.SIGCONT) }) // before the process's own cleanup
	c.routedTo(t, id, replicaNames[holder], true)

	// The next step lands elsewhere: 409. The client deletes R there and
	// starts it again with another conversation.
	next := map[string]any{"offset": 3, "messages": []json.RawMessage{json.RawMessage(staleStep)}, "context": json.RawMessage(ctxDoc)}
	if old.generation != "" {
		next["generation"] = old.generation
	}
	status, out, h, err := c.post(http.DefaultClient, "/v1/runs/"+id+"/decide", next)
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, status, string(out))
	elsewhere := h.Get("X-Replica")
	require.NotEqual(t, replicaNames[holder], elsewhere)
	req, err := http.NewRequest(http.MethodDelete, c.proxy+"/v1/runs/"+id, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	cur := staleRun(t, id, staleNew, ctxDoc)
	require.NoError(t, cur.decide(c, http.DefaultClient, 3))
	require.Equal(t, elsewhere, cur.answers[0].replica)

	// The stopped replica resumes, and R's requests return to it.
	require.NoError(t, syscall.Kill(p.PID, syscall.SIGCONT))
	c.routedTo(t, id, replicaNames[holder], false)

	// The client's step at offset 3: the resumed replica holds R at that
	// length, with the old conversation.
	require.NoError(t, cur.decide(c, http.DefaultClient, 4))
	last := cur.answers[len(cur.answers)-1]
	require.Equal(t, replicaNames[holder], last.replica)
	var d struct {
		Calls []struct {
			Tool    string `json:"tool"`
			Verdict string `json:"verdict"`
		} `json:"calls"`
	}
	require.NoError(t, json.Unmarshal(last.body, &d))
	require.Len(t, d.Calls, 1)
	require.Equal(t, "search_docs", d.Calls[0].Tool)
	require.Equal(t, engine.NotAvailableYet, d.Calls[0].Verdict,
		"the resumed replica decided the step on the old conversation (the true history never searched)")
	require.True(t, last.resent, "the resumed replica answered 409 and the client resent the history")
	require.Equal(t, []string{replicaNames[holder]}, cur.conflicts, "the 409 came from the resumed replica")
}

// readmeClientSurvives runs docs/sidecar.md's Python client (once the
// README's; its Run class, as written) through HAProxy: one step of a run, the replica holding it
// killed, the whole history next; the client's 409 path resends it and
// gets the reference's decision.
func readmeClientSurvives(t *testing.T, c *cluster, engines map[string]*engine.Engine) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is required under CI (docs/sidecar.md's Python client runs on it)")
		}
		t.Log("python3 is not installed: docs/sidecar.md's Python client is not run through HAProxy")
		return
	}
	var client string
	for _, b := range codeBlocks(t, "sidecar.md", "python") {
		if strings.Contains(b, "class Run:") {
			client = b
		}
	}
	require.NotEmpty(t, client, "docs/sidecar.md lost its Python run client")
	defs, _, ok := strings.Cut(client, "\nrun = Run(")
	require.True(t, ok, "docs/sidecar.md's client ends with an example run")
	require.Contains(t, defs, `SIDECAR = "http://127.0.0.1:8181"`)
	page, err := os.ReadFile("scaling.md")
	require.NoError(t, err)
	for _, line := range []string{"if e.code != 409:", "body.update(offset=0, messages=history)"} {
		require.Contains(t, defs, line)
		require.Contains(t, string(page), line, "scaling.md quotes the sidecar.md client's 409 path")
	}
	driver := strings.Replace(defs, "http://127.0.0.1:8181", c.proxy, 1) + `
import sys
run = Run(sys.argv[1], {"user": "ana", "group": "support"})
history = json.load(open("examples/histories/refund.json"))
run.decide(history[:2])
print("first step", flush=True)
sys.stdin.readline()  # the test kills the run's replica meanwhile
print(json.dumps(run.decide(history)), flush=True)
`
	script := filepath.Join(t.TempDir(), "client.py")
	require.NoError(t, os.WriteFile(script, []byte(driver), 0o600))

	// The replica the run's id hashes to.
	const id = "readme-client"
	status, out, h, err := c.post(http.DefaultClient, "/v1/runs/"+id+"/decide", map[string]any{"offset": 0, "messages": []any{}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, string(out))
	holder := slices.Index(replicaNames[:], h.Get("X-Replica"))
	require.GreaterOrEqual(t, holder, 0, "X-Replica %q", h.Get("X-Replica"))

	cmd := exec.Command(py, script, id)
	cmd.Dir = ".."
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "the client's first step: %s", &stderr)
	require.Equal(t, "first step", lines.Text())
	c.replicas[holder].Kill()
	_, err = io.WriteString(stdin, "go on\n")
	require.NoError(t, err)
	require.True(t, lines.Scan(), "the client's second step: %s", &stderr)
	got := decisionMap(t, lines.Bytes(), true)
	require.NoError(t, cmd.Wait(), stderr.String())

	raw, err := os.ReadFile(filepath.Join("..", "examples", "histories", "refund.json"))
	require.NoError(t, err)
	hist, err := loader.DecodeHistory("refund.json", raw, loader.DefaultLimits())
	require.NoError(t, err)
	var want *engine.Decision
	for _, eng := range engines {
		d, err := eng.Decide(context.Background(), engine.Request{History: hist, Context: map[string]any{"user": "ana", "group": "support"}})
		require.NoError(t, err)
		if d.Fingerprint == got["fingerprint"] {
			want = d
		}
	}
	require.NotNil(t, want, "the sidecar.md client's decision after the resend is a reference decision: %v", got)
	var buf bytes.Buffer
	require.NoError(t, jsonout.Encode(&buf, want))
	require.Equal(t, decisionMap(t, buf.Bytes(), true), got)
}

var scalingBench = flag.Bool("scaling-bench", false, "TestScalingBench: measure 1 and 3 replicas behind HAProxy, and a replica's loss")

// TestScalingBench measures scaling.md's deployment (with
// -args -scaling-bench): the throughput of stateless decisions and of
// incremental runs through HAProxy with one replica and with three, and
// what the loss of a replica under load costs: the requests that took
// the 409 path, those that failed, and their latency against the others'.
// BENCHMARKS.md ("Replicas behind HAProxy") reports its figures.
func TestScalingBench(t *testing.T) {
	if !*scalingBench {
		t.Skip("a measurement: run with -args -scaling-bench")
	}
	r1 := map[string]string{}
	examplePolicies(t, r1, filepath.Join("..", "examples", "policies", "*", "*.rego"))
	const workers = 8
	const window = 3 * time.Second
	for _, n := range []int{1, 3} {
		c := startCluster(t, n, r1)
		raw, err := os.ReadFile(filepath.Join("..", "examples", "histories", "after-compaction.json"))
		require.NoError(t, err)
		ctxDoc, err := os.ReadFile(filepath.Join("..", "examples", "context", "support.json"))
		require.NoError(t, err)
		body := []byte(`{"history": ` + string(raw) + `, "context": ` + string(ctxDoc) + `}`)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}

		// Stateless: each worker posts the 8-message history in a loop,
		// through the proxy (and, with one replica, to it directly).
		targets := []string{c.proxy}
		if n == 1 {
			targets = append(targets, c.replicas[0].URL)
		}
		for _, target := range targets {
			var done, failed atomic.Int64
			deadline := time.Now().Add(window)
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(deadline) {
						resp, err := client.Post(target+"/v1/decide", "application/json", bytes.NewReader(body))
						if err != nil {
							failed.Add(1)
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							failed.Add(1)
							continue
						}
						done.Add(1)
					}
				}()
			}
			wg.Wait()
			require.Zero(t, failed.Load())
			via := "through HAProxy"
			if target != c.proxy {
				via = "directly"
			}
			t.Logf("replicas=%d stateless /v1/decide (8 messages) %s: %.0f decisions/s", n, via, float64(done.Load())/window.Seconds())
		}

		// Runs: each worker runs histories step by step.
		lat := runLoad(t, c, client, workers, window, -1)
		t.Logf("replicas=%d runs (2 messages a step): %.0f steps/s, step latency %s", n, float64(len(lat.all))/window.Seconds(), lat.summary(lat.all))
		if n == 3 {
			lat := runLoad(t, c, client, workers, window, window/3)
			t.Logf("replicas=3, one killed (SIGKILL) a third into %v and restarted %v later: %d steps, %d failed, %d through the 409 path (latency %s) against %s for the others",
				window, window/3, len(lat.all)+len(lat.resent), lat.failed, len(lat.resent), lat.summary(lat.resent), lat.summary(lat.all))
		}
	}
}

// loadResult is what runLoad measured.
type loadResult struct {
	all    []time.Duration // steps answered directly
	resent []time.Duration // steps that took the 409 path (both requests)
	failed int
}

func (l loadResult) summary(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("p50 %v p99 %v max %v", s[len(s)/2].Round(10*time.Microsecond), s[len(s)*99/100].Round(10*time.Microsecond), s[len(s)-1].Round(10*time.Microsecond))
}

// runLoad has workers run the example histories as runs (new ids, two
// messages a step) through the proxy for window; with kill >= 0, the
// first replica is killed kill into it and restarted kill later.
func runLoad(t *testing.T, c *cluster, client *http.Client, workers int, window, kill time.Duration) loadResult {
	t.Helper()
	var mu sync.Mutex
	var res loadResult
	var next atomic.Int64
	templates := newRuns(t, 4)
	deadline := time.Now().Add(window)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				r := *templates[w%len(templates)] // its history shared, read only
				r.id = fmt.Sprintf("load-%d", next.Add(1))
				for upto := 2; upto <= len(r.raw) && time.Now().Before(deadline); upto += 2 {
					if err := r.decide(c, client, upto); err != nil {
						mu.Lock()
						res.failed++
						mu.Unlock()
						break
					}
					a := r.answers[len(r.answers)-1]
					mu.Lock()
					if a.resent {
						res.resent = append(res.resent, a.duration)
					} else {
						res.all = append(res.all, a.duration)
					}
					mu.Unlock()
				}
			}
		}()
	}
	if kill >= 0 {
		time.Sleep(kill)
		c.replicas[0].Kill()
		time.Sleep(kill)
		c.start(t, 0)
	}
	wg.Wait()
	return res
}
