package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	opametrics "github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/plugins"
	"golang.org/x/sync/singleflight"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/lru"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server/internal/opaplugins"
)

// OPAConfigError is New's error for an OPA configuration (Config.OPAConfig)
// that does not load: malformed, an option OPA does not know, or one
// policycheck does not act on.
type OPAConfigError struct{ Err error }

func (e *OPAConfigError) Error() string { return "opa config: " + e.Err.Error() }
func (e *OPAConfigError) Unwrap() error { return e.Err }

// Server is the HTTP sidecar. It is safe for concurrent use.
type Server struct {
	cfg     Config
	now     func() time.Time
	state   atomic.Pointer[policyState]
	engines *lru.Cache[*engine.Engine]
	// compiling makes concurrent requests with one new registry share a
	// compilation (see registryEngine).
	compiling  singleflight.Group
	runs       *runTable
	spent      *spentApprovals // with ApproverKeys: the approval signatures applied
	intake     *intake
	metrics    *metrics
	handler    http.Handler
	diagnostic http.Handler // /health and /metrics only

	mgr *plugins.Manager // nil without an OPA configuration
	// opaMetrics is what OPA's plugins count (decision-log drops and
	// uploads); nil without an OPA configuration.
	opaMetrics opametrics.Metrics
	reloadMu   sync.Mutex // serializes bundle activations
	bundles    opaplugins.Bundles
	started    atomic.Bool
	// usesDefaults says whether the engines load the shipped policies.
	usesDefaults bool
	stopOnce     sync.Once
	shadow       *shadow // the shadow policy, when configured
	// lastReload is the outcome of the last Reload, for /health; nil
	// before the first.
	lastReload atomic.Pointer[ReloadHealth]
	// lastKeyReload is the outcome of the last reload of the receipt
	// key (ReceiptKeyReloaded), for /health; nil before the first.
	lastKeyReload atomic.Pointer[KeyReloadHealth]
	logSink       opaplugins.Sink // the decision-log sink's state
	// watchStop stops the bundle watch (watchBundles) that Start starts.
	watchStop chan struct{}
	watchDone sync.WaitGroup
}

// policyState is the immutable policy state requests decide with.
type policyState struct {
	gen   uint64
	extra []engine.Option // policies from activated bundles
	// reg is the configured registry (Config.Registry, or Reload's
	// ReplaceRegistry): requests without their own decide with it. Nil
	// without one.
	reg    *facts.Registry
	eng    *engine.Engine    // the engine of reg, if any
	rev    string            // policy revision
	shadow *shadowPolicy     // the shadow policy compiled for reg, when configured
	served map[string]string // bundle name → revision being served
	ready  bool
	// inv is what the policies define, to tell what a reload drops.
	inv engine.Inventory
}

// New builds a server from cfg (start from DefaultConfig): it refuses a
// configuration Validate refuses, compiles the policies against the
// configured registry (if any) and, with an OPA configuration, creates the
// plugin manager (started by Start or Serve).
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Limits.MaxBytes == 0 || cfg.Limits.MaxBytes > cfg.MaxBody {
		cfg.Limits.MaxBytes = cfg.MaxBody
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, now: time.Now}
	if !cfg.noEngineCache {
		s.engines = lru.New[*engine.Engine](cfg.EngineCache, 0, s.now)
	}
	s.runs = newRunTable(cfg.Runs, cfg.RunTTL, s.now)
	if cfg.ApproverKeys != nil {
		s.spent = newSpentApprovals(s.now)
	}
	s.intake = &intake{maxBody: cfg.MaxBody, bodyTimeout: cfg.BodyTimeout,
		reader: loader.Reader{Limits: cfg.Limits, Schema: cfg.Schema}, prefixes: newPrefixCache(prefixCacheBytes(cfg), cfg.admitFirstSight),
		recycle: cfg.OPAConfig == nil && len(cfg.ShadowPolicies) == 0 && !cfg.noRecycle, poison: cfg.poisonBodies,
		bodies: &bodyPool{max: poolBytes, idle: poolIdle}}
	s.metrics = newMetrics(s)
	st := &policyState{reg: cfg.Registry, served: map[string]string{}, ready: true}
	if err := s.compileState(context.Background(), st); err != nil {
		// Without the shipped policies, the availability policy may
		// come with a bundle: the server then starts not ready.
		if cfg.OPAConfig == nil || !onlyMissingEntrypoint(err) {
			return nil, err
		}
	}
	if err := s.newShadow(context.Background(), st); err != nil {
		return nil, fmt.Errorf("shadow policy: %w", err)
	}
	if cfg.OPAConfig != nil {
		if err := s.newManager(); err != nil {
			return nil, &OPAConfigError{Err: err}
		}
		// Not ready until every configured bundle is served.
		st.ready = s.bundles.AllServed(st.served)
	}
	s.state.Store(st)
	s.metrics.setRevision(st)
	s.routes()
	return s, nil
}

