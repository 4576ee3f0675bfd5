package trust

import "time"

// Option configures a Signer (Clock, TTL), Verify (Clock) or an
// ApprovalVerifier (Clock, MaxTTL); an option a use has no part for is
// ignored by it.
type Option func(*config)

type config struct {
	now    func() time.Time
	ttl    time.Duration
	maxTTL time.Duration
}

func newConfig(opts []Option) config {
	c := config{now: time.Now, ttl: DefaultTTL, maxTTL: DefaultMaxTTL}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Clock sets the clock that signs and verifies (time.Now otherwise):
// tests inject one, and a replay verifies as of a logged decision's time.
func Clock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// TTL sets how long a Signer's receipts are valid (DefaultTTL otherwise).
func TTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// MaxTTL bounds how far ahead of the check an approval signature's exp
// may lie (DefaultMaxTTL otherwise); d <= 0 leaves it unbounded, which
// only a replay of logged decisions, made under a bound it does not know,
// uses. An exp is required either way.
func MaxTTL(d time.Duration) Option { return func(c *config) { c.maxTTL = d } }
