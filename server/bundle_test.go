package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/stretchr/testify/require"

	bundleplugin "github.com/open-policy-agent/opa/v1/plugins/bundle"
	"github.com/open-policy-agent/opa/v1/plugins/discovery"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/server"
)

// bundleServer is a real OPA bundle server on a loopback port whose
// bundle can be switched.
type bundleServer struct {
	*httptest.Server
	current atomic.Pointer[[]byte]
	others  sync.Map // path → *[]byte: more bundles (discovery, a second bundle)
	served  atomic.Int64
}

func newBundleServer(t *testing.T) *bundleServer {
	bs := &bundleServer{}
	bs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := bs.current.Load()
		if r.URL.Path != "/bundles/pc.tar.gz" {
			b = nil
			if v, ok := bs.others.Load(r.URL.Path); ok {
				b = v.(*[]byte)
			}
		}
		if b == nil {
			http.NotFound(w, r)
			return
		}
		bs.served.Add(1)
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(*b)
	}))
	t.Cleanup(bs.Close)
	return bs
}

// publish builds a bundle with OPA's bundle writer and serves it.
func (bs *bundleServer) publish(t *testing.T, rev string, modules map[string]string, data ...map[string]any) {
	t.Helper()
	bs.publishRoots(t, rev, nil, modules, data...)
}

// publishRoots is publish with the manifest's roots.
func (bs *bundleServer) publishRoots(t *testing.T, rev string, roots []string, modules map[string]string, data ...map[string]any) {
	t.Helper()
	raw := buildBundle(t, rev, roots, modules, data...)
	bs.current.Store(&raw)
}

// publishAt serves raw at path.
func (bs *bundleServer) publishAt(path string, raw []byte) { bs.others.Store(path, &raw) }

// buildBundle writes a bundle with OPA's bundle writer.
func buildBundle(t *testing.T, rev string, roots []string, modules map[string]string, data ...map[string]any) []byte {
	t.Helper()
	b := bundle.Bundle{Manifest: bundle.Manifest{Revision: rev}, Data: map[string]any{}}
	if roots != nil {
		b.Manifest.Roots = &roots
	}
	if len(data) > 0 {
		b.Data = data[0]
	}
	for path, src := range modules {
		b.Modules = append(b.Modules, bundle.ModuleFile{URL: path, Path: path, Raw: []byte(src)})
	}
	var buf bytes.Buffer
	require.NoError(t, bundle.NewWriter(&buf).Write(b))
	return buf.Bytes()
}

// collector is a decision-log service that keeps what it receives.
type collector struct {
	*httptest.Server
	mu     sync.Mutex
	events []map[string]any
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rd = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			defer zr.Close()
			var events []map[string]any
			if err := json.NewDecoder(zr).Decode(&events); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			c.mu.Lock()
			c.events = append(c.events, events...)
			c.mu.Unlock()
			return
		}
		var events []map[string]any
		if err := json.NewDecoder(rd).Decode(&events); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		c.mu.Lock()
		c.events = append(c.events, events...)
		c.mu.Unlock()
	}))
	t.Cleanup(c.Close)
	return c
}

func filterKeeping(names ...string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = `"` + n + `"`
	}
	return "package policycheck.capabilities.vault\n\nprepare_tools contains t.name if {\n\tsome t in input.tools\n\tt.name in {" +
		strings.Join(append(q, `"get_time"`), ", ") + "}\n}\n"
}

func opaConfig(bundles, logs string) []byte {
	return []byte(`
services:
  bundles:
    url: ` + bundles + `
  logs:
    url: ` + logs + `
bundles:
  pc:
    service: bundles
    resource: /bundles/pc.tar.gz
    trigger: manual
decision_logs:
  service: logs
  reporting:
    trigger: manual
`)
}

// discoveryConfig is an OPA configuration whose bundles come from the
// discovery bundle at /discovery.tar.gz (downloaded on Trigger), with a
// persistence directory when dir is set.
func discoveryConfig(url, dir string) []byte {
	cfg := `
services:
  bundles:
    url: ` + url + `
discovery:
  service: bundles
  resource: /discovery.tar.gz
  trigger: manual
`
	if dir != "" {
		cfg = "persistence_directory: " + dir + "\n" + cfg
	}
	return []byte(cfg)
}

