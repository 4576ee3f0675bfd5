package server

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/hooks"
	opametrics "github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/bundle"
	"github.com/open-policy-agent/opa/v1/plugins/discovery"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/policycheck/policycheck/server/internal/opaplugins"
)

// watchBundles looks every second, until stop is closed, for bundles
// whose server has stopped answering (opaplugins.Bundles.CheckStale):
// each shows in /health (stale, with an error), in /metrics
// (policycheck_bundle_stale) and in a warning when it becomes stale, and
// again when its server answers; the last good revision keeps serving
// meanwhile.
func (s *Server) watchBundles(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.checkStale(time.Now())
		}
	}
}

// checkStale marks the bundles that have gone without an answer past
// their bound (opaplugins.Bundles.CheckStale) as stale, as of now.
func (s *Server) checkStale(now time.Time) {
	s.bundles.CheckStale(now, func(c opaplugins.StaleChange) {
		s.metrics.bundleStale(c.Name, c.Stale) // false: no longer polled
		if c.Stale {
			s.cfg.Logger.Warn("bundle server not answering: no download has succeeded within the bundle's polling bound; the last good revision keeps serving",
				"bundle", c.Name, "last_success", c.Last.UTC().Format(time.RFC3339), "bound", c.Bound.String())
		}
	})
}

// bundleAnswered records a download request of the bundle that succeeded.
func (s *Server) bundleAnswered(name string, at time.Time) {
	tracked, was := s.bundles.Answered(name, at)
	if !tracked {
		return
	}
	s.metrics.bundleStale(name, false)
	if was {
		s.cfg.Logger.Info("bundle server answering again", "bundle", name)
	}
}

// newManager creates OPA's plugin manager from the configuration file and
// the plugins it names (bundle, decision_logs, status, discovery), as OPA
// itself does, through the discovery plugin.
func (s *Server) newManager() error {
	id := s.cfg.ID
	if id == "" {
		id = "policycheck"
	}
	if err := opaplugins.CheckConfig(s.cfg.OPAConfig, id); err != nil {
		return err
	}
	raw, err := opaplugins.BoundDecisionLogs(s.cfg.OPAConfig)
	if err != nil {
		return err
	}
	s.logSink.Logger = s.cfg.Logger
	s.opaMetrics = s.logSink.Metrics(opametrics.New())
	mgr, err := plugins.New(raw, id, inmem.New(),
		plugins.Logger(opaplugins.NewLogger(s.cfg.Logger)),
		plugins.ConsoleLogger(opaplugins.NewLogger(s.cfg.Logger)),
		plugins.WithParserOptions(ast.ParserOptions{ProcessAnnotation: true, RegoVersion: ast.RegoV1}),
	)
	if err != nil {
		return err
	}
	if s.usesDefaults {
		if err := opaplugins.SeedDefaults(mgr.Store); err != nil {
			return err
		}
	}
	var boot map[string]any
	if err := util.Unmarshal(raw, &boot); err != nil {
		return err
	}
	// The plugins discovery builds (decision logs, status) count into
	// opaMetrics: drops and upload failures reach /metrics from there.
	d, err := discovery.New(mgr, discovery.BootConfig(boot), discovery.Metrics(s.opaMetrics),
		discovery.Hooks(hooks.New(opaplugins.DiscoveredConfig{})))
	if err != nil {
		return err
	}
	mgr.Register(discovery.Name, d)
	s.mgr = mgr
	_, viaDiscovery := boot["discovery"]
	s.bundles.Init(viaDiscovery)
	if viaDiscovery {
		// The bundles (and the bundle plugin itself) come with the
		// discovery bundle: follow each of its activations.
		d.RegisterListener("policycheck", s.onDiscovery)
	}
	s.attachBundles()
	return nil
}

// attachBundles follows the bundle plugin the manager holds now: the
// bundles it is configured with, and our listener on it. Configured in
// the file, the plugin exists from the start; configured by a discovery
// bundle, it appears, and its bundles change, when one activates. A
// bundle the plugin activated before our listener was on it (a bundle
// persisted on disk is activated as the plugin starts) is taken in from
// the store.
func (s *Server) attachBundles() {
	bp := bundle.Lookup(s.mgr)
	if bp == nil {
		return
	}
	names, fresh := s.bundles.Attach(bp)
	if !fresh {
		return
	}
	bp.Register("policycheck", s.onBundleStatus)
	if s.started.Load() {
		s.catchUp(names)
	}
}

