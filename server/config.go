package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server/internal/mask"
	"github.com/policycheck/policycheck/trust"
)

// Config configures a Server: New takes one. Start from DefaultConfig,
// whose values are the defaults documented here and the defaults of
// policycheck serve's flags, and set what differs. A zero value is not
// a usable configuration (Validate refuses its zero Timeout).
//
// Each field's flag tag names the policycheck serve flag that binds into
// it; a field without one says in its noflag tag why (serve builds it
// from files its flags name, or it is for programs embedding the server).
type Config struct {
	// Registry is the registry used when a request carries none. Nil:
	// every request must carry its own. Reload with ReplaceRegistry
	// replaces it.
	Registry *facts.Registry `noflag:"serve reads it from the --registry file"`
	// Policies are policy files, directories and OPA bundles
	// (engine.PolicyPaths) loaded beside the shipped ones.
	Policies []string `flag:"policy"`
	// NoDefaults leaves out the shipped policies (engine.WithoutDefaults):
	// the policies must then define package policycheck.availability.
	NoDefaults bool `flag:"no-defaults"`
	// DecisionCache bounds each engine's decision memo, in entries
	// (engine.DecisionCache; default 1024; 0 turns it off).
	DecisionCache int `flag:"decision-cache"`
	// FlowMinLength and FlowIndexCap are the data-flow options of the
	// engine and the shadow engine (engine.FlowMinLength,
	// engine.FlowIndexCap; docs/flows.md): the shortest returned string
	// an argument is matched against, in bytes (default
	// facts.DefaultFlowMinLength), and the bytes of returned strings
	// indexed per history (default facts.DefaultFlowIndexCap). Both at
	// least 1.
	FlowMinLength int `flag:"flow-min-length"`
	FlowIndexCap  int `flag:"flow-index-cap"`
	// FlowTokens turns token matching of the flows on (engine.FlowTokens;
	// docs/flows.md), in the engine and the shadow engine.
	FlowTokens bool `flag:"flow-tokens"`
	// Engine are further engine options (policies as source text, an
	// fs.FS, cache sizes, warning callbacks) applied after the fields
	// above to every engine the server builds; engine.Registry and
	// engine.DefaultDeadline are set by the server.
	Engine []engine.Option `noflag:"for embedders: engine options as Go values; serve adds its warning logger"`

	// ShadowPolicies, when given, are a candidate policy set (files,
	// directories, bundles) evaluated beside the enforced one on every
	// decision made with the configured registry, never changing an
	// answer: the candidate is decided on the same facts and context off
	// the request's path (a queue bounded by ShadowQueue and
	// ShadowQueueBytes and cut short by shutdown, whose drops are
	// counted), its disagreements are counted in /metrics by transition
	// (policycheck_shadow_disagreements_total) and the decision-log event
	// of the enforced decision carries them under custom.shadow. The
	// candidate's engine takes NoDefaults and DecisionCache as the
	// enforced one does. The server must have a Registry. Reload compiles
	// the candidate again, from its files as they are then, with the
	// enforced policies.
	ShadowPolicies []string `flag:"shadow-policy"`
	// ShadowQueue bounds the decisions waiting for the shadow policy
	// (default 1024; at least 1): when the queue is full, the decision is
	// not shadowed (policycheck_shadow_dropped_total{reason="queue_full"})
	// and is logged at once, as without a shadow.
	ShadowQueue int `flag:"shadow-queue"`
	// ShadowQueueBytes bounds the decisions waiting for the shadow policy
	// by the bytes of their requests' bodies (default 64 MiB,
	// DefaultShadowQueueBytes; at least 1): a queued decision holds about
	// its request's size, so that ShadowQueue alone would let 1,024
	// requests of the body limit wait. A decision that would take the
	// queue past the bound is not shadowed
	// (policycheck_shadow_dropped_total{reason="queue_bytes"}) and is
	// logged at once; one decision is always let into an empty queue,
	// whatever its size.
	ShadowQueueBytes int64 `flag:"shadow-queue-bytes"`

	// OPAConfig, when given, starts OPA's plugin manager with this
	// standard OPA configuration file (YAML or JSON: services, bundles,
	// decision_logs, status, discovery). New refuses one that does not
	// load with an *OPAConfigError.
	OPAConfig []byte `noflag:"serve reads it from the --config file"`
	// ID names this instance in OPA's status and decision logs (default
	// "policycheck").
	ID string `flag:"id"`
	// MaskContext are JSON pointers (relative to the request's context,
	// e.g. "/user/email"; "" is the whole context) whose values are
	// removed from decision logs, on top of OPA's decision_logs mask
	// policy. Validate refuses a string that is not a JSON pointer.
	MaskContext []string `flag:"mask-context"`

	// Token, when not empty, is required as "Authorization: Bearer
	// <token>" on every request but GET /health.
	Token string `noflag:"serve reads it from the --token-file file"`
	// TLS, when set, serves HTTPS with this configuration.
	TLS *tls.Config `noflag:"serve builds it from --tls-cert, --tls-key and --tls-ca-cert"`
	// H2C also serves HTTP/2 without TLS ("prior knowledge", RFC 9113
	// section 3.3), as opa run --h2c does, beside HTTP/1.1: for clients
	// that multiplex many requests over one connection. Validate refuses
	// it with TLS, where it would not be used.
	H2C bool `flag:"h2c"`
	// MaxBody bounds request bodies, in bytes (default 64 MiB); a larger
	// body is answered 413.
	MaxBody int64 `flag:"max-body"`
	// MaxContext bounds a request's context, in bytes of JSON (default 1
	// MiB; 0: only MaxBody bounds it); a larger one is answered 413. A
	// context is converted into a Rego value and digested on every
	// decision, at many times its size in memory: four concurrent 60 MB
	// contexts took a server past 3 GB.
	MaxContext int `flag:"max-context-bytes"`
	// Timeout bounds each request once its body has been read (default
	// 5s; positive): the scan, the decode and the decision all count
	// against it, and a decision that runs out of time fails closed.
	Timeout time.Duration `flag:"timeout"`
	// BodyTimeout bounds how long a request's body may take to arrive
	// (default 30s: a 64 MiB body at 2.2 MB/s); a client still sending
	// past it is answered 408 and its connection closed. 0 turns the
	// deadline off.
	BodyTimeout time.Duration `flag:"body-timeout"`
	// Limits bounds what the history decoder accepts (default
	// loader.DefaultLimits); a MaxBytes of 0 or above MaxBody is MaxBody.
	Limits loader.Limits `noflag:"for embedders: the decoder's limits; serve keeps the defaults"`
	// Schema also validates every history against the shipped JSON
	// Schema (loader.ValidateHistoryBytes), on top of the decoder. The
	// decoder alone is the default: it enforces the same rules and
	// rejects every history the schema rejects (the loader's agreement
	// tests and fuzzer show it), at a tenth of the cost; the schema stays
	// the published contract.
	Schema bool `flag:"schema"`
	// PrefixCacheBytes bounds the prefix cache (see prefixCache: a
	// stateless client resending its growing history pays for its new
	// messages only) to about this many bytes of remembered history
	// (default 256 MiB: a hundred conversations of 1,000 messages); 0
	// turns it off.
	PrefixCacheBytes int `flag:"prefix-cache-bytes"`
	// EngineCache bounds the number of compiled engines kept for
	// registries that requests carry (LRU keyed by the registry's
	// digest; default 16).
	EngineCache int `flag:"engine-cache"`
	// Runs bounds the table of incremental runs (default 10,000; least
	// recently used evicted).
	Runs int `flag:"runs"`
	// RunTTL drops a run after this long without a request (default 30
	// minutes; 0: never).
	RunTTL time.Duration `flag:"run-ttl"`
	// ShutdownGrace bounds how long Serve's shutdown takes once its
	// context is cancelled (default 30s): the requests in flight finish
	// within it, then the decisions still waiting for the shadow policy
	// are decided in half of what is left (those left over are dropped
	// and counted) and OPA's plugins stop (flushing decision logs) in the
	// rest. 0 waits for nothing.
	ShutdownGrace time.Duration `flag:"shutdown-grace"`

	// Logger is the server's logger (nil: discard).
	Logger *slog.Logger `noflag:"serve builds it from --log-format, --log-level and -v"`
	// Debug, when set, is served under /debug/, behind the bearer token
	// when one is configured: policycheck serve --pprof passes
	// net/http/pprof's handlers (as opa run --pprof serves them), to see
	// where a live server's time and memory go. It sees the whole path
	// (/debug/pprof/...). The server does not import net/http/pprof
	// itself: that package registers its handlers on
	// http.DefaultServeMux, which a program embedding the server may
	// serve.
	Debug http.Handler `noflag:"serve sets net/http/pprof's handlers with --pprof"`
	// Receipts, when set, signs an execution receipt for every call that
	// /v1/decide and /v1/runs/{id}/decide judge execute, and its public
	// keys are served as a JWKS at GET /v1/keys. Without it no decision
	// carries a receipt and /v1/keys is not found.
	Receipts *trust.Signer `noflag:"serve builds it from --receipt-key and --receipt-ttl"`
	// ApproverKeys, when set, makes an approval count only when it
	// carries a signature by one of its keys (package trust), on
	// /v1/decide, /v1/explain and the runs' decide endpoint, signed for
	// that run (or for none, on /v1/decide and /v1/explain) with an exp
	// within the Verifier's MaxTTL; the approver is then the key's
	// identity. The server applies each signature once: it remembers, in
	// memory, the signatures it applied until their exp (docs/trust.md).
	ApproverKeys *trust.ApprovalVerifier `noflag:"serve reads it from the --approver-keys file"`
	// VerifiedEvidence counts a reveal (a search return's discovered
	// tools) or a capability load only where the server can vouch for the
	// call that produced it: on /v1/decide and /v1/explain, a return whose
	// metadata.policycheck_receipt holds a receipt the Receipts signer
	// verifies for that call (engine.VerifiedEvidence); on a run's decide
	// endpoint, a call this run judged execute, or a receipt for it in
	// this run (engine.RunVerifiedEvidence). Other evidence is ignored and
	// listed in the decision's unverified_evidence. The server then keeps
	// no prefix cache (PrefixCacheBytes is not used) and derives each
	// request's facts afresh: a receipt that verified for a remembered
	// prefix may have expired since. Validate refuses it without Receipts. serve's
	// --evidence verified sets it (--evidence client, the default, leaves
	// it false).
	VerifiedEvidence bool `flag:"evidence"`

	poisonBodies bool // tests: overwrite a pooled body when it is reused
	noRecycle    bool // tests: pool no body
	// faults, in tests, is called at the named points of each
	// request's decision path (internal/ground/faults), to make it panic.
	faults func(point string)
	// Benchmarks turn caches off to measure what each saves
	// (docs/caches.md, export_test.go): no engine kept for a request's
	// registry; the prefix cache keeps a history at first sight.
	noEngineCache, admitFirstSight bool
}