// unknownRevision is the policy revision of a server without a registry
// whose policies hold filters for capabilities only requests' registries
// declare: they compile against each request's registry.
const unknownRevision = "unknown"

// Reload reads the policies again (the files and bundles that
// Config.Policies and Config.Engine name, with the OPA bundles' policies
// in place) and the shadow policy's (Config.ShadowPolicies), and with
// ReplaceRegistry takes a new configured registry. When they compile and differ from those serving,
// it swaps them in for the requests that follow, together, as a bundle
// activation does: requests in flight finish on the state they started
// with, runs decide their next step with the new one, and engines
// compiled for requests' registries are compiled again. When any of them
// does not compile (the shadow policy included: a shadow compared with
// another registry or policies than the enforced ones would report
// differences that are not the candidate's), Reload refuses them all with
// the error, and the state in place keeps serving.
//
// Policies that compile but drop a package or a rule the serving ones
// define (a guard file deleted, a package renamed, one of several
// definitions of a rule removed: engine.Inventory.Dropped) are refused
// with a *DroppedError, unless AllowDrops is given: then they are
// swapped in and the server logs a warning naming what they drop. Either
// way the drop is counted in /metrics (policycheck_policy_reload_drops_total)
// and shown in /health's last_reload.
//
// It reports whether it swapped. Safe for concurrent use.
func (s *Server) Reload(ctx context.Context, opts ...ReloadOption) (swapped bool, err error) {
	var rc reloadConfig
	for _, o := range opts {
		o(&rc)
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	old := s.state.Load()
	st := &policyState{gen: old.gen + 1, extra: old.extra, reg: old.reg, served: maps.Clone(old.served), ready: old.ready}
	var dropped *DroppedError
	defer func() {
		h := &ReloadHealth{Result: "swapped"}
		switch {
		case err != nil:
			h.Result, h.Error = "refused", err.Error()
		case !swapped:
			h.Result = "unchanged"
		}
		if dropped != nil {
			h.DroppedPackages, h.DroppedRules = slices.Clone(dropped.Packages), slices.Clone(dropped.Rules)
			s.metrics.reloadDrops(h.Result)
		}
		s.metrics.reload(h.Result)
		s.lastReload.Store(h)
	}()
	if rc.registry != nil {
		st.reg, err = rc.registry()
		if err == nil && st.reg == nil {
			err = errors.New("the registry is nil")
		}
		if err != nil {
			return false, fmt.Errorf("registry: %w", err)
		}
	}
	err = s.compileState(ctx, st)
	if err == nil && len(s.cfg.ShadowPolicies) > 0 {
		if st.shadow, err = s.compileShadow(ctx, st.reg); err != nil {
			err = fmt.Errorf("shadow policy: %w", err)
		}
	}
	if err != nil {
		return false, err
	}
	if pkgs, rules := old.inv.Dropped(st.inv); len(pkgs)+len(rules) > 0 {
		dropped = &DroppedError{Packages: pkgs, Rules: rules}
		if !rc.allowDrops {
			return false, dropped
		}
		s.cfg.Logger.Warn("reloaded policies that drop packages or rules the last ones defined: what they guarded is no longer checked",
			"packages", pkgs, "rules", rules)
	}
	if st.rev == old.rev && st.rev != unknownRevision && registryRevision(st) == registryRevision(old) &&
		st.shadow.revision() == old.shadow.revision() {
		return false, nil
	}
	s.state.Store(st)
	s.engines.Clear()
	s.metrics.setRevision(st)
	return true, nil
}

// DroppedError is Reload's refusal of policies that drop packages or
// rules the serving policies define (engine.Inventory.Dropped), without
// AllowDrops: the serving policies keep deciding.
type DroppedError struct {
	Packages []string // packages no longer defined
	Rules    []string // rules no longer defined, or defined fewer times
}

func (e *DroppedError) Error() string {
	var what []string
	if len(e.Packages) > 0 {
		what = append(what, "packages "+strings.Join(e.Packages, ", "))
	}
	if len(e.Rules) > 0 {
		what = append(what, "rules "+strings.Join(e.Rules, ", "))
	}
	return "the policies drop what the serving ones define (" + strings.Join(what, "; ") +
		"): not reloaded, as what they guarded would no longer be checked; restart to take them, or reload with drops allowed (serve --watch-drops accept)"
}

// AllowDrops makes Reload swap in policies that drop packages or rules
// the serving ones define, logging a warning that names them, instead of
// refusing them with a *DroppedError.
func AllowDrops() ReloadOption { return func(c *reloadConfig) { c.allowDrops = true } }

// KeyReloadHealth is the outcome of the last reload of the receipt key
// (serve --watch on --receipt-key), in /health.
type KeyReloadHealth struct {
	// Result is rotated (the file's key signs now), unchanged (the file
	// holds the key that signs) or refused (the file holds no Ed25519
	// key: the current key keeps signing).
	Result string `json:"result"`
	// Error is why a refused reload was refused.
	Error string `json:"error,omitempty"`
	// KeyID is the kid of the key that signs.
	KeyID string `json:"kid,omitempty"`
}

// ReceiptKeyReloaded records the outcome of a reload of the receipt key
// (Config.Receipts) by its caller (serve --watch reads the key file again
// and rotates the signer): err is why the new key was refused, nil when
// the signer now signs with the file's key. A refused one makes /health
// degraded, saying why, until a reload succeeds, and is counted in
// /metrics (policycheck_receipt_key_reloads_total,
// policycheck_receipt_key_reload_failing).
func (s *Server) ReceiptKeyReloaded(err error, rotated bool) {
	h := &KeyReloadHealth{Result: "unchanged"}
	switch {
	case err != nil:
		h.Result, h.Error = "refused", err.Error()
	case rotated:
		h.Result = "rotated"
	}
	if s.cfg.Receipts != nil {
		h.KeyID = s.cfg.Receipts.KeyID()
	}
	s.metrics.keyReload(h.Result)
	s.lastKeyReload.Store(h)
}

// ReloadHealth is the outcome of the last Reload, in /health.
type ReloadHealth struct {
	// Result is swapped, unchanged or refused (the state in place keeps
	// serving).
	Result string `json:"result"`
	// Error is why a refused reload was refused.
	Error string `json:"error,omitempty"`
	// DroppedPackages and DroppedRules are what the reloaded policies
	// drop of what the serving ones defined (DroppedError), swapped in
	// (AllowDrops) or refused.
	DroppedPackages []string `json:"dropped_packages,omitempty"`
	DroppedRules    []string `json:"dropped_rules,omitempty"`
}

// A ReloadOption adds to what Reload reads again.
type ReloadOption func(*reloadConfig)

type reloadConfig struct {
	registry   func() (*facts.Registry, error)
	allowDrops bool
}

// ReplaceRegistry makes Reload swap in reg as the configured registry
// (Config.Registry), compiled with the policies and swapped with them: policy
// filters for capabilities reg adds are then accepted, and those for
// capabilities it drops refused. Runs that began with the configured
// registry derive their facts again over reg at their next step. A nil
// reg refuses the reload.
func ReplaceRegistry(reg *facts.Registry) ReloadOption {
	return ReadRegistry(func() (*facts.Registry, error) { return reg, nil })
}

// ReadRegistry is ReplaceRegistry with the registry that read returns,
// called once by Reload: an error from it refuses the reload, counted and
// reported as policies that do not compile are (policycheck serve --watch
// reads its --registry file so). A nil read refuses the reload.
func ReadRegistry(read func() (*facts.Registry, error)) ReloadOption {
	if read == nil {
		// Not read as "no new registry": the caller asked for one.
		read = func() (*facts.Registry, error) { return nil, errors.New("ReadRegistry was given no function") }
	}
	return func(c *reloadConfig) { c.registry = read }
}

// registryRevision is the revision of st's configured registry; "" when
// there is none.
func registryRevision(st *policyState) string {
	if st.eng == nil {
		return ""
	}
	_, rev := st.eng.Revision()
	return rev
}

// onlyMissingEntrypoint reports whether err is a policy set refused only
// for lacking package policycheck.availability.
func onlyMissingEntrypoint(err error) bool {
	var pe *engine.PolicyError
	if !errors.As(err, &pe) || len(pe.Errors) == 0 {
		return false
	}
	for _, p := range pe.Errors {
		if p.Code != "missing_entrypoint" {
			return false
		}
	}
	return true
}

// compileState builds st's engine for the configured registry or, without
// one, checks that the policies compile.
func (s *Server) compileState(ctx context.Context, st *policyState) error {
	if st.reg != nil {
		e, err := s.newEngine(ctx, st, st.reg)
		if err != nil {
			return err
		}
		st.eng = e
		st.rev, _ = e.Revision()
		st.inv = e.Inventory()
		s.noteDefaults(e)
		return nil
	}
	empty, _ := facts.NewRegistry(nil, nil)
	e, err := s.newEngine(ctx, st, empty)
	if err != nil {
		// Filters for capabilities no registry is known yet to have
		// are judged against each request's registry.
		var pe *engine.PolicyError
		if !errors.As(err, &pe) {
			return err
		}
		for _, p := range pe.Errors {
			if p.Code != "unknown_capability" {
				return err
			}
		}
		st.rev = unknownRevision
		if s.state.Load() == nil { // New's first build, as noteDefaults
			s.usesDefaults = true
		}
		st.inv, err = engine.ReadInventory(ctx, s.engineOptions(st, empty)...)
		return err
	}
	st.rev, _ = e.Revision()
	st.inv = e.Inventory()
	s.noteDefaults(e)
	return nil
}

// noteDefaults records, from the first engine built, whether the engines
// load the shipped policies (they are named policies/...).
func (s *Server) noteDefaults(e *engine.Engine) {
	if s.state.Load() != nil {
		return
	}
	for _, m := range e.Modules() {
		if strings.HasPrefix(m, "policies/") {
			s.usesDefaults = true
		}
	}
}

func (s *Server) newEngine(ctx context.Context, st *policyState, reg *facts.Registry) (*engine.Engine, error) {
	return engine.New(ctx, s.engineOptions(st, reg)...)
}

// engineOptions are the options of st's engine for reg.
func (s *Server) engineOptions(st *policyState, reg *facts.Registry) []engine.Option {
	opts := make([]engine.Option, 0, len(s.cfg.Engine)+len(st.extra)+7)
	opts = append(opts, engine.DefaultDeadline(s.cfg.Timeout), engine.DecisionCache(s.cfg.DecisionCache),
		engine.FlowMinLength(s.cfg.FlowMinLength), engine.FlowIndexCap(s.cfg.FlowIndexCap), engine.FlowTokens(s.cfg.FlowTokens))
	if len(s.cfg.Policies) > 0 {
		opts = append(opts, engine.PolicyPaths(s.cfg.Policies...))
	}
	if s.cfg.NoDefaults {
		opts = append(opts, engine.WithoutDefaults())
	}
	opts = append(opts, s.cfg.Engine...)
	opts = append(opts, st.extra...)
	return append(opts, engine.Registry(reg))
}

// Manager returns OPA's plugin manager (nil without an OPA
// configuration), for callers that trigger plugins themselves (manual
// trigger mode) or read their status.
func (s *Server) Manager() *plugins.Manager { return s.mgr }

// Handler returns the server's HTTP handler (the refusal of requests web
// pages make, auth and metrics included), for callers that run their own
// http.Server.
func (s *Server) Handler() http.Handler { return s.handler }

// DiagnosticHandler returns the handler of a diagnostic address: GET
// /health and GET /metrics as Handler serves them (the token required
// where it is), and 404 for every other path, the decision API included.
func (s *Server) DiagnosticHandler() http.Handler { return s.diagnostic }

// Start starts OPA's plugins, if configured. Serve calls it.
func (s *Server) Start(ctx context.Context) error {
	if s.mgr == nil || !s.started.CompareAndSwap(false, true) {
		return nil
	}
	return s.startManager(ctx)
}

// Stop stops the shadow policy's worker and OPA's plugins (flushing
// decision logs as OPA does), by ctx's deadline when it has one: the
// decisions still waiting for the shadow get half of the time left (the
// ones left over are dropped, counted in
// policycheck_shadow_dropped_total{reason="shutdown"}), the plugins the
// rest. Serve calls it on its way out.
func (s *Server) Stop(ctx context.Context) {
	s.stopOnce.Do(func() {
		sctx := ctx
		if dl, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			sctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
			defer cancel()
		}
		s.stopShadow(sctx)
		if s.watchStop != nil {
			close(s.watchStop)
			s.watchDone.Wait()
		}
		if s.mgr != nil && s.started.Load() {
			s.mgr.Stop(ctx)
		}
		s.cleanup()
	})
}