func health(t *testing.T, rs *running) (int, server.Health) {
	t.Helper()
	status, body := rs.do(t, http.MethodGet, "/health", nil)
	var h server.Health
	require.NoError(t, json.Unmarshal(body, &h), string(body))
	return status, h
}

func decide(t testing.TB, rs *running, ctxDoc string) (int, engine.Decision, []byte) {
	body := `{"history": ` + testHistory + `}`
	if ctxDoc != "" {
		body = `{"history": ` + testHistory + `, "context": ` + ctxDoc + `}`
	}
	status, out := rs.post(t, "/v1/decide", []byte(body))
	var d engine.Decision
	if status == 200 {
		if err := json.Unmarshal(out, &d); err != nil {
			t.Error(err)
		}
	}
	return status, d, out
}

// TestBundles serves policies from a real bundle server: not ready before
// the first activation; a new revision switches mid-traffic with no failed
// request; a bundle OPA refuses and a bundle the engine refuses both leave
// the last good revision serving, visible in /health and /metrics; and a
// collector receives the decision logs, with the context masked.
func TestBundles(t *testing.T) {
	ctx := context.Background()
	bs := newBundleServer(t)
	col := newCollector(t)
	bs.publish(t, "r1", map[string]string{"/vault.rego": filterKeeping("secret_op")})
	rs := start(t, testReg(t), withOPAConfig(opaConfig(bs.URL, col.URL), "test"), withMaskContext("/secret"))
	bp := bundleplugin.Lookup(rs.srv.Manager())
	require.NotNil(t, bp)

	status, h := health(t, rs)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "not_ready", h.Status)
	status, _, body := decide(t, rs, "")
	require.Equal(t, http.StatusServiceUnavailable, status, string(body))

	require.NoError(t, bp.Trigger(ctx))
	status, h = health(t, rs)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "r1", h.Bundles["pc"].Serving)
	status, d1, body := decide(t, rs, "")
	require.Equal(t, 200, status, string(body))
	require.Equal(t, []string{"get_time", "secret_op"}, d1.Available)
	require.Equal(t, engine.Execute, d1.Calls[0].Verdict)

	// Switch to r2 (which drops secret_op) under traffic.
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		failures atomic.Int64
		n        atomic.Int64
		seenNew  atomic.Bool
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				status, d := tryDecide(rs)
				n.Add(1)
				switch {
				case status != 200:
					failures.Add(1)
				case d.Fingerprint == d1.Fingerprint && len(d.Available) == 2:
				case d.Fingerprint != d1.Fingerprint && len(d.Available) == 1 && d.Calls[0].Verdict == engine.UnknownTool:
					seenNew.Store(true)
				default:
					failures.Add(1)
				}
			}
		}()
	}
	for n.Load() < 20 {
		pause()
	}
	bs.publish(t, "r2", map[string]string{"/vault.rego": filterKeeping()})
	require.NoError(t, bp.Trigger(ctx))
	before := n.Load()
	for n.Load() < before+20 {
		pause()
	}
	stop.Store(true)
	wg.Wait()
	require.Zero(t, failures.Load(), "requests failed or were decided by neither revision")
	require.True(t, seenNew.Load())
	status, d2, _ := decide(t, rs, "")
	require.Equal(t, 200, status)
	require.NotEqual(t, d1.Fingerprint, d2.Fingerprint)
	require.Equal(t, []string{"get_time"}, d2.Available)
	_, h = health(t, rs)
	require.Equal(t, "r2", h.Bundles["pc"].Serving)

	// A bundle OPA refuses (a parse error).
	bs.publish(t, "r3", map[string]string{"/vault.rego": "package policycheck.capabilities.vault\n\nprepare_tools contains if {"})
	require.Error(t, bp.Trigger(ctx))
	status, h = health(t, rs)
	require.Equal(t, 200, status)
	require.Equal(t, "r2", h.Bundles["pc"].Serving)
	require.NotEmpty(t, h.Bundles["pc"].Error)
	_, d, _ := decide(t, rs, "")
	require.Equal(t, d2.Fingerprint, d.Fingerprint)

	// A bundle OPA accepts and the engine refuses (a filter for a
	// capability the registry lacks).
	bs.publish(t, "r4", map[string]string{"/nope.rego": "package policycheck.capabilities.nope\n\nprepare_tools := set()\n"})
	require.NoError(t, bp.Trigger(ctx))
	status, h = health(t, rs)
	require.Equal(t, 200, status)
	require.Equal(t, "r2", h.Bundles["pc"].Serving)
	require.Equal(t, "r4", h.Bundles["pc"].Active)
	require.Contains(t, h.Bundles["pc"].Error, `"r4" refused`)
	_, d, _ = decide(t, rs, "")
	require.Equal(t, d2.Fingerprint, d.Fingerprint)
	_, body = rs.do(t, http.MethodGet, "/metrics", nil)
	require.Contains(t, string(body), `policycheck_bundle_failing{bundle="pc"} 1`)
	require.Contains(t, string(body), `policycheck_bundle_failures_total{bundle="pc"} 2`)
	require.Contains(t, string(body), `bundle="pc",bundle_revision="r2"`)

	// Back to a good revision, whose filter reads the bundle's data.
	// It also carries OPA's standard decision-log mask policy.
	bs.publish(t, "r5", map[string]string{"/vault.rego": "package policycheck.capabilities.vault\n\n" +
		"prepare_tools contains t.name if {\n\tsome t in input.tools\n\tt.name in data.operator.keep\n}\n",
		"/mask.rego": "package system.log\n\nmask contains \"/input/context/group\"\n"},
		map[string]any{"operator": map[string]any{"keep": []any{"get_time", "secret_op"}}})
	require.NoError(t, bp.Trigger(ctx))
	_, h = health(t, rs)
	require.Equal(t, "r5", h.Bundles["pc"].Serving)
	require.Empty(t, h.Bundles["pc"].Error)

	// Decision logs.
	status, d5, _ := decide(t, rs, `{"user": "u1", "secret": "hunter2", "group": "staff"}`)
	require.Equal(t, 200, status)
	require.Equal(t, []string{"get_time", "secret_op"}, d5.Available)
	require.NoError(t, logs.Lookup(rs.srv.Manager()).Trigger(ctx))
	col.mu.Lock()
	events := col.events
	col.mu.Unlock()
	require.NotEmpty(t, events)
	var found map[string]any
	for _, e := range events {
		res, _ := e["result"].(map[string]any)
		if res != nil && res["fingerprint"] == d5.Fingerprint {
			found = e
		}
	}
	require.NotNil(t, found, "no decision log with fingerprint %s among %d", d5.Fingerprint, len(events))
	input := found["input"].(map[string]any)
	ctxLogged := input["context"].(map[string]any)
	require.Equal(t, "u1", ctxLogged["user"])
	require.NotContains(t, ctxLogged, "secret") // --mask-context
	require.NotContains(t, ctxLogged, "group")  // data.system.log.mask
	// The whole Rego input document, for replay.
	require.Contains(t, input, "facts")
	require.Contains(t, input, "outgoing")
	require.Contains(t, input, "filters")
	loggedCalls := input["dispatch"].(map[string]any)["calls"].([]any)
	require.Contains(t, loggedCalls[0].(map[string]any), "args")
	require.Equal(t, "decide", input["endpoint"])
	require.Equal(t, "policycheck/availability/decision", found["path"])
	require.Equal(t, "r5", found["bundles"].(map[string]any)["pc"].(map[string]any)["revision"])
	calls := found["result"].(map[string]any)["calls"].([]any)
	require.Equal(t, "execute", calls[0].(map[string]any)["verdict"])
}

