package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// serveFlags is what serve's flags bind into, each field named by its
// flag tag: the server's Config (server.Config's own flag tags), and what
// serve itself does with its flags (where it listens, the files it reads
// into the Config, logging, watching). TestServeFlagsBind checks, by
// reflection, that every flag sets the field that names it and that every
// Config field has a flag or says why not.
type serveFlags struct {
	server.Config

	Addr           string        `flag:"addr"`
	DiagnosticAddr string        `flag:"diagnostic-addr"`
	UnixSocketPerm string        `flag:"unix-socket-perm"`
	RegistryFile   string        `flag:"registry"`       // read into Config.Registry
	OPAConfigFile  string        `flag:"config"`         // read into Config.OPAConfig
	TokenFile      string        `flag:"token-file"`     // read into Config.Token
	TLSCert        string        `flag:"tls-cert"`       // with TLSKey and TLSCA, Config.TLS
	TLSKey         string        `flag:"tls-key"`        //
	TLSCA          string        `flag:"tls-ca-cert"`    //
	Pprof          bool          `flag:"pprof"`          // Config.Debug: net/http/pprof
	NoSchema       bool          `flag:"no-schema"`      // deprecated: the default
	Verbose        bool          `flag:"verbose"`        // with LogFormat and LogLevel, Config.Logger
	LogFormat      string        `flag:"log-format"`     //
	LogLevel       string        `flag:"log-level"`      //
	Watch          bool          `flag:"watch"`          // policyWatch and keyWatch
	WatchInterval  time.Duration `flag:"watch-interval"` //
	WatchDrops     string        `flag:"watch-drops"`    //

	Receipt   receiptFlags     `flag:"receipt-key,receipt-ttl"`        // Config.Receipts
	Approvers approverKeysFlag `flag:"approver-keys,approval-max-ttl"` // Config.ApproverKeys
}

func newServeCmd() *cobra.Command {
	f := &serveFlags{Config: server.DefaultConfig()}
	return f.command()
}

