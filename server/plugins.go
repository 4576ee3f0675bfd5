package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	bundleapi "github.com/open-policy-agent/opa/v1/bundle"
	opaconfig "github.com/open-policy-agent/opa/v1/config"
	"github.com/open-policy-agent/opa/v1/hooks"
	"github.com/open-policy-agent/opa/v1/logging"
	opametrics "github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/bundle"
	"github.com/open-policy-agent/opa/v1/plugins/discovery"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/policies"
)

// bundleTracker follows OPA's bundle plugin: which bundles are configured,
// which activation of each the engine has taken in, and why the last one
// was refused, if it was.
type bundleTracker struct {
	mu         sync.Mutex
	discovery  bool           // a discovery bundle names the bundles
	discovered bool           // … and one has been activated
	plugin     *bundle.Plugin // the bundle plugin our listener is on
	configured []string
	seen       map[string]time.Time // LastSuccessfulActivation taken in
	active     map[string]string    // OPA's active revision
	errs       map[string]string
	dataDir    string // bundle data of the serving state, for engine.PolicyPaths
	// lastOK is when a download request of the bundle last succeeded
	// (a new revision or "not modified"), or when the watch began;
	// stale holds the bundles whose server has not answered for longer
	// than staleAfter allows.
	lastOK map[string]time.Time
	stale  map[string]bool
}

// staleAfter is how long a bundle polled by OPA may go without a download
// request that succeeds before it shows as stale: three times its
// polling.max_delay_seconds (120 s by default), plus its
// long_polling_timeout_seconds. A bundle triggered by hand is never
// stale. A download that fails shows at once (BundleHealth.Error); this
// catches a bundle server that stops answering without failing (a
// download that hangs).
func staleAfter(bp *bundle.Plugin, name string) (time.Duration, bool) {
	src, ok := bp.Config().Bundles[name]
	if !ok || src == nil || (src.Trigger != nil && *src.Trigger == plugins.TriggerManual) {
		return 0, false
	}
	maxDelay := int64(120)
	if src.Polling.MaxDelaySeconds != nil {
		maxDelay = *src.Polling.MaxDelaySeconds
	}
	d := 3 * time.Duration(maxDelay) * time.Second
	if lp := src.Polling.LongPollingTimeoutSeconds; lp != nil {
		d += time.Duration(*lp) * time.Second
	}
	return d, true
}

// watchBundles looks every second, until stop is closed, for bundles
// whose server has stopped answering (staleAfter): each shows in
// /health (stale, with an error), in /metrics (policycheck_bundle_stale)
// and in a warning when it becomes stale, and again when its server
// answers; the last good revision keeps serving meanwhile.
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
// staleAfter as stale, as of now.
func (s *Server) checkStale(now time.Time) {
	b := &s.bundles
	b.mu.Lock()
	bp := b.plugin
	names := append([]string(nil), b.configured...)
	b.mu.Unlock()
	if bp == nil {
		return
	}
	for _, name := range names {
		limit, polled := staleAfter(bp, name)
		b.mu.Lock()
		last, ok := b.lastOK[name]
		if !ok {
			last = now
			b.lastOK[name] = now
		}
		stale := polled && now.Sub(last) > limit
		was := b.stale[name]
		b.stale[name] = stale
		b.mu.Unlock()
		if !stale && was {
			s.metrics.bundleStale(name, false) // no longer polled
		}
		if stale && !was {
			s.metrics.bundleStale(name, true)
			s.cfg.logger.Warn("bundle server not answering: no download has succeeded within the bundle's polling bound; the last good revision keeps serving",
				"bundle", name, "last_success", last.UTC().Format(time.RFC3339), "bound", limit.String())
		}
	}
}

// bundleAnswered records a download request of the bundle that succeeded.
func (s *Server) bundleAnswered(name string, at time.Time) {
	if at.IsZero() {
		at = time.Now()
	}
	b := &s.bundles
	b.mu.Lock()
	if b.lastOK == nil {
		b.mu.Unlock()
		return
	}
	b.lastOK[name] = at
	was := b.stale[name]
	delete(b.stale, name)
	b.mu.Unlock()
	s.metrics.bundleStale(name, false)
	if was {
		s.cfg.logger.Info("bundle server answering again", "bundle", name)
	}
}

func (b *bundleTracker) health(st *policyState) map[string]BundleHealth {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.configured) == 0 {
		return nil
	}
	out := map[string]BundleHealth{}
	for _, name := range b.configured {
		h := BundleHealth{Serving: st.served[name], Active: b.active[name], Error: b.errs[name], Stale: b.stale[name]}
		if last, ok := b.lastOK[name]; ok && h.Stale {
			h.LastSuccess = last.UTC().Format(time.RFC3339)
			if h.Error == "" {
				h.Error = "the bundle server has not answered since " + h.LastSuccess + "; the serving revision keeps serving"
			}
		}
		out[name] = h
	}
	return out
}