// pause yields to the traffic goroutines.
func pause() { time.Sleep(time.Millisecond) }

// tryDecide is decide for goroutines other than the test's: it reports
// failures in its result instead of failing the test.
func tryDecide(rs *running) (int, engine.Decision) {
	var d engine.Decision
	resp, err := rs.client.Post(rs.url+"/v1/decide", "application/json", strings.NewReader(`{"history": `+testHistory+`}`))
	if err != nil {
		return 0, d
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&d) != nil {
		return 0, d
	}
	return resp.StatusCode, d
}

// TestBundleUsesShippedLibrary: a bundle that declares its roots can call
// the shipped library (OPA's bundle plugin compiles it against the shipped
// policies, which the server puts in the plugin manager's store).
func TestBundleUsesShippedLibrary(t *testing.T) {
	bs := newBundleServer(t)
	col := newCollector(t)
	bs.publishRoots(t, "lib-1", []string{"policycheck/capabilities"}, map[string]string{"/vault.rego": "package policycheck.capabilities.vault\n\n" +
		"import data.policycheck.lib\n\nprepare_tools := lib.names(input.tools) - {\"secret_op\"}\n"})
	rs := start(t, testReg(t), withOPAConfig(opaConfig(bs.URL, col.URL), "test"))
	require.NoError(t, bundleplugin.Lookup(rs.srv.Manager()).Trigger(context.Background()))
	status, h := health(t, rs)
	require.Equal(t, http.StatusOK, status, h)
	require.Equal(t, "lib-1", h.Bundles["pc"].Serving)
	status, d, body := decide(t, rs, "")
	require.Equal(t, 200, status, string(body))
	require.Equal(t, []string{"get_time"}, d.Available)
}

