package server_test

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
	"github.com/policycheck/policycheck/trust"
)

// option sets what a test server differs in from server.DefaultConfig.
type option func(*server.Config)

// newServer is server.New of server.DefaultConfig with opts applied.
func newServer(opts ...option) (*server.Server, error) {
	return server.New(testConfig(opts...))
}

// testConfig is server.DefaultConfig with opts applied.
func testConfig(opts ...option) server.Config {
	cfg := server.DefaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

func withRegistry(reg *facts.Registry) option { return func(c *server.Config) { c.Registry = reg } }
func withEngine(opts ...engine.Option) option {
	return func(c *server.Config) { c.Engine = append(c.Engine, opts...) }
}
func withShadow(paths ...string) option {
	return func(c *server.Config) { c.ShadowPolicies = append(c.ShadowPolicies, paths...) }
}
func withShadowQueueBytes(n int64) option { return func(c *server.Config) { c.ShadowQueueBytes = n } }
func withOPAConfig(raw []byte, id string) option {
	return func(c *server.Config) { c.OPAConfig, c.ID = raw, id }
}
func withMaskContext(pointers ...string) option {
	return func(c *server.Config) { c.MaskContext = append(c.MaskContext, pointers...) }
}
func withToken(token string) option            { return func(c *server.Config) { c.Token = token } }
func withTLS(cfg *tls.Config) option           { return func(c *server.Config) { c.TLS = cfg } }
func withH2C() option                          { return func(c *server.Config) { c.H2C = true } }
func withMaxBody(n int64) option               { return func(c *server.Config) { c.MaxBody = n } }
func withMaxContext(n int) option              { return func(c *server.Config) { c.MaxContext = n } }
func withTimeout(d time.Duration) option       { return func(c *server.Config) { c.Timeout = d } }
func withBodyTimeout(d time.Duration) option   { return func(c *server.Config) { c.BodyTimeout = d } }
func withLimits(l loader.Limits) option        { return func(c *server.Config) { c.Limits = l } }
func withSchema() option                       { return func(c *server.Config) { c.Schema = true } }
func withPrefixCache(n int) option             { return func(c *server.Config) { c.PrefixCacheBytes = n } }
func withEngineCache(n int) option             { return func(c *server.Config) { c.EngineCache = n } }
func withShutdownGrace(d time.Duration) option { return func(c *server.Config) { c.ShutdownGrace = d } }
func withLogger(l *slog.Logger) option         { return func(c *server.Config) { c.Logger = l } }
func withDebug(h http.Handler) option          { return func(c *server.Config) { c.Debug = h } }
func withReceipts(s *trust.Signer) option      { return func(c *server.Config) { c.Receipts = s } }
func withVerifiedEvidence() option             { return func(c *server.Config) { c.VerifiedEvidence = true } }
func withApproverKeys(v *trust.ApprovalVerifier) option {
	return func(c *server.Config) { c.ApproverKeys = v }
}
func withRuns(size int, ttl time.Duration) option {
	return func(c *server.Config) { c.Runs, c.RunTTL = size, ttl }
}
