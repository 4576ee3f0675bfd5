package server

import "github.com/policycheck/policycheck/engine"

// PoisonBodies makes c's server overwrite every pooled request body when
// its request ends, so that anything still reading it reads '#' (tests).
func PoisonBodies(c *Config) { c.poisonBodies = true }

// KeepBodies makes c's server pool no request body, as with a decision
// log or a shadow policy (tests).
func KeepBodies(c *Config) { c.noRecycle = true }

// BodiesReused returns how many pooled bodies s gave back, and how many
// of them the prefix cache still held (with PoisonBodies).
func BodiesReused(s *Server) (reused, misreused int64) {
	return s.intake.reused.Load(), s.intake.misreused.Load()
}

// WithoutCache turns off one of the server's caches, named as in
// docs/caches.md ("server.engines", "server.prefix",
// "server.prefix-admission", "server.bodies"), so that a benchmark can
// measure what it saves on the same workload. It is no user option
// (server.prefix has one: PrefixCache(0)).
func WithoutCache(name string) func(*Config) {
	return func(c *Config) {
		switch name {
		case "server.engines":
			c.noEngineCache = true
		case "server.prefix":
			c.PrefixCacheBytes = 0
		case "server.prefix-admission":
			c.admitFirstSight = true
		case "server.bodies":
			c.noRecycle = true
		default:
			panic("server: no cache named " + name)
		}
	}
}

// RecordSignatures is what s adds to a decision-log event's custom for d
// (receipts, receipt keys, approval outcomes), for the benchmark.
func (s *Server) RecordSignatures(custom map[string]any, d *engine.Decision) error {
	return s.recordSignatures(custom, d)
}

// Faults makes c's server call f at the named points of each request's
// decision path (internal/ground/faults): a test panics there.
func Faults(c *Config, f func(point string)) { c.faults = f }

// RunGeneration is the generation a run's answer gives after a step that
// sent messages (the "messages" array as the body spells it) to the run
// id whose generation was prev ("" for a step at offset 0, which may
// carry registry, the "registry" member as the body spells it): what a
// client that builds its steps before it sends them (the load tests,
// the benchmarks) puts in each.
func RunGeneration(prev, id string, registry, messages []byte) string {
	var key string
	if len(registry) > 0 {
		key = registryKey(registry)
	}
	return runGeneration(prev, id, key, messages)
}
