package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/policycheck/policycheck/engine"
)

// metrics are the server's Prometheus metrics, in a registry of its own
// (no global state).
type metrics struct {
	reg            *prometheus.Registry
	requests       *prometheus.CounterVec
	decisions      *prometheus.CounterVec
	verdicts       *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	evalErrors     *prometheus.CounterVec
	failClosed     *prometheus.CounterVec
	panics         *prometheus.CounterVec
	engineCacheHit *prometheus.CounterVec
	// enginesCompiled counts compilations for requests' registries.
	enginesCompiled prometheus.Counter
	revision        *prometheus.GaugeVec
	bundleFailures  *prometheus.CounterVec
	bundleFailing   *prometheus.GaugeVec
	bundleStaleG    *prometheus.GaugeVec
	runMisses       *prometheus.CounterVec
	logErrors       prometheus.Counter
	reloads         *prometheus.CounterVec
	reloadFailing   prometheus.Gauge
	reloadDropping  *prometheus.CounterVec
	keyReloads      *prometheus.CounterVec
	keyFailing      prometheus.Gauge
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_http_requests_total", Help: "HTTP requests by route and status code.",
	}, []string{"route", "code"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_decisions_total", Help: "Decisions made, by endpoint.",
	}, []string{"endpoint"})
	m.verdicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_verdicts_total", Help: "Tool-call verdicts, by verdict.",
	}, []string{"verdict"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "policycheck_decision_duration_seconds",
		Help:    "Time to validate a request and decide, by endpoint.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"endpoint"})
	m.evalErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_eval_errors_total", Help: "Decisions whose evaluation reported an error, by endpoint.",
	}, []string{"endpoint"})
	m.failClosed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_fail_closed_decisions_total", Help: "Decisions that failed closed (policy error, timeout, failed filter), by endpoint.",
	}, []string{"endpoint"})
	m.panics = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_recovered_panics_total",
		Help: "Panics (bugs) recovered on a request's path, by endpoint: inside the engine the decision fails closed; elsewhere the request is answered 500 and a run is left as it was.",
	}, []string{"endpoint"})
	m.engineCacheHit = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_registry_engine_lookups_total", Help: "Lookups of the engine compiled for a request's registry, by result (hit, miss).",
	}, []string{"result"})
	m.enginesCompiled = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "policycheck_registry_engines_compiled_total",
		Help: "Engines compiled for requests' registries (concurrent requests with one new registry share a compilation).",
	})
	m.revision = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "policycheck_policy_revision_info", Help: "1 for the policy revision and bundle revisions being served.",
	}, []string{"policy_revision", "bundle", "bundle_revision"})
	m.bundleFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_bundle_failures_total", Help: "Bundle downloads or activations refused, by bundle; the last good revision keeps serving.",
	}, []string{"bundle"})
	m.bundleFailing = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "policycheck_bundle_failing", Help: "1 when the bundle's last download or activation was refused.",
	}, []string{"bundle"})
	m.bundleStaleG = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "policycheck_bundle_stale",
		Help: "1 when no download of the bundle has succeeded for three times its polling.max_delay_seconds (plus long_polling_timeout_seconds): its server has stopped answering; the last good revision keeps serving.",
	}, []string{"bundle"})
	m.runMisses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_run_lookups_total", Help: "Incremental run lookups by result (hit, new, conflict).",
	}, []string{"result"})
	m.logErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "policycheck_decision_log_errors_total", Help: "Decisions the decision-log plugin did not accept.",
	})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_policy_reloads_total",
		Help: "Reloads of the policies, registry and shadow policy (Server.Reload, serve --watch) by result: swapped, unchanged, or refused (the state in place keeps serving).",
	}, []string{"result"})
	m.reloadFailing = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "policycheck_policy_reload_failing",
		Help: "1 when the last reload (Server.Reload, serve --watch) was refused: what serves is not what the files now hold.",
	})
	m.reloadDropping = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_policy_reload_drops_total",
		Help: "Reloads (Server.Reload, serve --watch) whose policies drop packages or rules the serving ones define, by result: refused (the default) or swapped (serve --watch-drops accept).",
	}, []string{"result"})
	m.keyReloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_receipt_key_reloads_total",
		Help: "Reloads of the receipt key (serve --watch on --receipt-key) by result: rotated, unchanged, or refused (a file that holds no Ed25519 key: the current key keeps signing).",
	}, []string{"result"})
	m.keyFailing = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "policycheck_receipt_key_reload_failing",
		Help: "1 when the last reload of the receipt key was refused: the key that signs is not the one the file now holds.",
	})
	m.reg.MustRegister(m.keyReloads, m.keyFailing)
	m.reg.MustRegister(m.requests, m.decisions, m.verdicts, m.latency, m.evalErrors, m.failClosed, m.panics,
		m.engineCacheHit, m.enginesCompiled, m.revision, m.bundleFailures, m.bundleFailing, m.bundleStaleG, m.runMisses, m.logErrors, m.reloads, m.reloadFailing,
		m.reloadDropping,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&cacheCollector{s: s})
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

