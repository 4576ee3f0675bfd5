package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
)

// TestReloadStartsFromTheConstructionOptions: options given to one Reload
// do not pile up into the next, so a service that reloads a module under
// the same name again and again keeps working, and the last reload wins.
func TestReloadStartsFromTheConstructionOptions(t *testing.T) {
	ctx := context.Background()
	reg, err := facts.NewRegistry([]facts.Capability{{ID: "ops"}}, []facts.Tool{
		{Name: "a", Capability: "ops"}, {Name: "b", Capability: "ops"},
	})
	require.NoError(t, err)
	keep := func(name string) engine.Source {
		return engine.Source{File: "ops.rego", Text: "package policycheck.capabilities.ops\n\n" +
			"prepare_tools contains t.name if {\n\tsome t in input.tools\n\tt.name == \"" + name + "\"\n}\n"}
	}
	e, err := engine.New(ctx, engine.Registry(reg))
	require.NoError(t, err)
	for _, name := range []string{"a", "b", "a"} {
		require.NoError(t, e.Reload(ctx, engine.Modules(keep(name))), "reload keeping %s", name)
		d, err := e.Decide(ctx, engine.Request{})
		require.NoError(t, err)
		require.Equal(t, []string{name}, d.Available)
	}
	require.NoError(t, e.Reload(ctx))
	d, err := e.Decide(ctx, engine.Request{})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, d.Available, "a bare Reload is back to the construction options")
}
