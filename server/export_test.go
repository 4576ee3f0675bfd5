package server

import "github.com/policycheck/policycheck/engine"

// PoisonBodies is a test option: every pooled request body is overwritten
// when its request ends, so that anything still reading it reads '#'.
func PoisonBodies() Option { return func(c *config) { c.poisonBodies = true } }

// KeepBodies is a test option: no request body is pooled, as with a
// decision log or a shadow policy.
func KeepBodies() Option { return func(c *config) { c.noRecycle = true } }

// BodiesReused returns how many pooled bodies s gave back, and how many
// of them the prefix cache still held (with PoisonBodies).
func BodiesReused(s *Server) (reused, misreused int64) {
	return s.intake.reused.Load(), s.intake.misreused.Load()
}

// RecordSignatures is what s adds to a decision-log event's custom for d
// (receipts, receipt keys, approval outcomes), for the benchmark.
func (s *Server) RecordSignatures(custom map[string]any, d *engine.Decision) error {
	return s.recordSignatures(custom, d)
}
