package gateway

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// metrics are the gateway's counters, served at /metrics in Prometheus'
// text format.
type metrics struct {
	lists                 atomic.Int64
	sessions              atomic.Int64
	decideErrors          atomic.Int64
	upstreamErrors        atomic.Int64
	refusedBatches        atomic.Int64
	refusedBeforeDecision atomic.Int64
	callNanos             atomic.Int64
	callCount             atomic.Int64
	// derived counts the messages given to sessions' runs: each once on
	// a replica, however many replicas served the session.
	derived     atomic.Int64
	storeErrors atomic.Int64
	// replayed counts the calls another replica decided that this one
	// gave its runs with their writer's verdicts (engine.Run.Replay);
	// decidedAgain those it decided again (a call awaiting an approval,
	// a note without verdicts).
	replayed     atomic.Int64
	decidedAgain atomic.Int64
	// The sessions' life (lifecycle.go).
	sessionsEvicted     atomic.Int64
	sessionsRefused     atomic.Int64
	sessionsEnded       atomic.Int64
	sessionsStopped     atomic.Int64
	callsRefusedStopped atomic.Int64

	mu       sync.Mutex
	verdicts map[string]int64
}

func (m *metrics) verdict(v string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.verdicts == nil {
		m.verdicts = map[string]int64{}
	}
	m.verdicts[v]++
}

func (m *metrics) observe(d time.Duration) {
	m.callNanos.Add(int64(d))
	m.callCount.Add(1)
}

func (g *Gateway) writeMetrics(w io.Writer) {
	m := &g.metrics
	p := func(name, help, typ string, v any) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %v\n", name, help, name, typ, name, v)
	}
	m.mu.Lock()
	names := make([]string, 0, len(m.verdicts))
	for v := range m.verdicts {
		names = append(names, v)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "# HELP policycheck_gateway_calls_total Calls decided, by verdict.\n# TYPE policycheck_gateway_calls_total counter\n")
	for _, v := range names {
		fmt.Fprintf(w, "policycheck_gateway_calls_total{verdict=%q} %d\n", v, m.verdicts[v])
	}
	m.mu.Unlock()
	p("policycheck_gateway_call_seconds_sum", "Time spent on calls (decision and forwarding).", "counter", float64(m.callNanos.Load())/1e9)
	p("policycheck_gateway_call_seconds_count", "Calls timed.", "counter", m.callCount.Load())
	p("policycheck_gateway_lists_total", "tools/list requests answered.", "counter", m.lists.Load())
	p("policycheck_gateway_sessions_total", "Sessions started.", "counter", m.sessions.Load())
	p("policycheck_gateway_decide_errors_total", "Calls and listings that could not be decided (answered closed).", "counter", m.decideErrors.Load())
	p("policycheck_gateway_upstream_errors_total", "Forwarded calls that failed at their upstream.", "counter", m.upstreamErrors.Load())
	p("policycheck_gateway_batches_refused_total", "Batched JSON-RPC requests refused.", "counter", m.refusedBatches.Load())
	p("policycheck_gateway_calls_refused_unread_total", "Calls refused before a decision (arguments not an object, name too long, the session's history at --max-session-bytes).", "counter", m.refusedBeforeDecision.Load())
	p("policycheck_gateway_messages_derived_total", "History messages given to sessions' runs (each once per replica: a call derives only what the replica has not seen).", "counter", m.derived.Load())
	p("policycheck_gateway_calls_replayed_total", "Calls another replica decided, given to this replica's sessions with the verdicts their writer's decision gave: no policy evaluation.", "counter", m.replayed.Load())
	p("policycheck_gateway_calls_decided_again_total", "Calls another replica decided that this replica decided again: a call awaiting an approval across requests, or one an older replica stored without its verdicts.", "counter", m.decidedAgain.Load())
	p("policycheck_gateway_session_store_errors_total", "Calls and listings the session store failed closed (lost, conflicting, busy, full, unreachable).", "counter", m.storeErrors.Load())
	p("policycheck_gateway_sessions_evicted_total", "Sessions and MCP sessions dropped to keep their principal within --max-sessions-per-principal or the gateway within --max-sessions (the principal's least recently used one not in a call).", "counter", m.sessionsEvicted.Load())
	p("policycheck_gateway_sessions_refused_total", "New sessions and MCP sessions refused: the table full (--max-sessions) with none to drop, or the principal at --max-sessions-per-principal with every one in a call.", "counter", m.sessionsRefused.Load())
	g.mu.Lock()
	held := g.mcpHeld
	g.mu.Unlock()
	p("policycheck_gateway_mcp_sessions", "Stateful MCP sessions held (counted against --max-sessions and --max-sessions-per-principal from their initialize).", "gauge", held)
	p("policycheck_gateway_sessions_ended_total", "Sessions dropped because their MCP session ended (the client's DELETE, the MCP session's idle timeout).", "counter", m.sessionsEnded.Load())
	p("policycheck_gateway_sessions_stopped_total", "Sessions stopped because a call exceeded its tool's retry budget (the reference aborts the run).", "counter", m.sessionsStopped.Load())
	p("policycheck_gateway_calls_refused_stopped_total", "Calls refused because their session was stopped.", "counter", m.callsRefusedStopped.Load())
	fmt.Fprintf(w, "# HELP policycheck_gateway_upstream_up Whether each upstream is connected.\n# TYPE policycheck_gateway_upstream_up gauge\n")
	for _, name := range g.upOrder {
		h := g.ups[name].health()
		up := 0
		if h.State == StateUp {
			up = 1
		}
		fmt.Fprintf(w, "policycheck_gateway_upstream_up{upstream=%q} %d\n", name, up)
		fmt.Fprintf(w, "policycheck_gateway_upstream_restarts{upstream=%q} %d\n", name, h.Restarts)
	}
}