// unreadOptions are the options of OPA's configuration that OPA itself
// acts on but policycheck serve does not, with why: each is refused
// rather than ignored, as is any option OPA does not know.
var unreadOptions = map[string]string{
	"default_decision":               "policycheck serves its own endpoints, not OPA's data API",
	"default_authorization_decision": "policycheck authenticates with --token-file, not an authorization policy",
	"server":                         "OPA's HTTP server options do not apply: policycheck serve has its own flags",
	"storage":                        "policycheck keeps its store in memory",
	"caching":                        "the engine does not keep OPA's inter-query built-in cache",
	"nd_builtin_cache":               "the engine does not keep OPA's non-deterministic built-in cache",
	"distributed_tracing":            "policycheck does not export traces",
	"metrics_export":                 "policycheck exports its metrics at GET /metrics",
}

// checkOPAConfig refuses an OPA configuration with an option OPA would
// ignore (its validation reports each one, nested ones included: a
// misspelt "decision_log" would leave decision logging off without a
// word) or that policycheck does not act on (unreadOptions).
func checkOPAConfig(raw []byte, id string) error {
	c, err := opaconfig.ParseConfig(raw, id)
	if err != nil {
		return err
	}
	return checkParsedConfig(c)
}

// checkParsedConfig is checkOPAConfig for a configuration OPA has parsed
// (and so filled with its defaults, which are not options set).
func checkParsedConfig(c *opaconfig.Config) error {
	if len(c.Warnings) > 0 {
		return errors.New(strings.Join(c.Warnings, "; "))
	}
	set, err := encodedOptions(c)
	if err != nil {
		return err
	}
	defaults, err := opaconfig.ParseConfig([]byte(`{}`), c.Labels["id"])
	if err != nil {
		return err
	}
	unset, err := encodedOptions(defaults)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(set))
	for k, v := range set {
		if d, ok := unset[k]; !ok || string(d) != string(v) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if why, ok := unreadOptions[k]; ok {
			return fmt.Errorf("configuration option %q is not read by policycheck serve: %s", k, why)
		}
	}
	return nil
}

// encodedOptions is a parsed configuration's top-level options, encoded.
func encodedOptions(c *opaconfig.Config) (map[string]json.RawMessage, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	return top, json.Unmarshal(raw, &top)
}

// discoveredConfig holds a configuration that a discovery bundle
// delivers to what checkOPAConfig holds the file's to: an option OPA
// would ignore (which OPA only logs as a warning) or that policycheck
// does not act on is refused. The discovery plugin then reports the
// error (GET /health, /metrics), and the configuration in place stays.
type discoveredConfig struct{}

func (discoveredConfig) OnConfigDiscovery(_ context.Context, c *opaconfig.Config) (*opaconfig.Config, error) {
	if err := checkParsedConfig(c); err != nil {
		return nil, fmt.Errorf("discovered configuration: %w", err)
	}
	return c, nil
}