// DefaultShadowQueueBytes is ShadowQueueBytes's default: the default body
// limit, so that a request of any size the server accepts by default can
// be shadowed.
const DefaultShadowQueueBytes = 64 << 20

// DefaultConfig is the configuration of a server with every default:
// no registry (each request carries its own), the shipped policies, no
// TLS, no token, no OPA configuration.
func DefaultConfig() Config {
	return Config{
		DecisionCache:    1024,
		FlowMinLength:    facts.DefaultFlowMinLength,
		FlowIndexCap:     facts.DefaultFlowIndexCap,
		ShadowQueue:      1024,
		ShadowQueueBytes: DefaultShadowQueueBytes,
		ID:               "policycheck",
		MaxBody:          64 << 20,
		MaxContext:       1 << 20,
		Timeout:          5 * time.Second,
		BodyTimeout:      30 * time.Second,
		Limits:           loader.DefaultLimits(),
		PrefixCacheBytes: 256 << 20,
		EngineCache:      16,
		Runs:             10_000,
		RunTTL:           30 * time.Minute,
		ShutdownGrace:    30 * time.Second,
	}
}

// FieldError is a Config field Validate refuses.
type FieldError struct {
	Field   string // the field's name, e.g. "MaxBody"
	Problem string // e.g. "must not be negative, not -1"
}

