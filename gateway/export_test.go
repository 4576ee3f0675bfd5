package gateway

import "github.com/policycheck/policycheck/gateway/internal/sessionstore"

// UseStore makes the gateway cfg configures keep its sessions in st:
// several Gateways in one test share one store as replicas do.
func UseStore(cfg *Config, st sessionstore.Store) { cfg.store = st }

// Derived is the number of history messages g's sessions' runs were
// given.
func Derived(g *Gateway) int64 { return g.metrics.derived.Load() }
