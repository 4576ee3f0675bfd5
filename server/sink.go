package server

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	opametrics "github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
)

// The counters OPA's decision-log plugin keeps that the server reads.
const (
	opaLogUploaded      = "decision_logs_chunks_uploaded"
	opaLogUploadFailed  = "decision_logs_chunks_upload_failed"
	opaLogDropBytes     = "decision_logs_dropped_buffer_size_limit_bytes_exceeded"
	opaLogDropEvents    = "decision_logs_dropped_buffer_size_limit_exceeded"
	opaLogDropRateLimit = "decision_logs_dropped_rate_limit_exceeded"
	opaLogEncoding      = "decision_logs_encoding_failure"
)

// logSink follows the decision-log sink, for /health and /metrics: the
// outcome of the uploads (OPA's plugin counts them on sinkMetrics) and
// the events dropped.
//
// OPA's size buffer drops whole chunks of events when it is full, and
// counts a drop once whatever the chunk held, under two names at once.
// So that drops are counted by event, the server does not let OPA's size
// buffer fill: an event that would take it within one upload chunk of its
// bound is turned away before it reaches the plugin, and counted
// (turnedAway). OPA can still drop chunks itself when an upload that
// failed puts its chunks back while decisions are logged: those are
// counted as chunks (policycheck_decision_log_dropped_chunks_total).
type logSink struct {
	logger     *slog.Logger
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

// room reports whether lp's buffer takes one more event: always, but for
// OPA's size buffer with a bound, which must keep room for two chunks
// (see logSink).
func (k *logSink) room(lp *logs.Plugin) bool {
	typ, size := lp.BufferSize()
	k.sizeBuffer.Store(typ == "size")
	if typ != "size" {
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

// turnAway counts an event the size buffer had no room for.
func (k *logSink) turnAway() {
	k.turnedAway.Add(1)
	k.drop(1, "the decision-log buffer is full (buffer_size_limit_bytes): decisions are not logged until an upload empties it")
}

// drop counts n events dropped, logging the first since the last upload
// that succeeded.
func (k *logSink) drop(n int64, why string) {
	k.mu.Lock()
	first := k.dropped == 0
	k.dropped += n
	k.mu.Unlock()
	if first && k.logger != nil {
		k.logger.Warn("decision-log events dropped", "reason", why)
	}
}

// uploaded records the outcome of a chunk upload.
func (k *logSink) uploaded(ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case ok:
		k.failing, k.dropped = false, 0
	case !k.failing:
		k.failing, k.failingSince = true, time.Now()
	}
}

// health is the sink's state for GET /health.
func (k *logSink) health() *DecisionLogHealth {
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

// sinkMetrics is the metrics OPA's plugins count into: OPA's own, with
// the decision-log plugin's upload outcomes and drops also told to the
// server's logSink as they happen.
type sinkMetrics struct {
	opametrics.Metrics
	sink *logSink
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
	sink *logSink
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
