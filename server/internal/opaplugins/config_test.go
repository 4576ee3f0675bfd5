package opaplugins

import (
	"context"
	"encoding/json"
	"testing"

	opaconfig "github.com/open-policy-agent/opa/v1/config"
	"github.com/stretchr/testify/require"
)

// TestCheckConfig: an option OPA would ignore (a misspelt one, nested
// ones included) and an option policycheck does not act on are refused
// with their name; OPA's defaults, and the options serve reads, are not.
func TestCheckConfig(t *testing.T) {
	for _, ok := range []string{
		`{}`,
		`{"services": {"s": {"url": "http://127.0.0.1:1"}}, "bundles": {"b": {"service": "s"}}, "decision_logs": {"service": "s"}}`,
		`{"labels": {"team": "x"}}`,
	} {
		require.NoError(t, CheckConfig([]byte(ok), "t"), ok)
	}
	for raw, want := range map[string]string{
		`{"decision_log": {"console": true}}`:                                "decision_log",
		`{"decision_logs": {"console": true, "reportin": {}}}`:               "reportin",
		`{"default_decision": "/a/b"}`:                                       `"default_decision" is not read by policycheck serve`,
		`{"caching": {"inter_query_builtin_cache": {"max_size_bytes": 10}}}`: `"caching"`,
		`{"distributed_tracing": {"type": "grpc"}}`:                          `"distributed_tracing"`,
		`{"server": {"encoding": {"gzip": {"min_length": 1024}}}}`:           `"server"`,
	} {
		err := CheckConfig([]byte(raw), "t")
		require.Error(t, err, raw)
		require.Contains(t, err.Error(), want, raw)
	}
}

// TestDiscoveredConfig: a configuration a discovery bundle delivers is
// held to what CheckConfig holds the file's to, and its error says where
// it came from.
func TestDiscoveredConfig(t *testing.T) {
	parse := func(raw string) *opaconfig.Config {
		c, err := opaconfig.ParseConfig([]byte(raw), "t")
		require.NoError(t, err)
		return c
	}
	good := parse(`{"labels": {"a": "b"}}`)
	c, err := DiscoveredConfig{}.OnConfigDiscovery(context.Background(), good)
	require.NoError(t, err)
	require.Same(t, good, c)
	_, err = DiscoveredConfig{}.OnConfigDiscovery(context.Background(), parse(`{"default_decision": "/a/b"}`))
	require.ErrorContains(t, err, `discovered configuration: configuration option "default_decision"`)
}

// TestBoundDecisionLogs: decision logs on the size buffer without a byte
// bound or a rate limit get the default bound; any other configuration
// is left as it is.
func TestBoundDecisionLogs(t *testing.T) {
	reporting := func(raw string) map[string]any {
		out, err := BoundDecisionLogs([]byte(raw))
		require.NoError(t, err)
		var cfg struct {
			DecisionLogs struct {
				Reporting map[string]any `json:"reporting"`
			} `json:"decision_logs"`
		}
		require.NoError(t, json.Unmarshal(out, &cfg))
		return cfg.DecisionLogs.Reporting
	}
	for _, raw := range []string{
		`{"decision_logs": {"console": true}}`,
		"decision_logs:\n  console: true\n  reporting:\n    min_delay_seconds: 5\n",
	} {
		require.EqualValues(t, defaultLogBuffer, reporting(raw)["buffer_size_limit_bytes"], raw)
	}
	for _, raw := range []string{
		`{"decision_logs": {"reporting": {"buffer_type": "event"}}}`,
		`{"decision_logs": {"reporting": {"buffer_size_limit_bytes": 1000}}}`,
		`{"decision_logs": {"reporting": {"max_decisions_per_second": 10}}}`,
		`{"bundles": {}}`,
	} {
		out, err := BoundDecisionLogs([]byte(raw))
		require.NoError(t, err)
		require.Equal(t, raw, string(out), "left as it is")
	}
	_, err := BoundDecisionLogs([]byte(`{"decision_logs": `))
	require.Error(t, err)
}