// TestDiscoveredBundles: bundles that a discovery bundle configures are
// followed like bundles named in the file: not ready before the discovery
// bundle and its bundles are activated; a bundle discovery adds later is
// taken in (readiness stays); a broken discovery bundle leaves everything
// serving as it was.
func TestDiscoveredBundles(t *testing.T) {
	ctx := context.Background()
	bs := newBundleServer(t)
	bs.publishRoots(t, "r1", []string{"policycheck/capabilities"}, map[string]string{"/vault.rego": filterKeeping("secret_op")})
	bs.publishAt("/bundles/rules.tar.gz", buildBundle(t, "x1", []string{"policycheck/rules"},
		map[string]string{"/hide.rego": "package policycheck.rules.hide_time\n\nhide contains \"get_time\"\n"}))
	manual := func(resource string) map[string]any {
		return map[string]any{"service": "bundles", "resource": resource, "trigger": "manual"}
	}
	discover := func(rev string, bundles map[string]any) {
		bs.publishAt("/discovery.tar.gz", buildBundle(t, rev, nil, nil, map[string]any{"bundles": bundles}))
	}
	discover("d1", map[string]any{"pc": manual("/bundles/pc.tar.gz")})
	cfg := discoveryConfig(bs.URL, "")
	rs := start(t, testReg(t), withOPAConfig(cfg, "test"))
	mgr := rs.srv.Manager()
	require.Nil(t, bundleplugin.Lookup(mgr), "no bundle plugin before discovery")
	status, _ := health(t, rs)
	require.Equal(t, http.StatusServiceUnavailable, status)

	require.NoError(t, discovery.Lookup(mgr).Trigger(ctx))
	status, h := health(t, rs)
	require.Equal(t, http.StatusServiceUnavailable, status, "discovered, but its bundle is not activated yet")
	require.Contains(t, h.Bundles, "pc")
	bp := bundleplugin.Lookup(mgr)
	require.NotNil(t, bp)
	require.NoError(t, bp.Trigger(ctx))
	d := requireServingR1(t, rs)

	// Discovery adds a bundle of operator rules.
	discover("d2", map[string]any{"pc": manual("/bundles/pc.tar.gz"), "rules": manual("/bundles/rules.tar.gz")})
	require.NoError(t, discovery.Lookup(mgr).Trigger(ctx))
	status, h = health(t, rs)
	require.Equal(t, http.StatusOK, status, "ready stays while the new bundle comes")
	require.Contains(t, h.Bundles, "rules")
	require.Empty(t, h.Bundles["rules"].Serving)
	require.NoError(t, bundleplugin.Lookup(mgr).Trigger(ctx))
	_, h = health(t, rs)
	require.Equal(t, "x1", h.Bundles["rules"].Serving)
	status, d, body := decide(t, rs, "")
	require.Equal(t, 200, status, string(body))
	require.Equal(t, []string{"secret_op"}, d.Available, "get_time hidden by the discovered bundle's rule")

	// A broken discovery bundle: the configuration and policies in place
	// keep serving.
	bs.publishAt("/discovery.tar.gz", []byte("not a bundle"))
	require.Error(t, discovery.Lookup(mgr).Trigger(ctx))
	status, d2, body := decide(t, rs, "")
	require.Equal(t, 200, status, string(body))
	require.Equal(t, d.Fingerprint, d2.Fingerprint)
	require.Equal(t, d.Available, d2.Available)
	status, body = rs.do(t, http.MethodGet, "/metrics", nil)
	require.Equal(t, 200, status)
	require.Contains(t, string(body), `policycheck_bundle_failing{bundle="discovery"} 1`)

	// A discovered configuration with an option OPA would only warn
	// about (decision logs misspelt: they would stay off without a word)
	// or one policycheck does not act on is refused like a broken
	// bundle: the configuration in place keeps serving, and says why.
	for _, extra := range []map[string]any{
		{"decision_log": map[string]any{"console": true}},
		{"default_decision": "/x/y"},
		{"bundles": map[string]any{"pc": map[string]any{"service": "bundles", "resource": "/bundles/pc.tar.gz", "trigger": "manual", "polling_typo": 1}}},
	} {
		data := map[string]any{"bundles": map[string]any{"pc": manual("/bundles/pc.tar.gz")}}
		for k, v := range extra {
			data[k] = v
		}
		discover("d2", map[string]any{"pc": manual("/bundles/pc.tar.gz"), "rules": manual("/bundles/rules.tar.gz")})
		require.NoError(t, discovery.Lookup(mgr).Trigger(ctx))
		_, body = rs.do(t, http.MethodGet, "/metrics", nil)
		require.Contains(t, string(body), `policycheck_bundle_failing{bundle="discovery"} 0`)
		bs.publishAt("/discovery.tar.gz", buildBundle(t, "d3", nil, nil, data))
		require.NoError(t, discovery.Lookup(mgr).Trigger(ctx))
		_, body = rs.do(t, http.MethodGet, "/metrics", nil)
		require.Contains(t, string(body), `policycheck_bundle_failing{bundle="discovery"} 1`, "%v", extra)
		_, h = health(t, rs)
		require.Contains(t, h.Bundles, "rules", "the configuration in place stays: %v", extra)
		status, d3, body := decide(t, rs, "")
		require.Equal(t, 200, status, string(body))
		require.Equal(t, d.Available, d3.Available)
	}
}

