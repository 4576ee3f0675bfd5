package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/output/replay"
)

var errShadowNeedsRegistry = errors.New("a shadow policy needs the server's registry (--registry): it decides what the enforced policy decides with that registry")

// shadow is the shadow policy's worker and its counters; the policy
// itself is in each policyState (shadowPolicy), swapped with the enforced
// one by Reload.
type shadow struct {
	jobs chan shadowJob
	quit chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	// ctx is cancelled when the time shutdown gives the queue is over:
	// the decision being shadowed is abandoned, and those still queued
	// are dropped.
	ctx    context.Context
	cancel context.CancelFunc
	// queued is the bytes of the queued decisions' requests, bounded by
	// maxBytes.
	queued   atomic.Int64
	maxBytes int64
	lost     atomic.Int64 // decisions dropped at shutdown

	decisions     prometheus.Counter
	dropped       *prometheus.CounterVec
	skipped       prometheus.Counter
	errors        prometheus.Counter
	disagreements *prometheus.CounterVec
	duration      prometheus.Histogram
}

// shadowPolicy is the shadow policy compiled for the configured registry.
type shadowPolicy struct {
	eng *engine.Engine
	rev string // the candidate's policy revision
	reg string // the registry revision it decides with
}

// revision is the candidate's policy and registry revisions; "" for none.
func (p *shadowPolicy) revision() string {
	if p == nil {
		return ""
	}
	return p.rev + "/" + p.reg
}

// compileShadow compiles the shadow policy (its options, which read its
// files again) for reg.
func (s *Server) compileShadow(ctx context.Context, reg *facts.Registry) (*shadowPolicy, error) {
	opts := []engine.Option{engine.PolicyPaths(s.cfg.ShadowPolicies...), engine.DecisionCache(s.cfg.DecisionCache),
		engine.FlowMinLength(s.cfg.FlowMinLength), engine.FlowIndexCap(s.cfg.FlowIndexCap), engine.FlowTokens(s.cfg.FlowTokens)}
	if s.cfg.NoDefaults {
		opts = append(opts, engine.WithoutDefaults())
	}
	eng, err := engine.New(ctx, append(opts, engine.Registry(reg))...)
	if err != nil {
		return nil, err
	}
	p := &shadowPolicy{eng: eng}
	p.rev, p.reg = eng.Revision()
	return p, nil
}

// shadowJob is one enforced decision waiting for its shadow.
type shadowJob struct {
	id       string // the decision log event's id
	d        *engine.Decision
	ctxDoc   any
	endpoint string
	run      string
	messages int
	remote   string
	st       *policyState
	size     int64 // the request body's bytes
}

// newShadow compiles the shadow policy into st, New's first state, and
// starts its worker.
func (s *Server) newShadow(ctx context.Context, st *policyState) error {
	if len(s.cfg.ShadowPolicies) == 0 {
		return nil
	}
	if st.reg == nil {
		return errShadowNeedsRegistry
	}
	var err error
	if st.shadow, err = s.compileShadow(ctx, st.reg); err != nil {
		return err
	}
	sh := &shadow{jobs: make(chan shadowJob, s.cfg.ShadowQueue), quit: make(chan struct{}), maxBytes: s.cfg.ShadowQueueBytes}
	sh.ctx, sh.cancel = context.WithCancel(context.Background())
	sh.decisions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "policycheck_shadow_decisions_total", Help: "Enforced decisions the shadow policy decided again.",
	})
	sh.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_shadow_dropped_total",
		Help: "Decisions not shadowed, by reason: queue_full (--shadow-queue decisions wait), queue_bytes (their requests hold --shadow-queue-bytes), shutdown (still queued when the shutdown grace ran out; not logged either).",
	}, []string{"reason"})
	for _, r := range []string{dropQueueFull, dropQueueBytes, dropShutdown} {
		sh.dropped.WithLabelValues(r)
	}
	sh.skipped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "policycheck_shadow_skipped_total", Help: "Decisions not shadowed because the request carried its own registry.",
	})
	sh.errors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "policycheck_shadow_errors_total", Help: "Shadow decisions that returned an error.",
	})
	sh.disagreements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "policycheck_shadow_disagreements_total",
		Help: "Differences between the shadow and the enforced decision, by kind (call, available, advertised, fail_closed, would_deny, would_hide) and transition (ENFORCED->SHADOW).",
	}, []string{"kind", "transition"})
	sh.duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "policycheck_shadow_duration_seconds", Help: "Time the shadow policy took per decision (off the answer's path).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	})
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "policycheck_shadow_queue_bytes", Help: "Bytes of request bodies the decisions waiting for the shadow policy hold (bounded by --shadow-queue-bytes).",
	}, func() float64 { return float64(sh.queued.Load()) })
	s.metrics.reg.MustRegister(sh.decisions, sh.dropped, sh.skipped, sh.errors, sh.disagreements, sh.duration, queued)
	s.shadow = sh
	sh.wg.Add(1)
	go s.shadowWorker(sh)
	return nil
}