// Serve starts OPA's plugins and serves on ln until ctx is cancelled, then
// shuts down gracefully, within the shutdown grace (Config.ShutdownGrace): it
// stops accepting, lets requests in flight finish, stops the shadow
// policy's worker and the plugins (Stop) and returns nil.
// Each diagnostic listener serves DiagnosticHandler (health and metrics
// only, as opa run --diagnostic-addr does) until the requests on ln are
// finished, so that probes keep their answers while they drain. Every
// listener serves TLS when a TLS configuration was given, a diagnostic
// one without asking for client certificates (probes have none). A
// diagnostic listener that fails on its own is logged; decisions go on.
func (s *Server) Serve(ctx context.Context, ln net.Listener, diagnostic ...net.Listener) error {
	if err := s.Start(ctx); err != nil {
		ln.Close()
		for _, d := range diagnostic {
			d.Close()
		}
		return err
	}
	newServer := func(h http.Handler) *http.Server {
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
			BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		}
		if s.cfg.H2C {
			srv.Protocols = new(http.Protocols)
			srv.Protocols.SetHTTP1(true)
			srv.Protocols.SetUnencryptedHTTP2(true)
		}
		return srv
	}
	withTLS := func(l net.Listener, cfg *tls.Config) net.Listener {
		if cfg != nil {
			return tls.NewListener(l, cfg)
		}
		return l
	}
	// Probes cannot present a client certificate: a diagnostic address
	// asks for none (the token still guards /metrics).
	diagTLS := s.cfg.TLS
	if diagTLS != nil && diagTLS.ClientAuth != tls.NoClientCert {
		diagTLS = diagTLS.Clone()
		diagTLS.ClientAuth, diagTLS.ClientCAs = tls.NoClientCert, nil
	}
	diags := make([]*http.Server, len(diagnostic))
	var diagDone sync.WaitGroup
	for i, d := range diagnostic {
		diags[i] = newServer(s.diagnostic)
		diagDone.Go(func() {
			if err := diags[i].Serve(withTLS(d, diagTLS)); !errors.Is(err, http.ErrServerClosed) {
				s.cfg.Logger.Error("diagnostic address failed", "addr", d.Addr().String(), "err", err)
			}
		})
	}
	defer func() {
		for _, d := range diags {
			_ = d.Close()
		}
		diagDone.Wait()
	}()
	srv := newServer(s.handler)
	done := make(chan error, 1)
	serveDone := make(chan struct{})
	// One grace for the whole shutdown, from the moment ctx is done.
	deadline := make(chan time.Time, 1)
	go func() {
		select {
		case <-ctx.Done():
			until := time.Now().Add(s.cfg.ShutdownGrace)
			deadline <- until
			sctx, cancel := context.WithDeadline(context.Background(), until)
			defer cancel()
			done <- srv.Shutdown(sctx)
		case <-serveDone:
			done <- nil
		}
	}()
	err := srv.Serve(withTLS(ln, s.cfg.TLS))
	close(serveDone)
	shutdownErr := <-done
	until := time.Now().Add(s.cfg.ShutdownGrace)
	select {
	case until = <-deadline:
	default:
	}
	if !errors.Is(err, http.ErrServerClosed) {
		// Serve failed on its own.
		_ = srv.Close()
		s.stopAfter(ctx, until)
		return err
	}
	s.stopAfter(ctx, until)
	return shutdownErr
}

// stopAfter stops the server (Stop) by until.
func (s *Server) stopAfter(ctx context.Context, until time.Time) {
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), until)
	defer cancel()
	s.Stop(sctx)
}

// ListenAndServe listens on addr (TCP) and calls Serve.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// prefixCacheBytes is the prefix cache's bound: none with verified
// evidence, where no request resumes from it (each history's receipts are
// verified afresh), so that it holds no memory for nothing.
func prefixCacheBytes(cfg Config) int {
	if cfg.VerifiedEvidence {
		return 0
	}
	return cfg.PrefixCacheBytes
}
