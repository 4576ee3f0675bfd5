package opaplugins

import (
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/bundle"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/stretchr/testify/require"
)

// bundlePlugin is a bundle plugin (not started) for the bundles config
// configures, on one service.
func bundlePlugin(t *testing.T, config string) *bundle.Plugin {
	t.Helper()
	mgr, err := plugins.New([]byte(`{"services": {"s": {"url": "http://127.0.0.1:1"}}, "bundles": `+config+`}`), "t", inmem.New())
	require.NoError(t, err)
	cfg, err := bundle.NewConfigBuilder().WithBytes(mgr.Config.Bundles).WithServices(mgr.Services()).Parse()
	require.NoError(t, err)
	return bundle.New(cfg, mgr)
}

// TestStaleAfter: a polled bundle's bound is three times its
// max_delay_seconds (120 s by default), plus its long-polling timeout; a
// bundle triggered by hand, or not configured, has none.
func TestStaleAfter(t *testing.T) {
	bp := bundlePlugin(t, `{
		"default": {"service": "s"},
		"fast": {"service": "s", "polling": {"min_delay_seconds": 1, "max_delay_seconds": 2}},
		"long": {"service": "s", "polling": {"min_delay_seconds": 1, "max_delay_seconds": 2, "long_polling_timeout_seconds": 10}},
		"manual": {"service": "s", "trigger": "manual"}}`)
	for name, want := range map[string]time.Duration{"default": 360 * time.Second, "fast": 6 * time.Second, "long": 16 * time.Second} {
		d, polled := staleAfter(bp, name)
		require.True(t, polled, name)
		require.Equal(t, want, d, name)
	}
	for _, name := range []string{"manual", "missing"} {
		_, polled := staleAfter(bp, name)
		require.False(t, polled, name)
	}
}

// TestBundlesStale: a polled bundle without a download that succeeds
// within its bound becomes stale (once), shows so in its health with the
// time of the last answer, and is no longer stale once its server
// answers; a bundle triggered by hand never is.
func TestBundlesStale(t *testing.T) {
	var b Bundles
	tracked, _ := b.Answered("fast", time.Now())
	require.False(t, tracked, "not following bundles before Init")
	b.Init(false)
	b.CheckStale(time.Now(), func(StaleChange) { t.Fatal("no bundle plugin yet") })
	names, fresh := b.Attach(bundlePlugin(t, `{"manual": {"service": "s", "trigger": "manual"}, "fast": {"service": "s", "polling": {"min_delay_seconds": 1, "max_delay_seconds": 2}}}`))
	require.Equal(t, []string{"fast", "manual"}, names)
	require.True(t, fresh)

	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var changes []StaleChange
	check := func(now time.Time) {
		b.CheckStale(now, func(c StaleChange) { changes = append(changes, c) })
	}
	check(t0) // the watch begins
	check(t0.Add(6 * time.Second))
	require.Empty(t, changes, "within the bound")
	check(t0.Add(7 * time.Second))
	check(t0.Add(time.Hour))
	require.Equal(t, []StaleChange{{Name: "fast", Stale: true, Last: t0, Bound: 6 * time.Second}}, changes)

	h := b.Health(map[string]string{"fast": "r1"})
	require.Equal(t, BundleHealth{Serving: "r1", Stale: true, LastSuccess: "2026-01-02T03:04:05Z",
		Error: "the bundle server has not answered since 2026-01-02T03:04:05Z; the serving revision keeps serving"}, h["fast"])
	require.Equal(t, BundleHealth{}, h["manual"])

	b.Failed("fast", "download failed")
	require.Equal(t, "download failed", b.Health(nil)["fast"].Error, "a refusal's error shows first")

	tracked, was := b.Answered("fast", t0.Add(time.Hour))
	require.True(t, tracked)
	require.True(t, was)
	require.False(t, b.Health(nil)["fast"].Stale)
	changes = nil
	check(t0.Add(time.Hour + time.Second))
	require.Empty(t, changes, "the stale mark went with the answer")
	_, was = b.Answered("fast", time.Time{})
	require.False(t, was)
}

// TestBundlesActivations: activations taken in and refused, readiness
// (every configured bundle served, and the discovery bundle activated
// when it names them) and the bundle data directory.
func TestBundlesActivations(t *testing.T) {
	var b Bundles
	b.Init(true)
	require.Nil(t, b.Health(nil), "no bundles configured")
	require.False(t, b.AllServed(nil), "the discovery bundle has not been activated")
	b.Discovered()
	require.True(t, b.AllServed(nil))

	bp := bundlePlugin(t, `{"a": {"service": "s"}, "b": {"service": "s"}}`)
	_, fresh := b.Attach(bp)
	require.True(t, fresh)
	_, fresh = b.Attach(bp)
	require.False(t, fresh, "the same plugin")
	require.False(t, b.AllServed(map[string]string{"a": "1"}))
	require.True(t, b.AllServed(map[string]string{"a": "1", "b": ""}))

	at := time.Now()
	require.False(t, b.Seen("a"))
	b.Failed("a", "refused")
	b.Refused("a", at, "r2")
	require.True(t, b.Seen("a"))
	require.True(t, b.LastActivation("a").Equal(at))
	require.Equal(t, BundleHealth{Serving: "r1", Active: "r2", Error: "refused"}, b.Health(map[string]string{"a": "r1"})["a"])

	require.Empty(t, b.Activated("a", at.Add(time.Second), "r3", "/tmp/one"))
	require.Equal(t, BundleHealth{Serving: "r3", Active: "r3"}, b.Health(map[string]string{"a": "r3"})["a"], "the error goes with an activation taken in")
	require.Equal(t, "/tmp/one", b.Activated("b", at, "r1", "/tmp/two"), "the directory replaced")
	require.Equal(t, "/tmp/two", b.TakeDataDir())
	require.Empty(t, b.TakeDataDir())
}
