package gateway

import "github.com/policycheck/policycheck/gateway/internal/sessionstore"

// UseStore makes the gateway cfg configures keep its sessions in st:
// several Gateways in one test share one store as replicas do.
func UseStore(cfg *Config, st sessionstore.Store) { cfg.store = st }

// Derived is the number of history messages g's sessions' runs were
// given.
func Derived(g *Gateway) int64 { return g.metrics.derived.Load() }

// MCPRequests is the number of requests of g's stateful MCP sessions in
// flight as the caps count them (mcpSession.busy): a request leaves the
// count, and stamps its session's lastUsed, when its handler returns,
// which is after its client read the answer.
func MCPRequests(g *Gateway) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, m := range g.mcpByID {
		n += m.busy
	}
	return n
}

// MCPHeld is the number of MCP sessions the caps count.
func MCPHeld(g *Gateway) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mcpHeld
}

// Relays is the number of forwarded calls in flight on g's upstreams as
// the relay counts them (upstream.relays): with several, an upstream's
// log, elicitation and sampling reach no client.
func Relays(g *Gateway) int {
	n := 0
	for _, u := range g.ups {
		u.mu.Lock()
		n += len(u.relays)
		u.mu.Unlock()
	}
	return n
}
