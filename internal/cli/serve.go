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

func newServeCmd() *cobra.Command {
	var (
		addr, diagAddr, registry, config, tokenFile, tlsCert, tlsKey   string
		id, perm, logFormat, logLevel, tlsCA, watchDrops               string
		policies, mask, shadowPolicies                                 []string
		noDefaults, schema, noSchema, verbose, pprofOn, h2c, watch     bool
		maxBody, shadowBytes                                           int64
		timeout, bodyTimeout, runTTL, grace, watchInterval             time.Duration
		runs, engines, prefixBytes, decisions, maxContext, shadowQueue int
		rf                                                             receiptFlags
		ak                                                             approverKeysFlag
		ev                                                             evidenceFlag
	)
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:8181] [--registry R] [--policy ...] [--config opa-config.yaml] [--evidence client|verified]",
		Short: "Serve decisions over HTTP (the sidecar), with OPA bundles and decision logs",
		Long: `serve answers decisions over HTTP, the same documents as eval, facts and explain:

  POST /v1/decide            {"registry"?, "history", "context"?, "approvals"?}  -> the eval document
  POST /v1/facts[?format=input]  {"registry"?, "history", "context"?}  -> the facts document
  POST /v1/explain           as /v1/decide                            -> the explanation
  POST /v1/runs/{id}/decide  {"offset", "messages", "context"?, "registry"?, "approvals"?}
                             only the messages appended since the last call; offset is the
                             number of messages already sent (0 starts the run). A 409 means
                             the server no longer holds the run: resend the whole history with
                             offset 0. The answer adds step and retries (exceeded: end the run).
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
(policycheck receipt verify, package receipt; docs/trust.md) with the keys of GET /v1/keys. With
--watch, a changed key file rotates the key: the replaced key stays in /v1/keys until its receipts
have expired. --approver-keys (a JWKS) counts an approval only when an approver key signed it
(docs/trust.md, "Signed approvals").

` + evidenceHelp + `
With verified, --receipt-key is required, and /v1/decide and /v1/facts do not resume from the prefix
cache: each request's receipts are verified afresh.` + exitCodes("0  stopped by SIGINT or SIGTERM after finishing the requests in flight", exitLineBad+", an address it cannot listen on"),
		Example: `  policycheck serve --registry examples/registry.yaml --policy examples/policies
  curl -s localhost:8181/v1/decide -d "{\"history\": $(cat examples/histories/refund.json)}"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(cmd.ErrOrStderr(), logFormat, logLevel, verbose, cmd.Flags().Changed("log-level"))
			if err != nil {
				return badInput(err)
			}
			engOpts := []engine.Option{engine.PolicyPaths(policies...), engine.DecisionCache(decisions),
				engine.OnWarning(func(p engine.PolicyProblem) {
					logger.Warn("policy never evaluated", "code", p.Code, "file", p.File, "row", p.Row, "message", p.Message)
				})}
			if noDefaults {
				engOpts = append(engOpts, engine.WithoutDefaults())
			}
			opts := []server.Option{
				server.Engine(engOpts...), server.MaxBody(maxBody), server.MaxContext(maxContext), server.Timeout(timeout), server.BodyTimeout(bodyTimeout),
				server.Runs(runs, runTTL), server.EngineCache(engines), server.PrefixCache(prefixBytes), server.MaskContext(mask...),
				server.Logger(logger), server.ShutdownGrace(grace),
			}
			if registry != "" {
				reg, err := loader.ReadRegistry(registry)
				if err != nil {
					return badInput(err)
				}
				opts = append(opts, server.Registry(reg))
			}
			if schema && noSchema {
				return badInput(errors.New("--schema and --no-schema contradict each other"))
			}
			if schema {
				opts = append(opts, server.ValidateSchema())
			}
			if config != "" {
				raw, err := os.ReadFile(config)
				if err != nil {
					return badInput(err)
				}
				opts = append(opts, server.OPAConfig(raw, id))
			}
			if pprofOn {
				opts = append(opts, server.Debug(pprofHandler()))
			}
			if tokenFile != "" {
				raw, err := os.ReadFile(tokenFile)
				if err != nil {
					return badInput(err)
				}
				token := strings.TrimSpace(string(raw))
				if token == "" {
					return badInput(fmt.Errorf("--token-file %s is empty", tokenFile))
				}
				opts = append(opts, server.Token(token))
			}
			for _, f := range []struct {
				name string
				v    int64
			}{{"--runs", int64(runs)}, {"--engine-cache", int64(engines)}, {"--decision-cache", int64(decisions)}, {"--prefix-cache-bytes", int64(prefixBytes)}, {"--max-body", maxBody}, {"--max-context-bytes", int64(maxContext)}, {"--shadow-queue-bytes", shadowBytes}} {
				if f.v < 0 {
					return badInput(fmt.Errorf("%s must not be negative, not %d", f.name, f.v))
				}
			}
			for _, f := range []struct {
				name      string
				v         time.Duration
				zeroMeans bool // 0 has a meaning of its own
			}{{"--timeout", timeout, false}, {"--body-timeout", bodyTimeout, true}, {"--run-ttl", runTTL, true}, {"--shutdown-grace", grace, true}} {
				if f.v < 0 {
					return badInput(fmt.Errorf("%s must not be negative, not %v", f.name, f.v))
				}
				if f.v == 0 && !f.zeroMeans {
					return badInput(fmt.Errorf("%s must be positive, not %v", f.name, f.v))
				}
			}
			la, diag, err := parseListenAddrs(addr, diagAddr, perm, cmd.Flags().Changed("unix-socket-perm"))
			if err != nil {
				return badInput(err)
			}
			switch {
			case watch && len(policies) == 0 && registry == "" && len(shadowPolicies) == 0 && rf.key == "":
				return badInput(errors.New("--watch reloads the --policy, --registry, --shadow-policy and --receipt-key files, and none is given"))
			case !watch && cmd.Flags().Changed("watch-interval"):
				return badInput(errors.New("--watch-interval is how often --watch looks, and --watch is not given"))
			case watchInterval <= 0:
				return badInput(fmt.Errorf("--watch-interval must be positive, not %v", watchInterval))
			case !watch && cmd.Flags().Changed("watch-drops"):
				return badInput(errors.New("--watch-drops is what --watch does with policies that drop rules, and --watch is not given"))
			case watchDrops != "refuse" && watchDrops != "accept":
				return badInput(fmt.Errorf("--watch-drops is refuse or accept, not %q", watchDrops))
			}
			if shadowQueue < 1 {
				return badInput(fmt.Errorf("--shadow-queue must be at least 1, not %d", shadowQueue))
			}
			if shadowBytes < 1 {
				return badInput(fmt.Errorf("--shadow-queue-bytes must be at least 1, not %d", shadowBytes))
			}
			for _, f := range []string{"shadow-queue", "shadow-queue-bytes"} {
				if cmd.Flags().Changed(f) && len(shadowPolicies) == 0 {
					return badInput(fmt.Errorf("--%s bounds the decisions waiting for the shadow policy, and --shadow-policy is not given", f))
				}
			}
			if len(mask) > 0 && config == "" {
				return badInput(errors.New("--mask-context masks decision logs, which only --config turns on"))
			}
			if (tlsCert == "") != (tlsKey == "") {
				return badInput(errors.New("--tls-cert and --tls-key go together"))
			}
			if h2c {
				if tlsCert != "" {
					return badInput(errors.New("--h2c serves HTTP/2 without TLS: with --tls-cert it would not be used"))
				}
				opts = append(opts, server.H2C())
			}
			if tlsCA != "" && tlsCert == "" {
				return badInput(errors.New("--tls-ca-cert asks clients for certificates over TLS, which --tls-cert and --tls-key turn on"))
			}
			if tlsCert != "" {
				files, err := loadCertFiles(tlsCert, tlsKey, logger)
				if err != nil {
					return badInput(err)
				}
				cfg := &tls.Config{GetCertificate: files.get, MinVersion: tls.VersionTLS12}
				if tlsCA != "" {
					if cfg.ClientCAs, err = clientCAs(tlsCA); err != nil {
						return badInput(err)
					}
					cfg.ClientAuth = tls.RequireAndVerifyClientCert
				}
				opts = append(opts, server.TLS(cfg))
			}
			if len(shadowPolicies) > 0 {
				shOpts := []engine.Option{engine.PolicyPaths(shadowPolicies...), engine.DecisionCache(decisions)}
				if noDefaults {
					shOpts = append(shOpts, engine.WithoutDefaults())
				}
				opts = append(opts, server.Shadow(shOpts...), server.ShadowQueue(shadowQueue), server.ShadowQueueBytes(shadowBytes))
			}
			signer, err := rf.signer(cmd)
			if err != nil {
				return err
			}
			approvers, err := ak.verifier(cmd)
			if err != nil {
				return err
			}
			if approvers != nil {
				opts = append(opts, server.ApproverKeys(approvers))
			}
			verified, err := ev.verified(signer)
			if err != nil {
				return err
			}
			if verified {
				opts = append(opts, server.VerifiedEvidence())
			}
			var kw *keyWatch
			if signer != nil {
				opts = append(opts, server.Receipts(signer))
				if watch {
					kw = newKeyWatch(rf.key, signer)
				}
			}
			var pw *policyWatch
			if watch {
				pw = newPolicyWatch(policies, shadowPolicies, registry, watchDrops == "accept")
			}
			srv, err := server.New(opts...)
			var ce *server.OPAConfigError
			if errors.As(err, &ce) {
				return badInput(fmt.Errorf("--config %s: %w", config, ce.Err))
			}
			if err != nil {
				return badInput(err)
			}
			ctx, stop := signal.NotifyContext(context.WithoutCancel(cmd.Context()), os.Interrupt, syscall.SIGTERM)
			defer stop()
			removedStale := func(path string) { logger.Info("removed a stale socket no server answers on", "path", path) }
			ln, err := listen(ctx, la, removedStale)
			if err != nil {
				return badInput(err)
			}
			at := la.where(ln)
			if msg := la.exposed(at, tokenFile != "", pprofOn); msg != "" {
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
			if watch {
				go pw.run(ctx, srv, watchInterval, logger)
			}
			if kw != nil {
				go kw.run(ctx, watchInterval, logger)
			}
			logger.Info("policycheck serving", "addr", at, "tls", tlsCert != "")
			if err := srv.Serve(ctx, ln, diagLn...); err != nil {
				return err
			}
			logger.Info("policycheck stopped")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", "127.0.0.1:8181", "address to listen on: host:port (loopback by default) or unix:///path/to.sock")
	fl.StringVar(&diagAddr, "diagnostic-addr", "", "address serving only GET /health and GET /metrics, for probes and scrapers (host:port or unix:///path)")
	fl.StringVar(&perm, "unix-socket-perm", "755", "permissions of the socket file of a unix:// --addr (octal)")
	fl.StringVar(&registry, "registry", "", "tool registry used when a request carries none")
	fl.StringArrayVar(&policies, "policy", nil, "policy file, directory (data: data.json, data.yaml only; entries named .* not read) or OPA bundle (repeatable)")
	fl.BoolVar(&watch, "watch", false, "reload the --policy, --registry and --shadow-policy files when they change, together, as opa run --watch does (files that do not compile or parse are logged and the last good ones keep serving); a changed --receipt-key file rotates the key")
	fl.DurationVar(&watchInterval, "watch-interval", time.Second, "how often --watch looks at the policy, registry and shadow policy files")
	fl.StringVar(&watchDrops, "watch-drops", "refuse", "what --watch does with policies that drop a package or rule the serving ones define: refuse (the last good ones keep serving) or accept (swapped in with a warning); counted in /metrics either way")
	fl.BoolVar(&noDefaults, "no-defaults", false, "do not load the shipped default policies")
	fl.StringVar(&config, "config", "", "OPA configuration file (services, bundles, decision_logs, status)")
	fl.StringVar(&id, "id", "policycheck", "instance id reported to OPA status and decision-log services")
	fl.StringVar(&tokenFile, "token-file", "", "file holding the bearer token every request must carry (GET /health excepted)")
	fl.StringVar(&tlsCert, "tls-cert", "", "TLS certificate (PEM); serves HTTPS with --tls-key")
	fl.StringVar(&tlsKey, "tls-key", "", "TLS private key (PEM); the pair is read again when either file changes")
	fl.StringVar(&tlsCA, "tls-ca-cert", "", "CA certificates (PEM) whose client certificates are required (mutual TLS; not on --diagnostic-addr)")
	fl.BoolVar(&h2c, "h2c", false, "also serve HTTP/2 without TLS to clients that speak it with prior knowledge, as opa run --h2c does")
	fl.Int64Var(&maxBody, "max-body", 64<<20, "largest request body accepted, in bytes (413 beyond)")
	fl.IntVar(&maxContext, "max-context-bytes", 1<<20, "largest request context accepted, in bytes of JSON (413 beyond; 0: only --max-body)")
	fl.DurationVar(&timeout, "timeout", 5*time.Second, "per-request timeout from the end of the body (scan, decode and decision); a decision that runs out fails closed")
	fl.DurationVar(&bodyTimeout, "body-timeout", 30*time.Second, "how long a request body may take to arrive (408 and the connection closed beyond; 0: no limit)")
	fl.IntVar(&runs, "runs", 10_000, "most incremental runs kept (least recently used evicted)")
	fl.DurationVar(&runTTL, "run-ttl", 30*time.Minute, "idle time after which a run is dropped (0: never)")
	fl.IntVar(&engines, "engine-cache", 16, "most engines kept for registries that requests carry")
	fl.IntVar(&decisions, "decision-cache", 1024, "policy results kept per engine for inputs decided before (0: off; see engine.DecisionCache)")
	fl.IntVar(&prefixBytes, "prefix-cache-bytes", 256<<20, "memory bound of the prefix cache that resumes a resent, growing history after its remembered beginning (0: off)")
	fl.StringArrayVar(&shadowPolicies, "shadow-policy", nil, "candidate policy file, directory or bundle evaluated beside the enforced policy, never changing an answer: disagreements in /metrics and the decision log (repeatable; needs --registry)")
	fl.IntVar(&shadowQueue, "shadow-queue", 1024, "decisions waiting for the shadow policy before further ones are dropped (counted)")
	fl.Int64Var(&shadowBytes, "shadow-queue-bytes", server.DefaultShadowQueueBytes, "bytes of request bodies the decisions waiting for the shadow policy may hold before further ones are dropped (counted; one decision of any size is let into an empty queue)")
	fl.StringArrayVar(&mask, "mask-context", nil, "JSON pointer into the context to remove from decision logs (repeatable)")
	fl.BoolVar(&schema, "schema", false, "also validate every history against the JSON Schema (the decoder alone, the default, rejects everything the schema rejects)")
	fl.BoolVar(&noSchema, "no-schema", false, "validate histories with the decoder alone (the default)")
	_ = fl.MarkDeprecated("no-schema", "the decoder alone is the default; --schema adds the JSON Schema")
	fl.DurationVar(&grace, "shutdown-grace", 30*time.Second, "how long shutdown takes at most: requests in flight, then decisions waiting for the shadow policy (those left are dropped, counted) and the decision-log flush (0: no wait)")
	fl.BoolVarP(&verbose, "verbose", "v", false, "debug logging (--log-level debug)")
	fl.StringVar(&logFormat, "log-format", "text", "log format: text (key=value) or json (one object a line)")
	fl.StringVar(&logLevel, "log-level", "info", "least severe level logged: debug, info, warn or error")
	rf.register(cmd)
	ak.register(cmd)
	ev.register(cmd)
	fl.BoolVar(&pprofOn, "pprof", false, "serve Go's runtime profiles (CPU, heap, goroutines, trace) under /debug/pprof/, as opa run --pprof does")
	return cmd
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