// Reasons a decision is not shadowed (policycheck_shadow_dropped_total).
const (
	dropQueueFull  = "queue_full"
	dropQueueBytes = "queue_bytes"
	dropShutdown   = "shutdown"
)

// shadowed hands an enforced decision to the shadow worker, which logs
// it; it returns false (the caller logs) when there is no shadow, the
// decision's registry is not the shadow's, or the queue is full (by
// count, or by the bytes of its requests: size is this request's). The
// decision is shadowed by the shadow policy of st, the state it was made
// with.
func (s *Server) shadowed(remote, id, endpoint, run string, st *policyState, d *engine.Decision, ctxDoc any, messages int, size int64) bool {
	sh := s.shadow
	if sh == nil || st.shadow == nil {
		return false
	}
	if d.RegistryRevision != st.shadow.reg {
		sh.skipped.Inc()
		return false
	}
	if !sh.reserve(size) {
		sh.dropped.WithLabelValues(dropQueueBytes).Inc()
		return false
	}
	select {
	case sh.jobs <- shadowJob{id: id, d: d, ctxDoc: ctxDoc, endpoint: endpoint, run: run, messages: messages, remote: remote, st: st, size: size}:
		return true
	default:
		sh.queued.Add(-size)
		sh.dropped.WithLabelValues(dropQueueFull).Inc()
		return false
	}
}

// reserve counts size bytes into the queue, unless they would take it
// past its bound; an empty queue takes a decision of any size.
func (sh *shadow) reserve(size int64) bool {
	for {
		q := sh.queued.Load()
		if q > 0 && q+size > sh.maxBytes {
			return false
		}
		if sh.queued.CompareAndSwap(q, q+size) {
			return true
		}
	}
}

// dropAtShutdown counts a decision shutdown left no time to shadow.
func (sh *shadow) dropAtShutdown() {
	sh.lost.Add(1)
	sh.dropped.WithLabelValues(dropShutdown).Inc()
}

func (s *Server) shadowWorker(sh *shadow) {
	defer sh.wg.Done()
	for {
		select {
		case j := <-sh.jobs:
			s.shadowOne(sh, j)
		case <-sh.quit:
			// Shutdown: the queued decisions, while the time given
			// them lasts; then those left are dropped.
			for {
				select {
				case j := <-sh.jobs:
					if sh.ctx.Err() != nil {
						sh.queued.Add(-j.size)
						sh.dropAtShutdown()
						continue
					}
					s.shadowOne(sh, j)
				default:
					return
				}
			}
		}
	}
}

// shadowOne decides one job with the shadow policy, counts the
// differences and logs the enforced decision with them.
func (s *Server) shadowOne(sh *shadow, j shadowJob) {
	defer sh.queued.Add(-j.size)
	start := time.Now()
	ctx, cancel := context.WithTimeout(sh.ctx, s.cfg.Timeout)
	defer cancel()
	var info map[string]any
	sp := j.st.shadow
	cd, err := sp.eng.Decide(ctx, engine.Request{Facts: j.d.FactsUsed(), Context: j.ctxDoc})
	if sh.ctx.Err() != nil {
		// Shutdown's time for the queue ran out while it decided.
		sh.dropAtShutdown()
		return
	}
	sh.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		sh.errors.Inc()
		info = map[string]any{"policy_revision": sp.rev, "error": err.Error()}
	} else {
		sh.decisions.Inc()
		changes := replay.Compare(j.run, j.messages-1, j.d, cd)
		for _, c := range changes {
			sh.disagreements.WithLabelValues(c.Kind, c.Transition).Inc()
		}
		if changes == nil {
			changes = []replay.Change{}
		}
		info = map[string]any{"policy_revision": sp.rev, "fingerprint": cd.Fingerprint, "agrees": len(changes) == 0, "changes": changes}
	}
	s.logEvent(context.Background(), j.remote, j.id, j.endpoint, j.run, j.st, j.d, j.ctxDoc, j.messages, info)
}

// stopShadow lets the worker finish the queued decisions (their logs go
// out before the decision-log plugin stops) until ctx is done, and stops
// it: the decisions still queued then are dropped, neither shadowed nor
// logged, and counted (policycheck_shadow_dropped_total{reason="shutdown"}).
func (s *Server) stopShadow(ctx context.Context) {
	sh := s.shadow
	if sh == nil {
		return
	}
	sh.once.Do(func() { close(sh.quit) })
	done := make(chan struct{})
	go func() { sh.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		sh.cancel()
		<-done
		s.cfg.Logger.Warn("shadow decisions dropped at shutdown: the shutdown grace ran out before the shadow queue was decided",
			"dropped", sh.lost.Load())
	}
	sh.cancel()
}