func (m *metrics) request(route string, code int) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
}

func (m *metrics) decision(endpoint string, d *engine.Decision, dur time.Duration) {
	m.decisions.WithLabelValues(endpoint).Inc()
	m.latency.WithLabelValues(endpoint).Observe(dur.Seconds())
	for _, c := range d.Calls {
		m.verdicts.WithLabelValues(c.Verdict).Inc()
	}
	if d.Panicked() {
		m.panics.WithLabelValues(endpoint).Inc()
	}
	if len(d.Errors) > 0 {
		m.evalErrors.WithLabelValues(endpoint).Inc()
		failed := len(d.Available) == 0
		for _, c := range d.Calls {
			failed = failed && c.Verdict == engine.Denied
		}
		if failed {
			m.failClosed.WithLabelValues(endpoint).Inc()
		}
	}
}

func (m *metrics) evalError(endpoint string) { m.evalErrors.WithLabelValues(endpoint).Inc() }

// panicked counts a panic recovered outside the engine's decision (the
// engine's own are counted with their decision).
func (m *metrics) panicked(endpoint string) { m.panics.WithLabelValues(endpoint).Inc() }

func (m *metrics) engineCache(hit bool) {
	if hit {
		m.engineCacheHit.WithLabelValues("hit").Inc()
	} else {
		m.engineCacheHit.WithLabelValues("miss").Inc()
	}
}

func (m *metrics) engineCompiled() { m.enginesCompiled.Inc() }

func (m *metrics) run(result string) { m.runMisses.WithLabelValues(result).Inc() }

// setRevision makes st's revisions the only ones with value 1.
func (m *metrics) setRevision(st *policyState) {
	m.revision.Reset()
	if len(st.served) == 0 {
		m.revision.WithLabelValues(st.rev, "", "").Set(1)
		return
	}
	for name, rev := range st.served {
		m.revision.WithLabelValues(st.rev, name, rev).Set(1)
	}
}

// reload counts a reload by result (swapped, unchanged, refused) and
// says whether the last one was refused.
func (m *metrics) reload(result string) {
	m.reloads.WithLabelValues(result).Inc()
	if result == "refused" {
		m.reloadFailing.Set(1)
	} else {
		m.reloadFailing.Set(0)
	}
}

// keyReload counts a reload of the receipt key by result (rotated,
// unchanged, refused) and says whether the last one was refused.
func (m *metrics) keyReload(result string) {
	m.keyReloads.WithLabelValues(result).Inc()
	if result == "refused" {
		m.keyFailing.Set(1)
	} else {
		m.keyFailing.Set(0)
	}
}

// reloadDrops counts a reload whose policies drop packages or rules, by
// result (swapped or refused).
func (m *metrics) reloadDrops(result string) { m.reloadDropping.WithLabelValues(result).Inc() }

func (m *metrics) bundleStale(name string, stale bool) {
	v := 0.0
	if stale {
		v = 1
	}
	m.bundleStaleG.WithLabelValues(name).Set(v)
}

