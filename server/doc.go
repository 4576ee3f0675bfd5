// Package server is policycheck's HTTP sidecar: a thin layer over engine/
// that agents written in any language call over HTTP.
//
// Map of the package:
//
//   - config.go: Config, the server's one configuration (documented
//     fields, DefaultConfig's defaults, Validate reporting every field it
//     refuses), which policycheck serve's flags bind into;
//   - server.go: Server, New, Reload, Serve with graceful
//     shutdown within one grace, TLS and diagnostic listeners (health and
//     metrics only);
//   - handlers.go: POST /v1/decide, /v1/facts, /v1/explain and GET /health,
//     the routes of the main and the diagnostic handler;
//   - intake.go: the one way in for a request: the body (read bounded and
//     under a deadline, JSON by its Content-Type, decompressed when sent
//     with gzip, into a pooled buffer that is reused once answered when
//     nothing kept it), the scan and the decode in one pass (the
//     loader's decoder is the one runtime validator and reads a large
//     history on several cores; the JSON Schema only with Config.Schema)
//     and the resume after a history prefix seen before;
//   - runs.go: POST /v1/runs/{id}/decide, the incremental endpoint over a
//     bounded, evicting table of engine.Run values (facts kept
//     incrementally, retry accounting as the library keeps it);
//   - prefix.go: the prefix cache: a stateless client that resends its
//     growing history is resumed after the bytes of a history decided
//     before, with the facts kept for it, and pays for its new messages
//     (a history is kept from its second sight; its first leaves a
//     fingerprint);
//   - bodypool.go: the free list of request-body buffers, by size class,
//     that every core shares;
//   - errors.go: the JSON error document and its status codes;
//   - auth.go: optional bearer-token authentication;
//   - metrics.go: GET /metrics in the Prometheus text format;
//   - plugins.go: OPA's management plane (bundle, decision-log, status and
//     discovery plugins from a standard OPA configuration file), following
//     the bundles the file or a discovery bundle configures (a new
//     activation compiled into a new policy state), and watching for a
//     bundle server that stops answering;
//   - declog.go: decision logs through OPA's decision-log plugin, the
//     context masked (server/internal/mask);
//   - receipts.go: execution receipts and approval
//     signatures (package trust), and what the decision log records
//     of both;
//   - shadow.go: the shadow policy, decided beside the enforced one off the
//     answer's path (a queue bounded by count and bytes, cut short by
//     shutdown), disagreements in /metrics and the log.
//
// Beside it, server/internal/httpreq checks the headers of a request's body and
// whether a web page sent it, internal/ground/lru is the one LRU (behind the
// table of engines compiled for requests' registries, the run table and
// the engine's caches), internal/ground/jsonout writes answers as
// policycheck eval prints decisions, server/internal/opaplugins is the glue to
// OPA's plugins (the configuration checks, the logger adapter, the bundle
// tracker with its staleness, the store reads, and the decision-log
// sink's state, uploads and drops counted by event, for /health and
// /metrics), and server/internal/mask removes the masked context values (JSON
// pointers) from a decision log's event.
//
// The server's caches (the engines for requests' registries, the prefix
// cache and its fingerprints of histories seen once, the body pool) and
// its run table are listed, with the engine's, in docs/caches.md, each
// with its key, bound, metric and the benchmark that shows what it saves.
//
// A Server is safe for concurrent use. Its policy state (the configured
// registry and its engine, the shadow policy, bundle revisions) is one
// immutable value swapped atomically when a bundle activates or Reload
// takes in changed policy files or a new registry: requests in flight,
// and the shadow decisions they queued, finish on the state they started
// with.
package server
