package opaplugins

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	opametrics "github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/prometheus/client_golang/prometheus"
)

// The counters OPA's decision-log plugin keeps that the sink reads.
const (
	opaLogUploaded      = "decision_logs_chunks_uploaded"
	opaLogUploadFailed  = "decision_logs_chunks_upload_failed"
	opaLogDropBytes     = "decision_logs_dropped_buffer_size_limit_bytes_exceeded"
	opaLogDropEvents    = "decision_logs_dropped_buffer_size_limit_exceeded"
	opaLogDropRateLimit = "decision_logs_dropped_rate_limit_exceeded"
	opaLogEncoding      = "decision_logs_encoding_failure"
)

// Sink follows the decision-log sink, for /health and /metrics: the
// outcome of the uploads (OPA's plugin counts them on the metrics that
// Metrics wraps) and the events dropped. Its zero value is ready to use.
//
// OPA's size buffer drops whole chunks of events when it is full, and
// counts a drop once whatever the chunk held, under two names at once.
// So that drops are counted by event, the server does not let OPA's size
// buffer fill: an event that would take it within one upload chunk of its
// bound is turned away (Room, TurnAway) before it reaches the plugin, and
// counted. OPA can still drop chunks itself when an upload that
// failed puts its chunks back while decisions are logged: those are
// counted as chunks (policycheck_decision_log_dropped_chunks_total).
type Sink struct {
	// Logger, when set, warns of the first drop since the last upload
	// that succeeded.
	Logger     *slog.Logger
	turnedAway atomic.Int64
	sizeBuffer atomic.Bool // the plugin keeps OPA's size buffer

	mu sync.Mutex
	// failing: the last chunk upload failed, since failingSince.
	failing      bool
	failingSince time.Time
	// dropped counts the events (or, for OPA's own chunk drops, chunks)
	// dropped since the last upload that succeeded.
	dropped int64
}

// Room reports whether lp's buffer takes one more event: always, but for
// OPA's size buffer with a bound, which must keep room for two chunks
// (see Sink) — and always when that buffer is empty, so that no bound
// turns every event away (serve refuses a bound under three chunks at
// start: checkLogBuffer).
func (k *Sink) Room(lp *logs.Plugin) bool {
	typ, size := lp.BufferSize()
	k.sizeBuffer.Store(typ == "size")
	if typ != "size" || size == 0 {
		return true
	}
	rep := lp.Config().Reporting
	if rep.BufferSizeLimitBytes == nil || *rep.BufferSizeLimitBytes <= 0 {
		return true
	}
	var chunk int64
	if rep.UploadSizeLimitBytes != nil {
		chunk = *rep.UploadSizeLimitBytes
	}
	return size+2*chunk <= *rep.BufferSizeLimitBytes
}

// TurnAway counts an event the size buffer had no room for.
func (k *Sink) TurnAway() {
	k.turnedAway.Add(1)
	k.drop(1, "the decision-log buffer is full (buffer_size_limit_bytes): decisions are not logged until an upload empties it")
}

// drop counts n events dropped, logging the first since the last upload
// that succeeded.
func (k *Sink) drop(n int64, why string) {
	k.mu.Lock()
	first := k.dropped == 0
	k.dropped += n
	k.mu.Unlock()
	if first && k.Logger != nil {
		k.Logger.Warn("decision-log events dropped", "reason", why)
	}
}

// uploaded records the outcome of a chunk upload.
func (k *Sink) uploaded(ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case ok:
		k.failing, k.dropped = false, 0
	case !k.failing:
		k.failing, k.failingSince = true, time.Now()
	}
}

// Health is the sink's state for GET /health.
func (k *Sink) Health() *DecisionLogHealth {
	k.mu.Lock()
	defer k.mu.Unlock()
	h := &DecisionLogHealth{State: "ok", Dropped: k.dropped}
	switch {
	case k.failing:
		h.State = "degraded"
		h.Message = fmt.Sprintf("uploads to the decision-log service have failed since %s; events wait in the buffer", k.failingSince.UTC().Format(time.RFC3339))
	case k.dropped > 0:
		h.State = "degraded"
		h.Message = "decision-log events were dropped since the last upload that succeeded"
	}
	if k.failing && k.dropped > 0 {
		h.Message += ", and some were dropped"
	}
	return h
}

// DecisionLogHealth is the state of the decision-log sink (OPA's
// decision-log plugin and the service it uploads to).
type DecisionLogHealth struct {
	// State is "ok", or "degraded" when the last upload failed or
	// events were dropped since the last upload that succeeded.
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
	// Dropped is the number of events dropped since the last upload
	// that succeeded (all reasons of
	// policycheck_decision_log_dropped_total; a chunk OPA's buffer
	// dropped itself counts one).
	Dropped int64 `json:"dropped"`
}