// newManager creates OPA's plugin manager from the configuration file and
// the plugins it names (bundle, decision_logs, status, discovery), as OPA
// itself does, through the discovery plugin.
func (s *Server) newManager() error {
	id := s.cfg.opaID
	if id == "" {
		id = "policycheck"
	}
	if err := checkOPAConfig(s.cfg.opaConfig, id); err != nil {
		return err
	}
	raw, err := boundDecisionLogs(s.cfg.opaConfig)
	if err != nil {
		return err
	}
	s.logSink.logger = s.cfg.logger
	s.opaMetrics = &sinkMetrics{Metrics: opametrics.New(), sink: &s.logSink}
	mgr, err := plugins.New(raw, id, inmem.New(),
		plugins.Logger(opaLogger{l: s.cfg.logger}),
		plugins.ConsoleLogger(opaLogger{l: s.cfg.logger}),
		plugins.WithParserOptions(ast.ParserOptions{ProcessAnnotation: true, RegoVersion: ast.RegoV1}),
	)
	if err != nil {
		return err
	}
	if s.usesDefaults {
		if err := seedDefaults(mgr.Store); err != nil {
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
		discovery.Hooks(hooks.New(discoveredConfig{})))
	if err != nil {
		return err
	}
	mgr.Register(discovery.Name, d)
	s.mgr = mgr
	s.bundles.seen = map[string]time.Time{}
	s.bundles.active = map[string]string{}
	s.bundles.errs = map[string]string{}
	s.bundles.lastOK = map[string]time.Time{}
	s.bundles.stale = map[string]bool{}
	if _, ok := boot["discovery"]; ok {
		// The bundles (and the bundle plugin itself) come with the
		// discovery bundle: follow each of its activations.
		s.bundles.discovery = true
		d.RegisterListener("policycheck", s.onDiscovery)
	}
	s.attachBundles()
	return nil
}

// defaultLogBuffer bounds the decision-log buffer of a configuration that
// sets no bound: OPA's size buffer is unbounded by default, so a log
// service that is down would otherwise hold every decision in memory.
const defaultLogBuffer = 32 << 20

// boundDecisionLogs returns the OPA configuration raw with the decision
// log's buffer bounded (reporting.buffer_size_limit_bytes =
// defaultLogBuffer) when it configures decision logs on the size buffer
// with neither a byte bound nor a rate limit (which OPA does not accept
// together with one). The event buffer is bounded by OPA already.
func boundDecisionLogs(raw []byte) ([]byte, error) {
	var cfg map[string]any
	if err := util.Unmarshal(raw, &cfg); err != nil {
		return nil, err
	}
	dl, ok := cfg["decision_logs"].(map[string]any)
	if !ok {
		return raw, nil
	}
	rep, ok := dl["reporting"].(map[string]any)
	if !ok {
		rep = map[string]any{}
		dl["reporting"] = rep
	}
	if rep["buffer_type"] == "event" || rep["buffer_size_limit_bytes"] != nil || rep["max_decisions_per_second"] != nil {
		return raw, nil
	}
	rep["buffer_size_limit_bytes"] = defaultLogBuffer
	return json.Marshal(cfg)
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
	var names []string
	for name := range bp.Config().Bundles {
		names = append(names, name)
	}
	sort.Strings(names)
	b := &s.bundles
	b.mu.Lock()
	b.configured = names
	fresh := b.plugin != bp
	b.plugin = bp
	b.mu.Unlock()
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
	ctx := context.Background()
	store := s.mgr.Store
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return
	}
	active := map[string]string{}
	for _, name := range names {
		if rev, err := bundleapi.ReadBundleRevisionFromStore(ctx, store, txn, name); err == nil {
			active[name] = rev
		}
	}
	store.Abort(ctx, txn)
	for name, rev := range active {
		s.bundles.mu.Lock()
		_, seen := s.bundles.seen[name]
		s.bundles.mu.Unlock()
		if !seen {
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
		s.cfg.logger.Warn("discovery bundle not taken in", "error", strings.TrimPrefix(msg, "; "))
		return
	}
	if status.LastSuccessfulActivation.IsZero() {
		return
	}
	s.metrics.bundleResult(discovery.Name, false)
	s.bundles.mu.Lock()
	s.bundles.discovered = true
	s.bundles.mu.Unlock()
	s.attachBundles()
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	// Readiness follows the bundles discovery configured (see
	// onBundleStatus).
	if old := s.state.Load(); !old.ready && s.bundles.allServed(old) {
		st := *old
		st.ready = true
		s.state.Store(&st)
	}
}

// allServed reports whether st serves every configured bundle (and,
// with discovery, whether the discovery bundle has been activated).
func (b *bundleTracker) allServed(st *policyState) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.discovery && !b.discovered {
		return false
	}
	for _, c := range b.configured {
		if _, ok := st.served[c]; !ok {
			return false
		}
	}
	return true
}

// defaultsPrefix names the shipped policies in the plugin manager's store.
const defaultsPrefix = "policycheck-defaults/"

// seedDefaults writes the shipped policies into the plugin manager's
// store, so that OPA's bundle plugin compiles a bundle against them: a
// bundle's filter may then call the shipped library (lib.names, …), which
// OPA would otherwise refuse as an undefined function. The engine loads
// them itself, so storePolicies leaves them out.
func seedDefaults(store storage.Store) error {
	ctx := context.Background()
	return storage.Txn(ctx, store, storage.WriteParams, func(txn storage.Transaction) error {
		return fs.WalkDir(policies.FS(), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || path.Ext(p) != ".rego" || strings.HasSuffix(p, "_test.rego") {
				return err
			}
			raw, err := fs.ReadFile(policies.FS(), p)
			if err != nil {
				return err
			}
			return store.UpsertPolicy(ctx, txn, defaultsPrefix+p, raw)
		})
	})
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
	b := &s.bundles
	b.mu.Lock()
	last := b.seen[name]
	b.mu.Unlock()
	if status.LastSuccessfulActivation.IsZero() || status.LastSuccessfulActivation.Equal(last) {
		return
	}
	ctx := context.Background()
	extra, dir, err := s.storePolicies(ctx)
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
	st.ready = old.ready || b.allServed(st)
	if err := s.compileState(ctx, st); err != nil {
		if dir != "" {
			os.RemoveAll(dir)
		}
		b.mu.Lock()
		b.seen[name] = status.LastSuccessfulActivation
		b.active[name] = status.ActiveRevision
		b.mu.Unlock()
		s.bundleFailed(name, fmt.Sprintf("revision %q refused, still serving %q: %v", status.ActiveRevision, old.served[name], err))
		return
	}
	s.state.Store(st)
	s.engines.Clear()
	s.metrics.setRevision(st)
	s.metrics.bundleResult(name, false)
	b.mu.Lock()
	b.seen[name] = status.LastSuccessfulActivation
	b.active[name] = status.ActiveRevision
	delete(b.errs, name)
	oldDir := b.dataDir
	b.dataDir = dir
	b.mu.Unlock()
	if oldDir != "" {
		os.RemoveAll(oldDir)
	}
	s.cfg.logger.Info("bundle activated", "bundle", name, "revision", status.ActiveRevision, "policy_revision", st.rev)
}