func (e *FieldError) Error() string { return e.Field + " " + e.Problem }

// Validate reports every field of c that New would refuse, each as a
// *FieldError, joined (errors.Join); nil when there is none.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	for _, f := range []struct {
		field string
		v     int64
	}{
		{"Runs", int64(c.Runs)}, {"EngineCache", int64(c.EngineCache)}, {"DecisionCache", int64(c.DecisionCache)},
		{"PrefixCacheBytes", int64(c.PrefixCacheBytes)}, {"MaxBody", c.MaxBody}, {"MaxContext", int64(c.MaxContext)},
	} {
		if f.v < 0 {
			bad(f.field, "must not be negative, not %d", f.v)
		}
	}
	for _, f := range []struct {
		field     string
		v         time.Duration
		zeroMeans bool // 0 has a meaning of its own
	}{{"Timeout", c.Timeout, false}, {"BodyTimeout", c.BodyTimeout, true}, {"RunTTL", c.RunTTL, true}, {"ShutdownGrace", c.ShutdownGrace, true}} {
		switch {
		case f.v < 0:
			bad(f.field, "must not be negative, not %v", f.v)
		case f.v == 0 && !f.zeroMeans:
			bad(f.field, "must be positive, not %v", f.v)
		}
	}
	if c.FlowMinLength < 1 {
		bad("FlowMinLength", "must be at least 1, not %d", c.FlowMinLength)
	}
	if c.FlowIndexCap < 1 {
		bad("FlowIndexCap", "must be at least 1, not %d", c.FlowIndexCap)
	}
	if c.ShadowQueue < 1 {
		bad("ShadowQueue", "must be at least 1, not %d", c.ShadowQueue)
	}
	if c.ShadowQueueBytes < 1 {
		bad("ShadowQueueBytes", "must be at least 1, not %d", c.ShadowQueueBytes)
	}
	if c.H2C && c.TLS != nil {
		bad("H2C", "serves HTTP/2 without TLS: with TLS it would not be used")
	}
	if c.VerifiedEvidence && c.Receipts == nil {
		bad("VerifiedEvidence", "counts a stateless request's reveals and loads only with receipts this server signed: it needs Receipts (--receipt-key)")
	}
	for _, p := range c.MaskContext {
		if err := mask.CheckPointer(p); err != nil {
			bad("MaskContext", "%q: %v", p, err)
		}
	}
	return errors.Join(errs...)
}