// catchUp takes in the bundles among names that OPA has activated but the
// server has not seen.
func (s *Server) catchUp(names []string) {
	for name, rev := range opaplugins.ActiveRevisions(s.mgr.Store, names) {
		if !s.bundles.Seen(name) {
			s.onBundleStatus(bundle.Status{Name: name, ActiveRevision: rev, LastSuccessfulActivation: time.Now()})
		}
	}
}

// onDiscovery runs after each download and activation attempt of the
// discovery bundle.
func (s *Server) onDiscovery(status bundle.Status) {
	if status.Code != "" || len(status.Errors) > 0 {
		msg := status.Message
		for _, e := range status.Errors {
			msg += "; " + e.Error()
		}
		s.metrics.bundleResult(discovery.Name, true)
		s.cfg.Logger.Warn("discovery bundle not taken in", "error", strings.TrimPrefix(msg, "; "))
		return
	}
	if status.LastSuccessfulActivation.IsZero() {
		return
	}
	s.metrics.bundleResult(discovery.Name, false)
	s.bundles.Discovered()
	s.attachBundles()
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	// Readiness follows the bundles discovery configured (see
	// onBundleStatus).
	if old := s.state.Load(); !old.ready && s.bundles.AllServed(old.served) {
		st := *old
		st.ready = true
		s.state.Store(&st)
	}
}

func (s *Server) startManager(ctx context.Context) error {
	if err := s.mgr.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	s.watchStop = make(chan struct{})
	s.watchDone.Add(1)
	go func() {
		defer s.watchDone.Done()
		s.watchBundles(s.watchStop)
	}()
	return nil
}

// onBundleStatus runs after each bundle download and activation attempt.
// A new activation is compiled into a new policy state, swapped in
// atomically; when the engine refuses it, the last good state keeps
// serving and the refusal shows in /health and /metrics.
func (s *Server) onBundleStatus(status bundle.Status) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	name := status.Name
	if status.Code != "" || len(status.Errors) > 0 {
		msg := status.Message
		for _, e := range status.Errors {
			msg += "; " + e.Error()
		}
		s.bundleFailed(name, "bundle refused by OPA: "+strings.TrimPrefix(msg, "; "))
		return
	}
	s.bundleAnswered(name, status.LastSuccessfulRequest)
	if status.LastSuccessfulActivation.IsZero() || status.LastSuccessfulActivation.Equal(s.bundles.LastActivation(name)) {
		return
	}
	ctx := context.Background()
	extra, dir, err := opaplugins.StorePolicies(ctx, s.mgr.Store)
	if err != nil {
		s.bundleFailed(name, "reading the activated bundle: "+err.Error())
		return
	}
	old := s.state.Load()
	st := &policyState{gen: old.gen + 1, extra: extra, reg: old.reg, shadow: old.shadow, served: map[string]string{}, ready: true}
	for k, v := range old.served {
		st.served[k] = v
	}
	st.served[name] = status.ActiveRevision
	// Ready once every configured bundle is served, and ready from then
	// on: a bundle that discovery adds later shows in /health as not yet
	// served, while decisions go on with the policies in place.
	st.ready = old.ready || s.bundles.AllServed(st.served)
	if err := s.compileState(ctx, st); err != nil {
		if dir != "" {
			os.RemoveAll(dir)
		}
		s.bundles.Refused(name, status.LastSuccessfulActivation, status.ActiveRevision)
		s.bundleFailed(name, fmt.Sprintf("revision %q refused, still serving %q: %v", status.ActiveRevision, old.served[name], err))
		return
	}
	s.state.Store(st)
	s.engines.Clear()
	s.metrics.setRevision(st)
	s.metrics.bundleResult(name, false)
	if oldDir := s.bundles.Activated(name, status.LastSuccessfulActivation, status.ActiveRevision, dir); oldDir != "" {
		os.RemoveAll(oldDir)
	}
	s.cfg.Logger.Info("bundle activated", "bundle", name, "revision", status.ActiveRevision, "policy_revision", st.rev)
}

func (s *Server) bundleFailed(name, msg string) {
	s.bundles.Failed(name, msg)
	s.metrics.bundleResult(name, true)
	s.cfg.Logger.Warn("bundle not taken in", "bundle", name, "error", msg)
}

// cleanup removes the bundle data directory.
func (s *Server) cleanup() {
	if dir := s.bundles.TakeDataDir(); dir != "" {
		os.RemoveAll(dir)
	}
}