func (s *Server) bundleFailed(name, msg string) {
	s.bundles.mu.Lock()
	s.bundles.errs[name] = msg
	s.bundles.mu.Unlock()
	s.metrics.bundleResult(name, true)
	s.cfg.logger.Warn("bundle not taken in", "bundle", name, "error", msg)
}

// storePolicies reads the policies and data that OPA's bundle plugin
// activated into the manager's store: every module (tests excluded) as an
// engine source named by its policy id, and the data (but OPA's own
// data.system) written to a temporary directory for engine.PolicyPaths.
func (s *Server) storePolicies(ctx context.Context) ([]engine.Option, string, error) {
	store := s.mgr.Store
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, "", err
	}
	defer store.Abort(ctx, txn)
	ids, err := store.ListPolicies(ctx, txn)
	if err != nil {
		return nil, "", err
	}
	sort.Strings(ids)
	var srcs []engine.Source
	for _, id := range ids {
		if strings.HasSuffix(id, "_test.rego") || strings.HasPrefix(id, defaultsPrefix) {
			continue
		}
		raw, err := store.GetPolicy(ctx, txn, id)
		if err != nil {
			return nil, "", err
		}
		srcs = append(srcs, engine.Source{File: id, Text: string(raw)})
	}
	opts := []engine.Option{engine.Modules(srcs...)}
	v, err := store.Read(ctx, txn, storage.RootPath)
	if err != nil {
		return nil, "", err
	}
	if av, ok := v.(ast.Value); ok {
		if v, err = ast.JSON(av); err != nil {
			return nil, "", err
		}
	}
	// The store hands out its own map: copy it, never modify it.
	root, _ := v.(map[string]any)
	data := make(map[string]any, len(root))
	for k, x := range root {
		if k != "system" {
			data[k] = x
		}
	}
	if len(data) == 0 {
		return opts, "", nil
	}
	dir, err := os.MkdirTemp("", "policycheck-bundle-data-")
	if err != nil {
		return nil, "", err
	}
	raw, err := json.Marshal(data)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "data.json"), raw, 0o600)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	return append(opts, engine.PolicyPaths(dir)), dir, nil
}

// cleanup removes the bundle data directory.
func (s *Server) cleanup() {
	s.bundles.mu.Lock()
	dir := s.bundles.dataDir
	s.bundles.dataDir = ""
	s.bundles.mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// opaLogger adapts slog to OPA's logging.Logger.
type opaLogger struct {
	l      *slog.Logger
	fields []any
}

func (o opaLogger) log(level slog.Level, format string, a ...any) {
	if o.l.Enabled(context.Background(), level) {
		o.l.Log(context.Background(), level, fmt.Sprintf(format, a...), o.fields...)
	}
}

func (o opaLogger) Debug(f string, a ...any) { o.log(slog.LevelDebug, f, a...) }
func (o opaLogger) Info(f string, a ...any)  { o.log(slog.LevelInfo, f, a...) }
func (o opaLogger) Warn(f string, a ...any)  { o.log(slog.LevelWarn, f, a...) }
func (o opaLogger) Error(f string, a ...any) { o.log(slog.LevelError, f, a...) }

func (o opaLogger) WithFields(m map[string]any) logging.Logger {
	out := opaLogger{l: o.l, fields: append([]any(nil), o.fields...)}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.fields = append(out.fields, k, m[k])
	}
	return out
}

func (o opaLogger) GetLevel() logging.Level {
	ctx := context.Background()
	switch {
	case o.l.Enabled(ctx, slog.LevelDebug):
		return logging.Debug
	case o.l.Enabled(ctx, slog.LevelInfo):
		return logging.Info
	case o.l.Enabled(ctx, slog.LevelWarn):
		return logging.Warn
	}
	return logging.Error
}

func (o opaLogger) SetLevel(logging.Level) {}
