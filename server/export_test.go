package server

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
