// Package caches is the table of every cache and "seen before" mechanism
// in policycheck's production code: what it is keyed by, what bounds it,
// what invalidates it, the metric that shows it working, and the
// benchmark that shows what it saves. docs/caches.md is written from
// this table and a test holds the two, the code, the benchmarks and
// /metrics to it (caches_test.go): a cache added without a row, a row
// naming a declaration, benchmark or metric that does not exist, or a
// document that drifted from the table fails it.
package caches

// Kind sorts the mechanisms by what outlives what.
type Kind string

const (
	// Shared caches outlive a request: keyed, bounded, each with a
	// metric and a benchmark that turns it off.
	Shared Kind = "shared"
	// State is what an API keeps between requests by contract; it is not
	// an optimisation that could be turned off.
	State Kind = "state"
	// Prepared work is done once for the value that owns it (a policy
	// snapshot, a registry, the process) and dies with it: no key but its
	// owner, no eviction.
	Prepared Kind = "prepared"
	// Request scratch remembers within one request or decision and dies
	// with it.
	Request Kind = "request"
)

// Bench names the benchmark that measures a cache on and off on one
// workload: Func in package Pkg (a directory of the module), its
// sub-benchmark workload=Workload compared across off=none and
// off=<the cache's name>.
type Bench struct {
	Pkg, Func, Workload string
}

// Cache is one row of the table.
type Cache struct {
	// Name is the cache's name in docs, benchmarks (off=Name) and the
	// test hooks that turn it off (engine and server WithoutCache).
	Name string
	Kind Kind
	// File holds the declaration Decl (a type, a struct field, a
	// function, a constant or a variable) that is the cache.
	File, Decl string
	// What it keeps, under which key, bounded how, invalidated when.
	Keeps, Key, Bound, Invalidation string
	// Metrics are the Prometheus metrics (GET /metrics) that show it;
	// NoMetric says why there is none.
	Metrics  []string
	NoMetric string
	// Benches measure it on and off; Saves quotes what they measured
	// (docs/caches.md gives the run). NoBench says why there is none.
	Benches []Bench
	Saves   string
	NoBench string
}