// TestDiscoveredPersistedBundle: a discovered bundle persisted on disk is
// activated as its plugin starts, before the server's listener is on it;
// the server takes it in from the store and is ready without a download.
func TestDiscoveredPersistedBundle(t *testing.T) {
	ctx := context.Background()
	bs := newBundleServer(t)
	bs.publishRoots(t, "r1", []string{"policycheck/capabilities"}, map[string]string{"/vault.rego": filterKeeping("secret_op")})
	bs.publishAt("/discovery.tar.gz", buildBundle(t, "d1", nil, nil, map[string]any{"bundles": map[string]any{
		"pc": map[string]any{"service": "bundles", "resource": "/bundles/pc.tar.gz", "trigger": "manual", "persist": true},
	}}))
	cfg := discoveryConfig(bs.URL, t.TempDir())
	first := start(t, testReg(t), withOPAConfig(cfg, "test"))
	require.NoError(t, discovery.Lookup(first.srv.Manager()).Trigger(ctx))
	require.NoError(t, bundleplugin.Lookup(first.srv.Manager()).Trigger(ctx))
	status, h := health(t, first)
	require.Equal(t, http.StatusOK, status, h)
	first.stop()

	// The bundle server now has nothing at the bundle's path: only the
	// copy on disk can serve.
	bs.current.Store(nil)
	second := start(t, testReg(t), withOPAConfig(cfg, "test"))
	require.NoError(t, discovery.Lookup(second.srv.Manager()).Trigger(ctx))
	requireServingR1(t, second)
}

// requireServingR1 checks that rs is ready, serves revision r1 of bundle
// pc (which keeps secret_op), and decides with it; it returns the decision.
func requireServingR1(t *testing.T, rs *running) engine.Decision {
	t.Helper()
	status, h := health(t, rs)
	require.Equal(t, http.StatusOK, status, h)
	require.Equal(t, "r1", h.Bundles["pc"].Serving)
	status, d, body := decide(t, rs, "")
	require.Equal(t, 200, status, string(body))
	require.Equal(t, []string{"get_time", "secret_op"}, d.Available)
	return d
}
