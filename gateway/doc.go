// Package gateway is `policycheck gateway`: an MCP server, on the
// official Go SDK (github.com/modelcontextprotocol/go-sdk), in front of
// one or more upstream MCP servers, that decides every tools/list and
// tools/call of any MCP client with the engine, on a history it writes
// itself from the calls it saw (docs/gateway.md).
//
// The map:
//
//   - gateway.go is the Gateway: Config, New (start the upstreams, build
//     the effective registry, compile the policies; again when an upstream
//     first lists late), the session table
//     keyed by (principal, handle) (lifecycle.go creates and drops its
//     sessions), tools/list (the decision's advertised
//     tools, each as its upstream lists it now, and the meta-tools), the
//     decision log, History and Health.
//   - session.go is one session: its history as pydantic-ai JSON and an
//     engine.Run over it, so that a call is decided incrementally; a
//     call written as a response with one tool-call part, decided, then
//     refused (a retry-prompt), run as a meta-tool, or forwarded (a
//     tool-return); approvals by elicitation, input-required results
//     (2026-07-28) or signed approvals in _meta.
//   - history.go writes the messages: tool calls, typed returns, retry
//     prompts, availability deltas, in pydantic-ai's wire format (spec
//     §1), and an upstream result as a return's content.
//   - meta.go is search_tools (spec S4's keyword strategy over the
//     search-gated tools nothing removed) and load_capability (spec X9),
//     their arguments, returns and definitions.
//   - registry.go maps registry tools to upstreams (the upstream field or
//     a NAME/ prefix) and builds the effective registry: upstream
//     schemas where the registry gives none, MCP annotations as
//     upstream_hint labels, --import.
//   - upstream.go keeps each upstream connected (stdio command, streamable
//     HTTP URL or a caller's transport), restarted with backoff, its tool
//     list read again on list_changed.
//   - relay.go takes what an upstream sends during a forwarded call to the
//     client that made it: progress by token; log messages, elicitation
//     and sampling only while that call is the upstream's only one.
//   - forward.go forwards resources, prompts and completions when
//     Config.Forward names them (no policy judges them), routed to the one
//     upstream that offers what a request names.
//   - server.go is the MCP and HTTP surface: one SDK server per client
//     connection whose middleware takes tools/list and tools/call (and the
//     forwarded methods),
//     stateful sessions up to 2025-11-25 and stateless requests from
//     2026-07-28, bearer tokens, Origin, batches and body limits, /health,
//     /metrics, the history endpoint; principals.go reads --token-file;
//     stdio.go holds stdin to the same guards.
//   - shared.go keeps sessions in step with the session store
//     (internal/sessionstore: in the process, or Redis, one server or a
//     cluster, shared by every replica): a call takes the session's lease, gives its run what
//     other replicas appended since (call by call, as written, each call
//     with the verdicts its writer's decision gave: engine.Run.Replay,
//     no evaluation but for a call awaiting an approval), writes
//     itself to the store, checked against the length it saw, before it
//     is carried out, and its answer after; a lost or unreachable store
//     fails calls closed.
//   - lifecycle.go is a session's life: created for (principal, handle)
//     within --max-sessions and the principal's own cap (past it, the
//     principal's least recently used session is dropped); dropped when
//     its MCP session ends; stopped when a call exceeds its tool's retry
//     budget, where the reference aborts the run (spec X8), and ended
//     --session-ttl after the stop. The caps admit a session before the
//     store records it (a refused request writes nothing). The same caps
//     bound the stateful MCP sessions from their initialize, whether or
//     not they ever call; a request whose client went away, and the
//     requests of an MCP session the gateway ends, are cancelled.
//   - deciders.go runs decisions on long-lived goroutines, whose stacks
//     stay grown for Rego's recursion.
//
// Everything a client or an upstream sends is hostile: the tool name is
// the JSON-RPC body's, arguments must be a JSON object within the depth
// limit, results are bounded before they are kept, a decision that cannot
// be made refuses the call, and a tool reaches a session only through the
// registry.
package gateway