func (m *metrics) bundleResult(name string, failed bool) {
	if failed {
		m.bundleFailures.WithLabelValues(name).Inc()
		m.bundleFailing.WithLabelValues(name).Set(1)
	} else {
		m.bundleFailing.WithLabelValues(name).Set(0)
	}
}

// cacheCollector reports the filter caches (engine.CacheStats) and the
// decision memos (engine.DecisionCacheStats) of the engines currently
// serving, and the size of the run table. A cache
// belongs to one policy snapshot, so the sums drop when a bundle
// activates or an engine is evicted: they are gauges.
type cacheCollector struct{ s *Server }

var (
	descHits        = prometheus.NewDesc("policycheck_filter_cache_hits", "Filter-cache hits of the engines serving now.", nil, nil)
	descMisses      = prometheus.NewDesc("policycheck_filter_cache_misses", "Filter-cache misses of the engines serving now.", nil, nil)
	descEntries     = prometheus.NewDesc("policycheck_filter_cache_entries", "Filter-cache entries of the engines serving now.", nil, nil)
	descMemoHits    = prometheus.NewDesc("policycheck_decision_cache_hits", "Decisions the engines serving now answered from their decision memo.", nil, nil)
	descMemoMisses  = prometheus.NewDesc("policycheck_decision_cache_misses", "Decisions the engines serving now evaluated the policy for (memo on).", nil, nil)
	descMemoEntries = prometheus.NewDesc("policycheck_decision_cache_entries", "Decision-memo entries of the engines serving now.", nil, nil)
	descCtxHits     = prometheus.NewDesc("policycheck_context_cache_hits", "Request contexts the engines serving now found converted in their context cache.", nil, nil)
	descCtxMisses   = prometheus.NewDesc("policycheck_context_cache_misses", "Request contexts (up to 4 KiB of JSON) the engines serving now converted and kept.", nil, nil)
	descCtxEntries  = prometheus.NewDesc("policycheck_context_cache_entries", "Context-cache entries of the engines serving now.", nil, nil)
	descEngines     = prometheus.NewDesc("policycheck_registry_engines", "Engines kept for registries that requests carry.", nil, nil)
	descRuns        = prometheus.NewDesc("policycheck_runs", "Runs in the incremental run table.", nil, nil)
	descEvicted     = prometheus.NewDesc("policycheck_run_evictions_total", "Runs evicted from the run table (size bound or idle TTL).", nil, nil)
	descReady       = prometheus.NewDesc("policycheck_ready", "1 once policies are loaded and decisions are served.", nil, nil)

	descPrefixLookups = prometheus.NewDesc("policycheck_prefix_cache_lookups_total",
		"Stateless requests by what the prefix cache did: hit (resumed after a remembered prefix), miss (decoded whole), fallback (a prefix matched but the full path decided).",
		[]string{"result"}, nil)
	descPrefixEntries = prometheus.NewDesc("policycheck_prefix_cache_entries", "History prefixes the prefix cache holds.", nil, nil)
	descPrefixBytes   = prometheus.NewDesc("policycheck_prefix_cache_bytes", "Bytes of history the prefix cache holds.", nil, nil)
	descPrefixNoted   = prometheus.NewDesc("policycheck_prefix_cache_noted",
		"Histories seen once, of which the prefix cache keeps only a fingerprint: a request that begins with one is kept (bounded at 4,096, oldest forgotten first).", nil, nil)
	descBodiesReused = prometheus.NewDesc("policycheck_request_bodies_reused_total",
		"Request bodies read into a pooled buffer and given back once answered (none with a decision log or a shadow policy).", nil, nil)
	descBodyPool = prometheus.NewDesc("policycheck_request_body_pool_bytes",
		"Bytes of buffers the request-body pool holds for the next requests: at most 64 MiB, each let go after a minute unused.", nil, nil)
	descSchemaChecks = prometheus.NewDesc("policycheck_history_schema_checks_total",
		"Histories (or batches of appended messages) validated against the JSON Schema: 0 unless the server validates with it (--schema).", nil, nil)
)

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHits, descMisses, descEntries, descMemoHits, descMemoMisses, descMemoEntries, descCtxHits, descCtxMisses, descCtxEntries, descEngines, descRuns, descEvicted, descReady,
		descPrefixLookups, descPrefixEntries, descPrefixBytes, descPrefixNoted, descBodiesReused, descBodyPool, descSchemaChecks} {
		ch <- d
	}
	c.s.logSink.Describe(ch)
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.state.Load()
	engines := c.s.engines.Values()
	if st.eng != nil {
		engines = append(engines, st.eng)
	}
	var hits, misses, memoHits, memoMisses, ctxHits, ctxMisses int64
	var entries, memoEntries, ctxEntries int
	for _, e := range engines {
		h, m, n := e.CacheStats()
		hits, misses, entries = hits+h, misses+m, entries+n
		h, m, n = e.DecisionCacheStats()
		memoHits, memoMisses, memoEntries = memoHits+h, memoMisses+m, memoEntries+n
		h, m, n = e.ContextCacheStats()
		ctxHits, ctxMisses, ctxEntries = ctxHits+h, ctxMisses+m, ctxEntries+n
	}
	ch <- prometheus.MustNewConstMetric(descHits, prometheus.GaugeValue, float64(hits))
	ch <- prometheus.MustNewConstMetric(descMisses, prometheus.GaugeValue, float64(misses))
	ch <- prometheus.MustNewConstMetric(descEntries, prometheus.GaugeValue, float64(entries))
	ch <- prometheus.MustNewConstMetric(descMemoHits, prometheus.GaugeValue, float64(memoHits))
	ch <- prometheus.MustNewConstMetric(descMemoMisses, prometheus.GaugeValue, float64(memoMisses))
	ch <- prometheus.MustNewConstMetric(descMemoEntries, prometheus.GaugeValue, float64(memoEntries))
	ch <- prometheus.MustNewConstMetric(descCtxHits, prometheus.GaugeValue, float64(ctxHits))
	ch <- prometheus.MustNewConstMetric(descCtxMisses, prometheus.GaugeValue, float64(ctxMisses))
	ch <- prometheus.MustNewConstMetric(descCtxEntries, prometheus.GaugeValue, float64(ctxEntries))
	n, _ := c.s.engines.Stats()
	ch <- prometheus.MustNewConstMetric(descEngines, prometheus.GaugeValue, float64(n))
	runs, evicted := c.s.runs.table.Stats()
	ch <- prometheus.MustNewConstMetric(descRuns, prometheus.GaugeValue, float64(runs))
	ch <- prometheus.MustNewConstMetric(descEvicted, prometheus.CounterValue, float64(evicted))
	ready := 0.0
	if st.ready {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready)
	if m := c.s.opaMetrics; m != nil {
		c.s.logSink.Collect(ch, m)
	}
	ch <- prometheus.MustNewConstMetric(descSchemaChecks, prometheus.CounterValue, float64(c.s.intake.schemaChecks.Load()))
	ch <- prometheus.MustNewConstMetric(descBodiesReused, prometheus.CounterValue, float64(c.s.intake.reused.Load()))
	ch <- prometheus.MustNewConstMetric(descBodyPool, prometheus.GaugeValue, float64(c.s.intake.bodies.held()))
	if pc := c.s.intake.prefixes; pc != nil {
		ch <- prometheus.MustNewConstMetric(descPrefixLookups, prometheus.CounterValue, float64(pc.hits.Load()), "hit")
		ch <- prometheus.MustNewConstMetric(descPrefixLookups, prometheus.CounterValue, float64(pc.misses.Load()), "miss")
		ch <- prometheus.MustNewConstMetric(descPrefixLookups, prometheus.CounterValue, float64(pc.fallbacks.Load()), "fallback")
		entries, bytes, noted := pc.stats()
		ch <- prometheus.MustNewConstMetric(descPrefixEntries, prometheus.GaugeValue, float64(entries))
		ch <- prometheus.MustNewConstMetric(descPrefixBytes, prometheus.GaugeValue, float64(bytes))
		ch <- prometheus.MustNewConstMetric(descPrefixNoted, prometheus.GaugeValue, float64(noted))
	}
}
