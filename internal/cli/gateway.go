package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/loader"
)

// gatewayFlags are policycheck gateway's flags.
type gatewayFlags struct {
	registry     string
	upstreams    []string
	policies     []string
	addr         string
	stdio        bool
	tokenFile    string
	imports      []string
	origins      []string
	forward      []string
	decisionLog  string
	maxBody      int64
	callTimeout  time.Duration
	approvalTTL  time.Duration
	deadline     time.Duration
	sessionBytes int64
	maxSessions  int
	perPrincipal int
	sessionTTL   time.Duration
	sessionStore string
	sessionLease time.Duration
	startTimeout time.Duration
	receipts     receiptFlags
	approvers    approverKeysFlag
	memoryLimit  memoryLimitFlag
}

func newGatewayCmd() *cobra.Command {
	var f gatewayFlags
	cmd := &cobra.Command{
		Use:   "gateway --registry R --upstream NAME=COMMAND|URL... [--policy P]... [--addr HOST:PORT | --stdio]",
		Short: "Serve MCP in front of MCP servers, every tools/list and tools/call decided by the policies",
		Long: `gateway is an MCP server (streamable HTTP at /mcp, or stdio with --stdio) in front of one or more
upstream MCP servers (--upstream NAME=COMMAND runs a stdio server with /bin/sh -c; NAME=URL reaches a
streamable HTTP one). Each session's history is written by the gateway from the calls it saw, and
every tools/list and tools/call is decided by the engine on it, as for a pydantic-ai history: the
registry's deferred tools are revealed by the gateway's search_tools, its deferred capabilities loaded
by load_capability. A tool an upstream lists that the registry does not map is hidden and refused
(unless --import brings an upstream's unmapped tools into a capability). See docs/gateway.md.

Over HTTP it also serves GET /health (each upstream's state), GET /metrics, and
GET /v1/sessions/{id}/history (an operator token of --token-file): the session as a pydantic-ai
history, for explain, facts and replay.` +
			exitCodes("0  stopped by a signal (or, with --stdio, the client left)",
				exitLineBad+"; an upstream the registry names is not defined"),
		Example: `  policycheck gateway --registry tools.yaml --upstream files='npx -y @modelcontextprotocol/server-filesystem /srv' \
      --token-file tokens.json --addr 127.0.0.1:8787`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runGateway(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.registry, "registry", "", "the tool registry (YAML or JSON); its tools name their upstream (upstream: NAME, or a NAME/ prefix)")
	fl.StringArrayVar(&f.upstreams, "upstream", nil, "an upstream MCP server: NAME=COMMAND (stdio, run by /bin/sh -c) or NAME=URL (streamable HTTP); repeat for more")
	fl.StringArrayVar(&f.policies, "policy", nil, "a Rego file or directory of operator policies, or an OPA bundle (.tar.gz); repeatable")
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8787", "HOST:PORT to serve MCP over streamable HTTP at /mcp")
	fl.BoolVar(&f.stdio, "stdio", false, "serve one client over stdin and stdout instead of HTTP (desktop MCP clients)")
	fl.StringVar(&f.tokenFile, "token-file", "", "JSON file mapping bearer tokens to principals and their context (docs/gateway.md); without it every HTTP client is the principal anonymous")
	fl.StringArrayVar(&f.imports, "import", nil, "NAME=CAPABILITY: the tools upstream NAME lists at start that no registry tool maps join the registry's capability CAPABILITY under their own names; repeatable")
	fl.StringArrayVar(&f.origins, "allow-origin", nil, "an Origin header value to accept besides the gateway's own loopback origin (a request with any other Origin is refused 403); repeatable")
	fl.StringSliceVar(&f.forward, "forward", nil, "MCP features besides tools to forward to the upstreams, comma-separated: resources, prompts, completions (default none); no policy judges what they carry (docs/gateway.md)")
	fl.StringVar(&f.decisionLog, "decision-log", "", "append one JSON line per decided call (session, principal, the decision) to this file; - for stderr")
	fl.Int64Var(&f.maxBody, "max-body", 4<<20, "largest HTTP request body, and largest upstream result kept, in bytes")
	fl.DurationVar(&f.callTimeout, "call-timeout", 60*time.Second, "how long a forwarded call may take")
	fl.DurationVar(&f.deadline, "decision-deadline", 0, "how long one decision may take before it fails closed (0: the engine's default)")
	fl.DurationVar(&f.approvalTTL, "approval-timeout", 10*time.Minute, "how long an elicitation waits for a person's answer")
	fl.Int64Var(&f.sessionBytes, "max-session-bytes", 64<<20, "largest history one session may hold, in bytes; a call to a session past it is refused")
	fl.IntVar(&f.maxSessions, "max-sessions", 10_000, "most sessions held (an idle one past --session-ttl makes room)")
	fl.IntVar(&f.perPrincipal, "max-sessions-per-principal", 0, "most sessions one principal holds: its new session past it drops its least recently used one (0: a tenth of --max-sessions with --token-file, else --max-sessions)")
	fl.DurationVar(&f.sessionTTL, "session-ttl", time.Hour, "how long an idle session is kept")
	fl.StringVar(&f.sessionStore, "session-store", "memory", "where sessions' histories are kept: memory (this process), redis://HOST:PORT/DB or a Redis Cluster, redis+cluster://HOST:PORT[?addr=HOST:PORT...], shared by every replica that names it (docs/gateway.md, Several replicas)")
	fl.DurationVar(&f.sessionLease, "session-lease", 10*time.Second, "with a shared store, how long a replica that stopped mid-call keeps its session from the other replicas")
	fl.DurationVar(&f.startTimeout, "start-timeout", 30*time.Second, "how long to wait for each upstream's first tool list at start")
	f.receipts.register(cmd)
	f.approvers.register(cmd)
	f.memoryLimit.register(cmd)
	return cmd
}

func runGateway(cmd *cobra.Command, f *gatewayFlags) error {
	if f.registry == "" {
		return badInput(errors.New("--registry is required"))
	}
	if len(f.upstreams) == 0 {
		return badInput(errors.New("at least one --upstream NAME=COMMAND or NAME=URL is required"))
	}
	if f.stdio && cmd.Flags().Changed("addr") {
		return badInput(errors.New("--stdio and --addr exclude each other"))
	}
	if f.stdio && f.tokenFile != "" {
		return badInput(errors.New("--token-file needs HTTP: a stdio client has no bearer token (it is the principal stdio)"))
	}
	if f.maxSessions < 1 {
		return badInput(fmt.Errorf("--max-sessions %d: want 1 or more", f.maxSessions))
	}
	if f.perPrincipal < 0 || f.perPrincipal > f.maxSessions {
		return badInput(fmt.Errorf("--max-sessions-per-principal %d: want 1 to --max-sessions (%d), or 0 for the default", f.perPrincipal, f.maxSessions))
	}
	forward, err := gateway.ParseForward(f.forward)
	if err != nil {
		return badInput(err)
	}
	reg, err := loader.ReadRegistry(f.registry)
	if err != nil {
		return badInput(err)
	}
	cfg := gateway.Config{
		Forward:          forward,
		Registry:         reg,
		AllowedOrigins:   f.origins,
		MaxBodyBytes:     f.maxBody,
		MaxResultBytes:   f.maxBody,
		CallTimeout:      f.callTimeout,
		ApprovalTimeout:  f.approvalTTL,
		DecisionDeadline: f.deadline,
		MaxSessionBytes:  f.sessionBytes,
		MaxSessions:      f.maxSessions,
		SessionTTL:       f.sessionTTL,
		SessionStore:     f.sessionStore,
		SessionLease:     f.sessionLease,
		StartTimeout:     f.startTimeout,
		Imports:          map[string]string{},
		Logger:           slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)),
	}
	cfg.MaxSessionsPerPrincipal = f.perPrincipal
	stderr := cmd.ErrOrStderr()
	cfg.EngineOptions = []engine.Option{engine.PolicyPaths(f.policies...),
		engine.OnWarning(func(p engine.PolicyProblem) { fmt.Fprintln(stderr, "policycheck: warning:", p) })}
	for _, u := range f.upstreams {
		up, err := gateway.ParseUpstream(u)
		if err != nil {
			return badInput(err)
		}
		cfg.Upstreams = append(cfg.Upstreams, up)
	}
	for _, im := range f.imports {
		name, capID, ok := strings.Cut(im, "=")
		if !ok || name == "" || capID == "" {
			return badInput(fmt.Errorf("--import %q: want NAME=CAPABILITY", im))
		}
		cfg.Imports[name] = capID
	}
	if f.tokenFile != "" {
		if cfg.Principals, err = gateway.ReadTokenFile(f.tokenFile, reg); err != nil {
			return badInput(err)
		}
	}
	if cfg.Receipts, err = f.receipts.signer(cmd); err != nil {
		return err
	}
	if cfg.Approvals, err = f.approvers.verifier(cmd); err != nil {
		return err
	}
	switch f.decisionLog {
	case "":
	case "-":
		cfg.DecisionLog = stderr
	default:
		lf, err := os.OpenFile(f.decisionLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return badInput(fmt.Errorf("--decision-log: %w", err))
		}
		defer lf.Close()
		cfg.DecisionLog = lf
	}

	restore, err := f.memoryLimit.apply(cmd.Context(), stderr, "gateway")
	if err != nil {
		return badInput(err)
	}
	defer restore()

	ctx, stop := signal.NotifyContext(context.WithoutCancel(cmd.Context()), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g, err := gateway.New(ctx, cfg)
	if err != nil {
		return badInput(err)
	}
	defer g.Close()
	if f.stdio {
		err := g.ServeStdio(ctx, nil)
		if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
			// The client broke the protocol (a batch, an over-long or
			// over-deep message): the connection ended, closed.
			return badInput(fmt.Errorf("stdio: %w", err))
		}
		return nil
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return badInput(fmt.Errorf("--addr: %w", err))
	}
	srv := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "policycheck gateway: serving MCP at http://%s/mcp\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}
