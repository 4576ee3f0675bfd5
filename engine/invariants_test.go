package engine_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
)

// TestInvariants: for each invariant the engine holds over the policy's
// answer (engine/invariants.go), a hostile replacement availability
// policy that breaks it, and what the engine makes of its answer. Each
// case fails when its invariant is not checked.
func TestInvariants(t *testing.T) {
	// hostile is a replacement availability policy answering fields
	// (Rego object members) for every request.
	hostile := func(fields string) engine.Source {
		return engine.Source{File: "hostile/availability.rego", Text: "package policycheck.availability\n\ndecision := {\n" + fields + "\n}\n"}
	}
	oneCall := func(tool, args string) []string {
		return []string{wReq(wUser("go")), wResp("", wCall(tool, "c1", args))}
	}
	cases := map[string]struct {
		registry string
		policy   string
		history  []string
		check    func(t *testing.T, d *engine.Decision)
	}{
		"advertised_within_available": {
			policy:  `"available": {"get_time"}, "advertised": {"get_time", "send_mail"}, "dispatch_available": set(), "verdicts": []`,
			history: []string{wReq(wUser("hi"))},
			check: func(t *testing.T, d *engine.Decision) {
				assert.Equal(t, []string{"get_time"}, d.Advertised)
				assert.Contains(t, d.Errors, `policy advertised "send_mail" without making it available; withheld`)
			},
		},
		"would_hide_within_available": {
			policy: `"available": {"get_time"}, "advertised": {"get_time"}, "dispatch_available": {"send_mail"}, ` +
				`"would_hide": {"get_time", "send_mail", "secret_op"}, "verdicts": [{"verdict": "execute"}]`,
			history: oneCall("send_mail", `{}`),
			check: func(t *testing.T, d *engine.Decision) {
				assert.Equal(t, []string{"get_time", "send_mail"}, d.WouldHide)
			},
		},
		"one_verdict_per_call": {
			policy:  `"available": {"get_time"}, "advertised": {"get_time"}, "dispatch_available": {"get_time"}, "verdicts": []`,
			history: oneCall("get_time", `{}`),
			check: func(t *testing.T, d *engine.Decision) {
				require.True(t, d.FailedClosed())
				assert.Contains(t, strings.Join(d.Errors, "\n"), "verdicts must hold one verdict per call (1 calls)")
				assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
			},
		},
		"known_verdict": {
			policy:  `"available": {"get_time"}, "advertised": {"get_time"}, "dispatch_available": {"get_time"}, "verdicts": [{"verdict": "allow"}]`,
			history: oneCall("get_time", `{}`),
			check: func(t *testing.T, d *engine.Decision) {
				require.True(t, d.FailedClosed())
				assert.Contains(t, strings.Join(d.Errors, "\n"), `verdict 0 is "allow", not one of`)
				assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
			},
		},
		"registry_membership": {
			policy:  `"available": {"ghost"}, "advertised": {"ghost"}, "dispatch_available": {"ghost"}, "verdicts": [{"verdict": "execute"}]`,
			history: oneCall("ghost", `{}`),
			check: func(t *testing.T, d *engine.Decision) {
				assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
				assert.True(t, d.Calls[0].FailClosed)
				assert.Contains(t, d.Errors, `policy said execute for "ghost", which is not a registry tool; denied`)
			},
		},
		"approval_denied_bound": {
			policy:  `"available": {"get_time"}, "advertised": {"get_time"}, "dispatch_available": {"get_time"}, "verdicts": [{"verdict": "denied", "rule": "approval_denied"}]`,
			history: oneCall("get_time", `{}`),
			check: func(t *testing.T, d *engine.Decision) {
				assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
				assert.True(t, d.Calls[0].FailClosed)
				assert.Equal(t, []string{"policy said approval_denied for a call no denial is bound to; denied"}, d.Calls[0].Reasons)
			},
		},
		"flagged_rule_values": {
			policy: `"available": {"get_time"}, "advertised": {"get_time"}, "dispatch_available": {"get_time"}, ` +
				`"verdicts": [{"verdict": "execute", "rule": "gate", "would_deny": [{"package": "audit", "rule": "deny", "value": 42}]}]`,
			history: oneCall("get_time", `{}`),
			check: func(t *testing.T, d *engine.Decision) {
				require.True(t, d.FailedClosed())
				assert.Contains(t, strings.Join(d.Errors, "\n"), "operator rule policycheck.rules.audit.deny yielded 42")
				assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
			},
		},
		"gate_before_approval": {
			policy: `"available": {"get_time"}, "advertised": {"get_time"}, "dispatch_available": set(), ` +
				`"verdicts": [{"verdict": "approval_required", "rule": "require_approval", "requests": [{"package": "p", "reason": "r"}]}]`,
			history: oneCall("get_time", `{}`),
			check: func(t *testing.T, d *engine.Decision) {
				assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
				assert.True(t, d.Calls[0].FailClosed)
				assert.Contains(t, strings.Join(d.Calls[0].Reasons, "\n"), `policy said approval_required for "get_time", which its own dispatch availability excludes`)
			},
		},
		"execute_within_dispatch_available": {
			policy:  `"available": {"get_time"}, "advertised": {"get_time"}, "dispatch_available": set(), "verdicts": [{"verdict": "execute", "rule": "gate"}]`,
			history: oneCall("get_time", `{}`),
			check: func(t *testing.T, d *engine.Decision) {
				assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
				assert.True(t, d.Calls[0].FailClosed)
				assert.Contains(t, strings.Join(d.Calls[0].Reasons, "\n"), `policy said execute for "get_time", which its own dispatch availability excludes`)
			},
		},
		"invalid_args_validated": {
			policy:  `"available": {"get_time"}, "advertised": {"get_time"}, "dispatch_available": {"get_time"}, "verdicts": [{"verdict": "invalid_args", "rule": "args"}]`,
			history: oneCall("get_time", `{}`),
			check: func(t *testing.T, d *engine.Decision) {
				assert.Equal(t, engine.Denied, d.Calls[0].Verdict)
				assert.True(t, d.Calls[0].FailClosed)
				assert.Contains(t, strings.Join(d.Calls[0].Reasons, "\n"), `policy said invalid_args for "get_time", whose arguments validate`)
			},
		},
		"args_schema_before_rules": {
			registry: argsRegistry,
			policy: `"available": {"delete_repo"}, "advertised": {"delete_repo"}, "dispatch_available": {"delete_repo"}, ` +
				`"verdicts": [{"verdict": "approval_required", "rule": "require_approval", "requests": [{"package": "p", "reason": "r"}]}]`,
			history: oneCall("delete_repo", `{"repo": 1}`),
			check: func(t *testing.T, d *engine.Decision) {
				assert.Equal(t, engine.InvalidArgs, d.Calls[0].Verdict)
				assert.NotEmpty(t, d.Calls[0].ArgsErrors)
			},
		},
	}
	names := engine.InvariantNames()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c, ok := cases[name]
			if !ok {
				t.Fatalf("invariant %s has no case here", name)
			}
			if c.registry == "" {
				c.registry = opsRegistry
			}
			e := mustEngine(t, mustRegistry(t, c.registry), engine.WithoutDefaults(), engine.Modules(hostile(c.policy)))
			c.check(t, mustDecide(t, e, mustHistory(t, c.history...), nil))
		})
	}
	for name := range cases {
		if !slices.Contains(names, name) {
			t.Errorf("case %s names no invariant", name)
		}
	}
}