// Table is every cache and "seen before" mechanism, shared ones first.
var Table = []Cache{
	{
		Name: "engine.filters", Kind: Shared, File: "engine/engine.go", Decl: "filterCache",
		Keeps:        "the composed results of the capability filters (prepare_tools) of one active set: the tools each dropped, the fingerprint, the input term",
		Key:          "policy revision, registry revision, context digest, active capability set (length-prefixed ids)",
		Bound:        "4,096 entries (engine.CacheSize), least recently used out",
		Invalidation: "none needed: a reload or a new registry builds a new snapshot with an empty cache; a failed or timed-out filter is not kept",
		Metrics:      []string{"policycheck_filter_cache_hits", "policycheck_filter_cache_misses", "policycheck_filter_cache_entries"},
		Benches: []Bench{{"engine", "BenchmarkCacheSavings", "conversation"}, {"engine", "BenchmarkCacheSavings", "repeat"},
			{"engine", "BenchmarkCacheSavings", "never-seen"}},
		Saves: "conversation: 4.75 ms of CPU a decision without it, 478 µs with it (9.9×); repeat: 2.97 ms against 43 µs (69×); never-seen: no difference (p=0.82). " +
			"It was two caches, one per filter and one per composition under the same key; the per-filter one never answered what the other missed and was merged into it",
	},
	{
		Name: "engine.contexts", Kind: Shared, File: "engine/engine.go", Decl: "contexts",
		Keeps:        "a request context converted to a Rego term, with its canonical digest",
		Key:          "the context's JSON bytes as given (up to 4,096 bytes; larger ones are converted every time)",
		Bound:        "256 entries (contextCacheSize), least recently used out",
		Invalidation: "none needed: a pure function of its key; dies with its snapshot",
		Metrics:      []string{"policycheck_context_cache_hits", "policycheck_context_cache_misses", "policycheck_context_cache_entries"},
		Benches: []Bench{{"engine", "BenchmarkCacheSavings", "conversation"}, {"engine", "BenchmarkCacheSavings", "repeat"},
			{"engine", "BenchmarkCacheSavings", "never-seen"}},
		Saves: "repeat: 57.6 µs of CPU a decision without it, 43.3 µs with it (1.33×; 26% of the allocations); conversation and never-seen: within the noise (6% of the allocations on conversation)",
	},
	{
		Name: "engine.memo", Kind: Shared, File: "engine/engine.go", Decl: "decisions",
		Keeps:        "the policy's result for one input document, its name lists packed as bits over the registry's names (memo.go)",
		Key:          "SHA-256 over the whole input document, written canonically (inputKey)",
		Bound:        "1,024 entries per snapshot (engine.DecisionCache, serve --decision-cache; 0 turns it off)",
		Invalidation: "none needed: dies with its snapshot; off for a policy set that reaches a nondeterministic built-in; a failed filter or a passed deadline is not kept",
		Metrics:      []string{"policycheck_decision_cache_hits", "policycheck_decision_cache_misses", "policycheck_decision_cache_entries"},
		Benches: []Bench{{"engine", "BenchmarkCacheSavings", "conversation"}, {"engine", "BenchmarkCacheSavings", "repeat"},
			{"engine", "BenchmarkCacheSavings", "never-seen"}},
		Saves: "repeat: 367 µs of CPU a decision without it, 43 µs with it (8.5×); conversation at 100 tools: +9% without it, within the noise (p=0.31; 15% of the allocations; BENCHMARKS.md measured 9% at 100 tools, 21% at 10); never-seen: no difference",
	},
	{
		Name: "server.engines", Kind: Shared, File: "server/server.go", Decl: "engines",
		Keeps:        "an engine compiled for a registry that requests carry (concurrent misses share one compilation)",
		Key:          "policy generation and SHA-256 of the registry's bytes",
		Bound:        "16 engines (serve --engine-cache), least recently used out",
		Invalidation: "a new policy generation (bundle activation, reload) changes every key; the old entries age out",
		Metrics:      []string{"policycheck_registry_engine_lookups_total", "policycheck_registry_engines_compiled_total", "policycheck_registry_engines"},
		Benches:      []Bench{{"server", "BenchmarkCacheSavings", "repeat-registry"}},
		Saves:        "repeat-registry: 27.2 ms of CPU a request without it (a compilation), 91 µs with it (300×)",
	},
	{
		Name: "server.prefix", Kind: Shared, File: "server/prefix.go", Decl: "prefixCache",
		Keeps:        "the bytes of a history array through its last message, with the facts derived from them",
		Key:          "hash of the first message, then the bytes compared (never trusted to a hash)",
		Bound:        "256 MiB of estimated memory (serve --prefix-cache-bytes; 0 turns it off), no entry over an eighth of it, least recently used out",
		Invalidation: "an entry is taken by the request that extends it; entries hold facts, not policy results, so a reload leaves them valid; with verified evidence (serve --evidence verified, Config.VerifiedEvidence) the server keeps no prefix cache (Config.PrefixCacheBytes is not used): no request resumes from it, each request's receipts being verified afresh, since one that verified for a remembered prefix may have expired since",
		Metrics:      []string{"policycheck_prefix_cache_lookups_total", "policycheck_prefix_cache_entries", "policycheck_prefix_cache_bytes"},
		Benches:      []Bench{{"server", "BenchmarkCacheSavings", "growing"}, {"server", "BenchmarkCacheSavings", "never-seen"}},
		Saves:        "growing: 4.88 ms of CPU a request without it, 1.94 ms with it (2.5×); never-seen: no difference (p=0.59)",
	},
	{
		Name: "server.prefix-admission", Kind: Shared, File: "server/prefix.go", Decl: "seen",
		Keeps:        "a fingerprint of each history decoded whole, so that the prefix cache keeps a history only at its second sight",
		Key:          "chained maphash of the history's messages",
		Bound:        "4,096 fingerprints (seenMax), oldest forgotten first",
		Invalidation: "a fingerprint is dropped when a request begins with its history",
		Metrics:      []string{"policycheck_prefix_cache_noted"},
		Benches:      []Bench{{"server", "BenchmarkCacheSavings", "growing"}, {"server", "BenchmarkCacheSavings", "never-seen"}},
		Saves: "never-seen: 6.17 ms of CPU a request when every history is kept at first sight, 5.08 ms with the fingerprints (1.21×), and 2.54 MB allocated against 0.50 MB (5.1×); " +
			"growing: its price, one more whole decode per conversation (1.57 ms against 1.94 ms, not significant: p=0.09)",
	},
	{
		Name: "server.bodies", Kind: Shared, File: "server/bodypool.go", Decl: "bodyPool",
		Keeps:        "buffers of answered request bodies (64 KiB to 16 MiB), a free list per size class shared by every core",
		Key:          "size class",
		Bound:        "64 MiB (poolBytes); a buffer unused for a minute (poolIdle) is let go",
		Invalidation: "a body something kept (the prefix cache, a decision log, a shadow policy) is never given back",
		Metrics:      []string{"policycheck_request_bodies_reused_total", "policycheck_request_body_pool_bytes"},
		Benches:      []Bench{{"server", "BenchmarkCacheSavings", "growing"}, {"server", "BenchmarkCacheSavings", "never-seen"}},
		Saves:        "growing: 2.23 ms of CPU a request without it, 1.94 ms with it (1.15×; 4.4× the memory allocated); never-seen: 5.72 ms against 5.08 ms (1.13×; 3.2× the memory)",
	},
	{
		Name: "server.runs", Kind: State, File: "server/runs.go", Decl: "runTable",
		Keeps:        "an incremental run: its engine.Run (facts kept by a facts.Tracker, retry accounting) and registry",
		Key:          "the run id the client names",
		Bound:        "serve --runs entries and --run-ttl idle time, least recently used out",
		Invalidation: "DELETE /v1/runs/{id}, offset 0 restarts it; a miss, or a run held with another generation than the step's, is a 409 and the client resends the whole history",
		Metrics:      []string{"policycheck_runs", "policycheck_run_evictions_total", "policycheck_run_lookups_total"},
		NoBench:      "the run endpoint's contract, not an optimisation: without it every append is a 409. BenchmarkRunAppend measures an append",
	},
	{
		Name: "gateway.sessions", Kind: State, File: "gateway/gateway.go", Decl: "sessions",
		Keeps:        "each session the gateway serves, derived: its engine.Run (facts kept by a facts.Tracker, retry accounting), its messages and their notes as the session store holds them, the call it waits on",
		Key:          "the principal and the session: its _meta handle (policycheck/session), else its MCP session, else the principal alone",
		Bound:        "gateway --max-sessions (default 10,000) and --max-sessions-per-principal entries, --session-ttl idle time; the principal's least recently used session not in a call out, or the new one refused",
		Invalidation: "the MCP session's end (DELETE, idle timeout) and --session-ttl drop it; with a shared store each call first takes what other replicas appended (their calls with their verdicts), and a store that lost the history fails the session closed",
		Metrics:      []string{"policycheck_gateway_sessions_total", "policycheck_gateway_sessions_evicted_total", "policycheck_gateway_sessions_refused_total", "policycheck_gateway_sessions_ended_total"},
		NoBench:      "the gateway's contract, not an optimisation: an MCP client cannot resend its history, so without the table there is no session. BenchmarkSession measures a session's calls",
	},
	{
		Name: "engine.registry-data", Kind: Prepared, File: "engine/input.go", Decl: "registryData",
		Keeps:        "data.policycheck.registry and the filters' tools array as Rego values, and the registry revision",
		Key:          "the snapshot (one registry, one policy set)",
		Bound:        "one per snapshot",
		Invalidation: "a reload or a new registry builds a new snapshot",
		NoMetric:     "nothing to count: built once per snapshot",
		NoBench:      "prepared once, evaluated many times (as OPA prepares a query): building it per decision is not an option to measure against",
	},
	{
		Name: "engine.verdict-queries", Kind: Prepared, File: "engine/percall.go", Decl: "verdict",
		Keeps:        "the query of one call's verdict (gate.verdict of input.dispatch.calls[i]), prepared on the first decision whose combined evaluation erred",
		Key:          "the call's index in the response",
		Bound:        "64 queries per snapshot (maxCachedCallQueries); a call past it prepares its query per use",
		Invalidation: "none needed: dies with its snapshot",
		NoMetric:     "nothing to count: only a decision whose evaluation raised an error reads it",
		NoBench:      "off the evaluated path: taken only when a rule about a call raised an error, to confine it to that call",
	},
	{
		Name: "loader.argschemas", Kind: Prepared, File: "loader/argschema.go", Decl: "argsSchema",
		Keeps:        "each tool's parameters_json_schema and the context_schema, compiled when the registry is read (held by the facts.Registry)",
		Key:          "the registry",
		Bound:        "one per schema of the registry (its tools' and its context's)",
		Invalidation: "a registry is immutable; a new one compiles its own",
		NoMetric:     "nothing to count: compiled with the registry",
		NoBench:      "prepared once with the registry; BenchmarkDecideArgsValidation measures validation",
	},
	{
		Name: "loader.schemas", Kind: Prepared, File: "loader/schema.go", Decl: "compiled",
		Keeps:        "a published JSON Schema (history, registry), compiled on first use",
		Key:          "the schema",
		Bound:        "one per schema, for the process",
		Invalidation: "none: the schemas are embedded in the binary",
		NoMetric:     "nothing to count: compiled once per process (policycheck_history_schema_checks_total counts its uses)",
		NoBench:      "compiled once per process; BenchmarkSchemaValidateHistory measures validation",
	},
	{
		Name: "loader.interned", Kind: Request, File: "loader/history.go", Decl: "interned",
		Keeps:        "one copy of each distinct tool and provider name of one decoded history",
		Key:          "the string's bytes",
		Bound:        "4,096 strings per decode (maxInterned)",
		Invalidation: "dies with the decode",
		NoMetric:     "per request: nothing outlives the decode to watch",
		NoBench:      "not measured on and off here: the decoder is being rewritten (issue 30 item 1); BenchmarkDecodeHistory measures the decode",
	},
	{
		Name: "engine.result-sets", Kind: Request, File: "engine/result.go", Decl: "resultDecoder",
		Keeps:        "the names of each distinct set the policy's result holds, read once (advertised is often available)",
		Key:          "the set's identity",
		Bound:        "the sets of one result (at most five)",
		Invalidation: "dies with the decision",
		NoMetric:     "per decision: nothing outlives it to watch",
		NoBench:      "not measured on and off here: the result decoder is being redefined (issue 30 item 2)",
	},
	{
		Name: "engine.hiders", Kind: Request, File: "engine/decision.go", Decl: "removal",
		Keeps:        "which enforced rules packages hid each tool, asked of the policy at most once per decision and only when an explanation needs it",
		Key:          "the decision",
		Bound:        "one answer per decision",
		Invalidation: "dies with the decision",
		NoMetric:     "per decision: nothing outlives it to watch",
		NoBench:      "laziness, not a cache: a decision no one explains never asks; asked once, every tool's explanation reads the same answer",
	},
}
