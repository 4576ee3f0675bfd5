package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
)

// TestInventory: a policy set's inventory names its packages and counts
// each rule's definitions (incremental ones, a function's clauses, a
// default, a ref head's ground prefix; an else chain is one), and
// Dropped lists what the next set no longer defines or defines fewer
// times, the rules of a dropped package included.
func TestInventory(t *testing.T) {
	read := func(src ...string) engine.Inventory {
		t.Helper()
		var mods []engine.Source
		for i, s := range src {
			mods = append(mods, engine.Source{File: string(rune('a'+i)) + ".rego", Text: s})
		}
		inv, err := engine.ReadInventory(context.Background(), engine.WithoutDefaults(), engine.Modules(mods...))
		require.NoError(t, err)
		return inv
	}
	guard := `package policycheck.rules.guard

deny contains "a" if input.x
deny contains "b" if input.y

f(x) := 1 if x > 1
f(x) := 2 if x <= 1

default allow := false
allow if input.z
else := true if input.w

limits.hard := 5
limits[k] := 1 if some k in input.ks
`
	other := "package policycheck.rules.other\n\nhide contains \"t\"\n"
	before := read(guard, other)
	require.Equal(t, map[string]bool{"data.policycheck.rules.guard": true, "data.policycheck.rules.other": true}, before.Packages)
	require.Equal(t, map[string]int{
		"data.policycheck.rules.guard.deny":        2,
		"data.policycheck.rules.guard.f":           2,
		"data.policycheck.rules.guard.allow":       2,
		"data.policycheck.rules.guard.limits.hard": 1,
		"data.policycheck.rules.guard.limits":      1,
		"data.policycheck.rules.other.hide":        1,
	}, before.Rules)

	pkgs, rules := before.Dropped(before)
	require.Empty(t, pkgs)
	require.Empty(t, rules)

	weaker := `package policycheck.rules.guard

deny contains "a" if input.x

f(x) := 1 if x > 1
f(x) := 2 if x <= 1

allow if input.z

limits.hard := 5
limits[k] := 1 if some k in input.ks
`
	pkgs, rules = before.Dropped(read(weaker))
	require.Equal(t, []string{"data.policycheck.rules.other"}, pkgs)
	require.Equal(t, []string{
		"data.policycheck.rules.guard.allow (2 definitions, now 1)",
		"data.policycheck.rules.guard.deny (2 definitions, now 1)",
		"data.policycheck.rules.other.hide",
	}, rules)

	// More is never a drop.
	pkgs, rules = read(weaker).Dropped(before)
	require.Empty(t, pkgs)
	require.Empty(t, rules)
}
