package replay_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/policycheck/policycheck/internal/output/replay"
)

// TestDirection: which changes move toward execute (--fail-on loosening)
// and which away; log-only rules and moves between refusals neither.
func TestDirection(t *testing.T) {
	for _, tc := range []struct{ kind, from, to, want string }{
		{replay.KindCall, "denied", "execute", replay.Loosening},
		{replay.KindCall, "denied", "approval_required", replay.Loosening},
		{replay.KindCall, "approval_required", "execute", replay.Loosening},
		{replay.KindCall, "unknown_tool", "not_available_yet", replay.Loosening},
		{replay.KindCall, "execute", "approval_required", replay.Tightening},
		{replay.KindCall, "not_available_yet", "invalid_args", replay.Tightening},
		{replay.KindCall, "denied", "invalid_args", ""},
		{replay.KindAvailable, "unavailable", "available", replay.Loosening},
		{replay.KindAdvertised, "advertised", "unadvertised", replay.Tightening},
		{replay.KindFailClosed, "fail_closed", "ok", replay.Loosening},
		{replay.KindFailClosed, "ok", "fail_closed", replay.Tightening},
		{replay.KindWouldDeny, "no_would_deny", "would_deny", ""},
		{replay.KindCall, "denied", "no_such_state", ""},
	} {
		assert.Equal(t, tc.want, replay.Direction(tc.kind, tc.from, tc.to), "%s %s->%s", tc.kind, tc.from, tc.to)
	}
}