// Metrics returns m, for OPA's plugins to count into, with the
// decision-log plugin's upload outcomes and drops also told to k as they
// happen.
func (k *Sink) Metrics(m opametrics.Metrics) opametrics.Metrics {
	return &sinkMetrics{Metrics: m, sink: k}
}

// sinkMetrics is the metrics OPA's plugins count into: OPA's own, with
// the decision-log plugin's upload outcomes and drops also told to the
// Sink as they happen.
type sinkMetrics struct {
	opametrics.Metrics
	sink *Sink
}

func (m *sinkMetrics) Counter(name string) opametrics.Counter {
	c := m.Metrics.Counter(name)
	switch name {
	case opaLogUploaded, opaLogUploadFailed, opaLogDropBytes, opaLogDropEvents, opaLogDropRateLimit, opaLogEncoding:
		return &sinkCounter{Counter: c, name: name, sink: m.sink}
	}
	return c
}

// sinkCounter is one of OPA's decision-log counters, told to the sink.
type sinkCounter struct {
	opametrics.Counter
	name string
	sink *Sink
}

func (c *sinkCounter) Incr() { c.Add(1) }

func (c *sinkCounter) Add(n uint64) {
	c.Counter.Add(n)
	switch c.name {
	case opaLogUploaded:
		c.sink.uploaded(true)
	case opaLogUploadFailed:
		c.sink.uploaded(false)
	case opaLogDropBytes:
		// The size buffer counts a drop of chunks under both
		// names: this one stands for it.
		c.sink.drop(int64(n), "OPA's size buffer dropped chunks of events")
	case opaLogDropEvents:
		// Only the event buffer's drops: the size buffer's are
		// counted with opaLogDropBytes.
		if !c.sink.sizeBuffer.Load() {
			c.sink.drop(int64(n), "the decision-log event buffer is full (buffer_size_limit_events)")
		}
	case opaLogDropRateLimit:
		c.sink.drop(int64(n), "the decision-log rate limit (max_decisions_per_second)")
	case opaLogEncoding:
		c.sink.drop(int64(n), "an event could not be encoded within upload_size_limit_bytes")
	}
}

// The decision-log sink's metrics.
var (
	descLogDropped = prometheus.NewDesc("policycheck_decision_log_dropped_total",
		"Decision-log events dropped, each once, by reason: buffer_bytes (no room left in the size buffer, buffer_size_limit_bytes), buffer_events (the event buffer is full), rate_limit (max_decisions_per_second), encoding (an event larger than upload_size_limit_bytes).",
		[]string{"reason"}, nil)
	descLogDroppedChunks = prometheus.NewDesc("policycheck_decision_log_dropped_chunks_total",
		"Chunks of decision-log events (each of one or more events) OPA's size buffer dropped itself, when the chunks of an upload that failed came back to a buffer filled meanwhile.", nil, nil)
	descLogUploads = prometheus.NewDesc("policycheck_decision_log_uploads_total",
		"Decision-log chunks uploaded, by result (ok, failed).", []string{"result"}, nil)
)

// Describe sends the descriptors of the sink's metrics (see Collect).
func (k *Sink) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLogDropped
	ch <- descLogDroppedChunks
	ch <- descLogUploads
}

// Collect sends the sink's metrics: the events dropped (each once, by
// reason), OPA's own chunk drops and the uploads, read from m, the
// metrics that Metrics wrapped.
func (k *Sink) Collect(ch chan<- prometheus.Metric, m opametrics.Metrics) {
	count := func(name string) float64 {
		n, _ := m.Counter(name).Value().(uint64)
		return float64(n)
	}
	// OPA's size buffer counts a drop of chunks under both of its
	// buffer counters: they are the chunk count here, and the
	// event buffer's counter is read only for the event buffer.
	events := 0.0
	if !k.sizeBuffer.Load() {
		events = count(opaLogDropEvents)
	}
	ch <- prometheus.MustNewConstMetric(descLogDropped, prometheus.CounterValue, float64(k.turnedAway.Load()), "buffer_bytes")
	ch <- prometheus.MustNewConstMetric(descLogDropped, prometheus.CounterValue, events, "buffer_events")
	ch <- prometheus.MustNewConstMetric(descLogDropped, prometheus.CounterValue, count(opaLogDropRateLimit), "rate_limit")
	ch <- prometheus.MustNewConstMetric(descLogDropped, prometheus.CounterValue, count(opaLogEncoding), "encoding")
	ch <- prometheus.MustNewConstMetric(descLogDroppedChunks, prometheus.CounterValue, count(opaLogDropBytes))
	ch <- prometheus.MustNewConstMetric(descLogUploads, prometheus.CounterValue, count(opaLogUploaded), "ok")
	ch <- prometheus.MustNewConstMetric(descLogUploads, prometheus.CounterValue, count(opaLogUploadFailed), "failed")
}