// command is serve, its flags bound into f (whose values are their
// defaults).
func (f *serveFlags) command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:8181] [--registry R] [--policy ...] [--config opa-config.yaml] [--evidence client|verified]",
		Short: "Serve decisions over HTTP (the sidecar), with OPA bundles and decision logs",
		Long: `serve answers decisions over HTTP, the same documents as eval, facts and explain:

  POST /v1/decide            {"registry"?, "history", "context"?, "approvals"?}  -> the eval document
  POST /v1/facts[?format=input]  {"registry"?, "history", "context"?}  -> the facts document
  POST /v1/explain           as /v1/decide                            -> the explanation
  POST /v1/runs/{id}/decide  {"offset", "messages", "generation"?, "context"?, "registry"?, "approvals"?}
                             only the messages appended since the last call; offset is the
                             number of messages already sent (0 starts the run); above 0,
                             generation is the last answer's. A 409 means the server does not
                             hold the run as you built it (lost, other offset or generation):
                             resend the whole history with offset 0. The answer adds step,
                             retries (exceeded: end the run) and the run's generation.
  approvals                  a person's answers, as eval --approvals reads them (pydantic-ai's
                             DeferredToolResults.approvals, each with the call's digest)
  GET  /health               200 once policies are loaded, 503 before; the revisions served;
                             status "degraded" (still 200) while a bundle fails or its server
                             stops answering, or the decision-log sink fails or drops events
  GET  /metrics              Prometheus metrics
  GET  /v1/keys              with --receipt-key: the public keys of execution receipts (JWKS)
  GET  /debug/pprof/         Go's runtime profiles, with --pprof only (behind --token-file too)

Bodies are JSON: sent with no Content-Type, a JSON one (application/json, */*+json), text/plain or
application/x-www-form-urlencoded (what fetch and curl -d label a string with); any other type
(YAML too), or a charset other than UTF-8, is refused (415). Bodies may be sent gzip-compressed
(Content-Encoding: gzip); --max-body bounds a body both as sent and decompressed, and any other
Content-Encoding is refused (415).
Errors are {"error": {"code", "message", "pointer"}} with 400, 401, 403, 404, 405, 408, 409,
413, 415 or 503; 403 refuses a request a web page made (Origin, Sec-Fetch-Site).
With --config (a standard OPA configuration file: services, bundles, decision_logs, status)
policies come from OPA bundles, polled by OPA's bundle plugin; a new revision is swapped in
atomically, a broken one is refused and the last good revision keeps serving. Decisions go to
OPA's decision-log plugin. It listens on loopback unless --addr says otherwise, and shuts down
gracefully on SIGINT or SIGTERM within --shutdown-grace: requests in flight finish, then decisions
queued for --shadow-policy (those left are dropped, counted) and the last decision-log upload.

--addr unix:///path/to.sock listens on a Unix domain socket instead, as opa run --addr does: its
file gets --unix-socket-perm (755 by default, as OPA's: only its owner may connect) and is
removed on shutdown. A socket file left there by a server that is gone is replaced; a file that
is not a socket, or a socket another server answers on, stops serve with exit status 2.
--diagnostic-addr (host:port or unix://) serves GET /health and GET /metrics alone, as opa run
--diagnostic-addr does, for probes that cannot reach a socket or a port kept for decisions; the
token, when set, guards /metrics there too. --watch reads the --policy, --registry and
--shadow-policy files again when any of them has changed (and is the same at the next look) and
swaps them in together, as opa run --watch does for policies; when one does not compile or parse, none is swapped, the error is
logged and the last good ones keep deciding. Unlike opa run --watch, policies that drop a package or a rule the serving ones
define (a guard file deleted, a package renamed) are refused so too, by default (--watch-drops refuse): taken in, they would
let through, without a word, what the rule guarded. With --watch-drops accept they are swapped in with a warning naming what they drop; either
way the drop is counted in /metrics and shown in /health's last_reload. The API is described in docs/openapi.yaml (OpenAPI 3.1).

--receipt-key signs an execution receipt ("receipt", a compact JWS) for every call that /v1/decide and
/v1/runs/{id}/decide judge execute, valid for --receipt-ttl; the service that runs the tool verifies it
(policycheck receipt verify, package trust; docs/trust.md) with the keys of GET /v1/keys. With
--watch, a changed key file rotates the key: the replaced key stays in /v1/keys until its receipts
have expired. --approver-keys (a JWKS) counts an approval only when an approver key signed it for
the run it is for, with an exp at most --approval-max-ttl ahead, and once: the sidecar remembers the
signatures it applied (docs/trust.md, "Signed approvals"). With either, each decision-log event's custom also records the
receipts handed out (each one's jti and kid), the keys that verify them and each approval's signature
outcome, which policycheck replay verifies again (docs/replay.md, "Recorded receipts and approvals").

` + evidenceHelp + `
With verified, --receipt-key is required, and the sidecar keeps no prefix cache (--prefix-cache-bytes is
not used): each request's receipts are verified afresh.` + exitCodes("0  stopped by SIGINT or SIGTERM after finishing the requests in flight", exitLineBad+", an address it cannot listen on"),
		Example: `  policycheck serve --registry examples/registry.yaml --policy examples/policies
  curl -s localhost:8181/v1/decide -d "{\"history\": $(cat examples/histories/refund.json)}"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(cmd.ErrOrStderr(), f.LogFormat, f.LogLevel, f.Verbose, cmd.Flags().Changed("log-level"))
			if err != nil {
				return badInput(err)
			}
			if err := f.check(cmd); err != nil {
				return badInput(err)
			}
			la, diag, err := parseListenAddrs(f.Addr, f.DiagnosticAddr, f.UnixSocketPerm, cmd.Flags().Changed("unix-socket-perm"))
			if err != nil {
				return badInput(err)
			}
			if err := f.read(cmd, logger); err != nil {
				return err
			}
			var kw *keyWatch
			if f.Receipts != nil && f.Watch {
				kw = newKeyWatch(f.Receipt.key, f.Receipts)
			}
			var pw *policyWatch
			if f.Watch {
				pw = newPolicyWatch(f.Policies, f.ShadowPolicies, f.RegistryFile, f.WatchDrops == "accept")
			}
			srv, err := server.New(f.Config)
			var ce *server.OPAConfigError
			if errors.As(err, &ce) {
				return badInput(fmt.Errorf("--config %s: %w", f.OPAConfigFile, ce.Err))
			}
			if err != nil {
				return badInput(flagErrors(err))
			}
			ctx, stop := signal.NotifyContext(context.WithoutCancel(cmd.Context()), os.Interrupt, syscall.SIGTERM)
			defer stop()
			removedStale := func(path string) { logger.Info("removed a stale socket no server answers on", "path", path) }
			ln, err := listen(ctx, la, removedStale)
			if err != nil {
				return badInput(err)
			}
			at := la.where(ln)
			if msg := la.exposed(at, f.TokenFile != "", f.Pprof); msg != "" {
				logger.Warn(msg, "addr", at)
			}
			var diagLn []net.Listener
			if diag != nil {
				dl, err := listen(ctx, *diag, removedStale)
				if err != nil {
					ln.Close()
					return badInput(err)
				}
				logger.Info("policycheck diagnostics serving", "addr", diag.where(dl), "paths", "/health /metrics")
				diagLn = append(diagLn, dl)
			}
			if pw != nil {
				go pw.run(ctx, srv, f.WatchInterval, logger)
			}
			if kw != nil {
				go kw.run(ctx, srv, f.WatchInterval, logger)
			}
			logger.Info("policycheck serving", "addr", at, "tls", f.TLSCert != "")
			if err := srv.Serve(ctx, ln, diagLn...); err != nil {
				return err
			}
			logger.Info("policycheck stopped")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Addr, "addr", "127.0.0.1:8181", "address to listen on: host:port (loopback by default) or unix:///path/to.sock")
	fl.StringVar(&f.DiagnosticAddr, "diagnostic-addr", "", "address serving only GET /health and GET /metrics, for probes and scrapers (host:port or unix:///path)")
	fl.StringVar(&f.UnixSocketPerm, "unix-socket-perm", "755", "permissions of the socket file of a unix:// --addr (octal)")
	fl.StringVar(&f.RegistryFile, "registry", "", "tool registry used when a request carries none")
	fl.StringArrayVar(&f.Policies, "policy", f.Policies, "policy file, directory (data: data.json, data.yaml only; entries named .* not read) or OPA bundle (repeatable)")
	fl.BoolVar(&f.Watch, "watch", false, "reload the --policy, --registry and --shadow-policy files when they change, together, as opa run --watch does (files that do not compile or parse are logged and the last good ones keep serving); a changed --receipt-key file rotates the key")
	fl.DurationVar(&f.WatchInterval, "watch-interval", time.Second, "how often --watch looks at the policy, registry and shadow policy files")
	fl.StringVar(&f.WatchDrops, "watch-drops", "refuse", "what --watch does with policies that drop a package or rule the serving ones define: refuse (the last good ones keep serving) or accept (swapped in with a warning); counted in /metrics either way")
	fl.BoolVar(&f.NoDefaults, "no-defaults", f.NoDefaults, "do not load the shipped default policies")
	fl.StringVar(&f.OPAConfigFile, "config", "", "OPA configuration file (services, bundles, decision_logs, status)")
	fl.StringVar(&f.ID, "id", f.ID, "instance id reported to OPA status and decision-log services")
	fl.StringVar(&f.TokenFile, "token-file", "", "file holding the bearer token every request must carry (GET /health excepted)")
	fl.StringVar(&f.TLSCert, "tls-cert", "", "TLS certificate (PEM); serves HTTPS with --tls-key")
	fl.StringVar(&f.TLSKey, "tls-key", "", "TLS private key (PEM); the pair is read again when either file changes")
	fl.StringVar(&f.TLSCA, "tls-ca-cert", "", "CA certificates (PEM) whose client certificates are required (mutual TLS; not on --diagnostic-addr)")
	fl.BoolVar(&f.H2C, "h2c", f.H2C, "also serve HTTP/2 without TLS to clients that speak it with prior knowledge, as opa run --h2c does")
	fl.Int64Var(&f.MaxBody, "max-body", f.MaxBody, "largest request body accepted, in bytes (413 beyond)")
	fl.IntVar(&f.MaxContext, "max-context-bytes", f.MaxContext, "largest request context accepted, in bytes of JSON (413 beyond; 0: only --max-body)")
	fl.DurationVar(&f.Timeout, "timeout", f.Timeout, "per-request timeout from the end of the body (scan, decode and decision); a decision that runs out fails closed")
	fl.DurationVar(&f.BodyTimeout, "body-timeout", f.BodyTimeout, "how long a request body may take to arrive (408 and the connection closed beyond; 0: no limit)")
	fl.IntVar(&f.Runs, "runs", f.Runs, "most incremental runs kept (least recently used evicted)")
	fl.DurationVar(&f.RunTTL, "run-ttl", f.RunTTL, "idle time after which a run is dropped (0: never)")
	fl.IntVar(&f.EngineCache, "engine-cache", f.EngineCache, "most engines kept for registries that requests carry")
	fl.IntVar(&f.DecisionCache, "decision-cache", f.DecisionCache, "policy results kept per engine for inputs decided before (0: off; see engine.DecisionCache)")
	fl.IntVar(&f.FlowMinLength, "flow-min-length", f.FlowMinLength, flowMinLengthUsage)
	fl.IntVar(&f.FlowIndexCap, "flow-index-cap", f.FlowIndexCap, flowIndexCapUsage)
	fl.BoolVar(&f.FlowTokens, "flow-tokens", f.FlowTokens, flowTokensUsage)
	fl.IntVar(&f.PrefixCacheBytes, "prefix-cache-bytes", f.PrefixCacheBytes, "memory bound of the prefix cache that resumes a resent, growing history after its remembered beginning (0: off)")
	fl.StringArrayVar(&f.ShadowPolicies, "shadow-policy", f.ShadowPolicies, "candidate policy file, directory or bundle evaluated beside the enforced policy, never changing an answer: disagreements in /metrics and the decision log (repeatable; needs --registry)")
	fl.IntVar(&f.ShadowQueue, "shadow-queue", f.ShadowQueue, "decisions waiting for the shadow policy before further ones are dropped (counted)")
	fl.Int64Var(&f.ShadowQueueBytes, "shadow-queue-bytes", f.ShadowQueueBytes, "bytes of request bodies the decisions waiting for the shadow policy may hold before further ones are dropped (counted; one decision of any size is let into an empty queue)")
	fl.StringArrayVar(&f.MaskContext, "mask-context", f.MaskContext, "JSON pointer into the context to remove from decision logs (repeatable)")
	fl.BoolVar(&f.Schema, "schema", f.Schema, "also validate every history against the JSON Schema (the decoder alone, the default, rejects everything the schema rejects)")
	fl.BoolVar(&f.NoSchema, "no-schema", false, "validate histories with the decoder alone (the default)")
	_ = fl.MarkDeprecated("no-schema", "the decoder alone is the default; --schema adds the JSON Schema")
	fl.DurationVar(&f.ShutdownGrace, "shutdown-grace", f.ShutdownGrace, "how long shutdown takes at most: requests in flight, then decisions waiting for the shadow policy (those left are dropped, counted) and the decision-log flush (0: no wait)")
	fl.BoolVarP(&f.Verbose, "verbose", "v", false, "debug logging (--log-level debug)")
	fl.StringVar(&f.LogFormat, "log-format", "text", "log format: text (key=value) or json (one object a line)")
	fl.StringVar(&f.LogLevel, "log-level", "info", "least severe level logged: debug, info, warn or error")
	f.Receipt.register(cmd)
	f.Approvers.register(cmd)
	fl.Var(evidenceValue{&f.VerifiedEvidence}, "evidence", evidenceUsage)
	fl.BoolVar(&f.Pprof, "pprof", false, "serve Go's runtime profiles (CPU, heap, goroutines, trace) under /debug/pprof/, as opa run --pprof does")
	return cmd
}

// check reports every flag serve refuses, before it reads a file: the
// Config's own (server.Config.Validate, each named by its flag) and the
// flags that contradict or need one another.
func (f *serveFlags) check(cmd *cobra.Command) error {
	changed := cmd.Flags().Changed
	var errs []error
	cfg := f.Config
	// read reads Config.Receipts from --receipt-key after check: here
	// the flag stands for it.
	cfg.VerifiedEvidence = false
	if err := cfg.Validate(); err != nil {
		errs = append(errs, flagErrors(err))
	}
	if f.VerifiedEvidence && f.Receipt.key == "" {
		errs = append(errs, errNoEvidenceKey)
	}
	if f.VerifiedEvidence && changed("prefix-cache-bytes") {
		errs = append(errs, errors.New("--prefix-cache-bytes sizes the prefix cache, which --evidence verified does not keep (each request's receipts are verified afresh)"))
	}
	if f.Schema && f.NoSchema {
		errs = append(errs, errors.New("--schema and --no-schema contradict each other"))
	}
	if err := f.Approvers.checkTTL(cmd); err != nil {
		errs = append(errs, err)
	}
	switch {
	case f.Watch && len(f.Policies) == 0 && f.RegistryFile == "" && len(f.ShadowPolicies) == 0 && f.Receipt.key == "":
		errs = append(errs, errors.New("--watch reloads the --policy, --registry, --shadow-policy and --receipt-key files, and none is given"))
	case !f.Watch && changed("watch-interval"):
		errs = append(errs, errors.New("--watch-interval is how often --watch looks, and --watch is not given"))
	case f.WatchInterval <= 0:
		errs = append(errs, fmt.Errorf("--watch-interval must be positive, not %v", f.WatchInterval))
	case !f.Watch && changed("watch-drops"):
		errs = append(errs, errors.New("--watch-drops is what --watch does with policies that drop rules, and --watch is not given"))
	case f.WatchDrops != "refuse" && f.WatchDrops != "accept":
		errs = append(errs, fmt.Errorf("--watch-drops is refuse or accept, not %q", f.WatchDrops))
	}
	for _, name := range []string{"shadow-queue", "shadow-queue-bytes"} {
		if changed(name) && len(f.ShadowPolicies) == 0 {
			errs = append(errs, fmt.Errorf("--%s bounds the decisions waiting for the shadow policy, and --shadow-policy is not given", name))
		}
	}
	if len(f.MaskContext) > 0 && f.OPAConfigFile == "" {
		errs = append(errs, errors.New("--mask-context masks decision logs, which only --config turns on"))
	}
	if (f.TLSCert == "") != (f.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	if f.H2C && f.TLSCert != "" {
		errs = append(errs, errors.New("--h2c serves HTTP/2 without TLS: with --tls-cert it would not be used"))
	}
	if f.TLSCA != "" && f.TLSCert == "" {
		errs = append(errs, errors.New("--tls-ca-cert asks clients for certificates over TLS, which --tls-cert and --tls-key turn on"))
	}
	return errors.Join(errs...)
}

// read reads the files the flags name into the Config (the registry, the
// OPA configuration, the token, the TLS files, the receipt and approver
// keys), with the logger and the pprof handler.
func (f *serveFlags) read(cmd *cobra.Command, logger *slog.Logger) error {
	f.Logger = logger
	f.Engine = append(f.Engine, engine.OnWarning(func(p engine.PolicyProblem) {
		logger.Warn("policy never evaluated", "code", p.Code, "file", p.File, "row", p.Row, "message", p.Message)
	}))
	if f.Pprof {
		f.Debug = pprofHandler()
	}
	var err error
	if f.RegistryFile != "" {
		if f.Registry, err = loader.ReadRegistry(f.RegistryFile); err != nil {
			return badInput(err)
		}
	}
	if f.OPAConfigFile != "" {
		if f.OPAConfig, err = os.ReadFile(f.OPAConfigFile); err != nil {
			return badInput(err)
		}
	}
	if f.TokenFile != "" {
		raw, err := os.ReadFile(f.TokenFile)
		if err != nil {
			return badInput(err)
		}
		if f.Token = strings.TrimSpace(string(raw)); f.Token == "" {
			return badInput(fmt.Errorf("--token-file %s is empty", f.TokenFile))
		}
	}
	if f.TLSCert != "" {
		files, err := loadCertFiles(f.TLSCert, f.TLSKey, logger)
		if err != nil {
			return badInput(err)
		}
		f.TLS = &tls.Config{GetCertificate: files.get, MinVersion: tls.VersionTLS12}
		if f.TLSCA != "" {
			if f.TLS.ClientCAs, err = clientCAs(f.TLSCA); err != nil {
				return badInput(err)
			}
			f.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	if f.Receipts, err = f.Receipt.signer(cmd); err != nil {
		return err
	}
	f.ApproverKeys, err = f.Approvers.verifier(cmd)
	return err
}

// flagErrors names each field server.Config.Validate refuses by the serve
// flag that binds into it (its flag tag).
func flagErrors(err error) error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return flagError(err)
	}
	var errs []error
	for _, e := range joined.Unwrap() {
		errs = append(errs, flagError(e))
	}
	return errors.Join(errs...)
}

func flagError(err error) error {
	var fe *server.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	if sf, ok := reflect.TypeFor[server.Config]().FieldByName(fe.Field); ok && sf.Tag.Get("flag") != "" {
		return fmt.Errorf("--%s %s", sf.Tag.Get("flag"), fe.Problem)
	}
	return err
}

// pprofHandler serves net/http/pprof's handlers under /debug/pprof/ on a
// mux of its own (that package also registers them on
// http.DefaultServeMux, which policycheck never serves).
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// newLogger is serve's logger: --log-format text or json, from
// --log-level (levelSet: given on the command line) on, or debug with -v
// (which a --log-level other than debug contradicts).
func newLogger(w io.Writer, format, level string, verbose, levelSet bool) (*slog.Logger, error) {
	levels := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
	lv, ok := levels[level]
	if !ok {
		return nil, fmt.Errorf("--log-level must be debug, info, warn or error, not %q", level)
	}
	if verbose {
		if levelSet && lv != slog.LevelDebug {
			return nil, fmt.Errorf("-v logs at debug level, which --log-level %s contradicts", level)
		}
		lv = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		// Structured values (a decision-log event's input and result,
		// OPA's maps and lists) are written as quoted JSON rather than Go's
		// map[k:v] notation, which loses strings' bounds: so a decision
		// logged to the console can be replayed from the text log too.
		opts.ReplaceAttr = jsonValues
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
}

// jsonValues is the text logger's ReplaceAttr: a map or slice value
// becomes its JSON encoding (a string, which the text handler quotes).
func jsonValues(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindAny {
		return a
	}
	v := a.Value.Any()
	switch k := reflect.ValueOf(v).Kind(); {
	case k == reflect.Map, k == reflect.Slice && reflect.TypeOf(v).Elem().Kind() != reflect.Uint8:
		if b, err := json.Marshal(v); err == nil {
			return slog.String(a.Key, string(b))
		}
	}
	return a
}
