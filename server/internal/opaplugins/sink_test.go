package opaplugins

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	opametrics "github.com/open-policy-agent/opa/v1/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// sinkCollector registers a Sink's metrics, read from m.
type sinkCollector struct {
	k *Sink
	m opametrics.Metrics
}

func (c sinkCollector) Describe(ch chan<- *prometheus.Desc) { c.k.Describe(ch) }
func (c sinkCollector) Collect(ch chan<- prometheus.Metric) { c.k.Collect(ch, c.m) }

// gather reads the sink's metrics as name{label} → value.
func gather(t *testing.T, k *Sink, m opametrics.Metrics) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(sinkCollector{k, m}))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetValue() + "}"
			}
			out[key] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestSink: the decision-log plugin's counters, counted on the metrics
// Sink.Metrics wraps, reach the sink's health as they happen (a failed
// upload, drops by event, the first drop logged once) and /metrics; an
// upload that succeeds makes it ok again.
func TestSink(t *testing.T) {
	var buf bytes.Buffer
	k := &Sink{Logger: slog.New(slog.NewTextHandler(&buf, nil))}
	m := k.Metrics(opametrics.New())
	require.Equal(t, &DecisionLogHealth{State: "ok"}, k.Health())

	m.Counter(opaLogUploadFailed).Incr()
	h := k.Health()
	require.Equal(t, "degraded", h.State)
	require.Contains(t, h.Message, "uploads to the decision-log service have failed since")
	require.Zero(t, h.Dropped)

	m.Counter(opaLogDropRateLimit).Add(3)
	m.Counter(opaLogEncoding).Incr()
	m.Counter(opaLogDropEvents).Add(2) // the event buffer's: counted
	k.TurnAway()
	h = k.Health()
	require.Equal(t, int64(7), h.Dropped)
	require.True(t, strings.HasSuffix(h.Message, ", and some were dropped"), h.Message)
	require.Equal(t, 1, strings.Count(buf.String(), "decision-log events dropped"), buf.String())
	require.Contains(t, buf.String(), "max_decisions_per_second")

	require.Equal(t, map[string]float64{
		"policycheck_decision_log_dropped_total{buffer_bytes}":  1,
		"policycheck_decision_log_dropped_total{buffer_events}": 2,
		"policycheck_decision_log_dropped_total{rate_limit}":    3,
		"policycheck_decision_log_dropped_total{encoding}":      1,
		"policycheck_decision_log_dropped_chunks_total":         0,
		"policycheck_decision_log_uploads_total{ok}":            0,
		"policycheck_decision_log_uploads_total{failed}":        1,
	}, gather(t, k, m))

	m.Counter(opaLogUploaded).Incr()
	require.Equal(t, &DecisionLogHealth{State: "ok"}, k.Health())

	// With OPA's size buffer, its chunk drops count under both of its
	// names: once, as chunks.
	k.sizeBuffer.Store(true)
	m.Counter(opaLogDropBytes).Incr()
	m.Counter(opaLogDropEvents).Incr()
	h = k.Health()
	require.Equal(t, "degraded", h.State)
	require.Equal(t, "decision-log events were dropped since the last upload that succeeded", h.Message)
	require.Equal(t, int64(1), h.Dropped)
	got := gather(t, k, m)
	require.Equal(t, 1.0, got["policycheck_decision_log_dropped_chunks_total"])
	require.Equal(t, 0.0, got["policycheck_decision_log_dropped_total{buffer_events}"])
	require.Equal(t, 2, strings.Count(buf.String(), "decision-log events dropped"), "logged again after an upload")

	// Other counters pass through untouched.
	m.Counter("bundle_request").Incr()
	require.Equal(t, uint64(1), m.Counter("bundle_request").Value())
}

// TestSinkConcurrent: the plugin counts from its own goroutines while
// /health and /metrics read.
func TestSinkConcurrent(t *testing.T) {
	k := &Sink{}
	m := k.Metrics(opametrics.New())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 100 {
				m.Counter(opaLogDropRateLimit).Incr()
				k.TurnAway()
				m.Counter(opaLogUploadFailed).Incr()
			}
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				_ = k.Health()
				k.Collect(make(chan prometheus.Metric, 16), m)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(800), k.Health().Dropped)
}
