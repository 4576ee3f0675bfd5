package facts_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
)

// TestRegistryRejects: every rule NewRegistry enforces names the offending
// entry's JSON pointer, and the limits of each rule are accepted.
func TestRegistryRejects(t *testing.T) {
	zero, minus := 0, -1
	cases := map[string]struct {
		caps  []facts.Capability
		tools []facts.Tool
		want  string
	}{
		"empty tool name":        {tools: []facts.Tool{{Name: ""}}, want: "/tools/0/name: tool name must be a non-empty string"},
		"load_capability":        {tools: []facts.Tool{{Name: "load_capability"}}, want: "/tools/0/name: tool name 'load_capability' is reserved"},
		"search_tools":           {tools: []facts.Tool{{Name: "search_tools"}}, want: "/tools/0/name: tool name 'search_tools' is reserved"},
		"duplicate tool":         {tools: []facts.Tool{{Name: "a"}, {Name: "a"}}, want: `/tools/1/name: duplicate tool name "a" (first at /tools/0)`},
		"negative max_retries":   {tools: []facts.Tool{{Name: "a", MaxRetries: &minus}}, want: "/tools/0/max_retries: max_retries must be >= 0"},
		"unknown capability":     {tools: []facts.Tool{{Name: "a", Capability: "nope"}}, want: `/tools/0/capability: tool "a" names unknown capability "nope"`},
		"empty capability id":    {caps: []facts.Capability{{ID: ""}}, want: "/capabilities/0/id: capability id must be a non-empty string"},
		"empty deferred id":      {caps: []facts.Capability{{ID: "", DeferLoading: true}}, want: "/capabilities/0/id: a deferred capability must have an explicit, non-empty id"},
		"duplicate capability":   {caps: []facts.Capability{{ID: "c"}, {ID: "c"}}, want: `/capabilities/1/id: duplicate capability id "c" (first at /capabilities/0)`},
		"empty tool label":       {tools: []facts.Tool{{Name: "a", Labels: []string{"x", ""}}}, want: "/tools/0/labels/1: a label must be a non-empty string"},
		"empty capability label": {caps: []facts.Capability{{ID: "c", Labels: []string{""}}}, want: "/capabilities/0/labels/0: a label must be a non-empty string"},
		"later errors still say": {tools: []facts.Tool{{Name: ""}, {Name: "search_tools"}}, want: "/tools/1/name: tool name 'search_tools' is reserved"},
	}
	for note, tc := range cases {
		_, err := facts.NewRegistry(tc.caps, tc.tools)
		require.Error(t, err, note)
		require.Contains(t, err.Error(), tc.want, note)
	}
	reg, err := facts.NewRegistry([]facts.Capability{{ID: "c"}, {ID: "d", DeferLoading: true}},
		[]facts.Tool{{Name: "a", MaxRetries: &zero}, {Name: "b", Capability: "c"}, {Name: "e", Capability: "d"}})
	require.NoError(t, err, "max_retries 0 is allowed")
	require.Equal(t, []string{"b"}, reg.OwnedTools("c"))
	require.Equal(t, []string{"e"}, reg.OwnedTools("d"))
	require.Empty(t, reg.OwnedTools(""), "a tool without capability is owned by none")
	require.True(t, reg.HasLoadCapability())
	require.False(t, strings.Contains(strings.Join(reg.ToolNames(), ","), "load_capability"))
	// No configured-deferred capability: load_capability is absent (an
	// always-on capability does not bring it).
	plain, err := facts.NewRegistry([]facts.Capability{{ID: "c"}}, []facts.Tool{{Name: "b", Capability: "c"}})
	require.NoError(t, err)
	require.False(t, plain.HasLoadCapability(), "load_capability without a deferred capability")
}

// TestRegistryLabels: a tool carries its own labels and its capability's,
// sorted and without duplicates; a tool without labels has an empty list.
func TestRegistryLabels(t *testing.T) {
	reg, err := facts.NewRegistry(
		[]facts.Capability{{ID: "vault", Labels: []string{"secret", "audited"}}, {ID: "plain"}},
		[]facts.Tool{{Name: "read", Capability: "vault", Labels: []string{"secret", "internal"}}, {Name: "get", Capability: "plain"}, {Name: "mail", Labels: []string{"external"}}})
	require.NoError(t, err)
	for name, want := range map[string][]string{"read": {"audited", "internal", "secret"}, "get": {}, "mail": {"external"}} {
		tool, ok := reg.Tool(name)
		require.True(t, ok)
		require.Equal(t, want, tool.Labels, name)
	}
	c, _ := reg.Capability("vault")
	require.Equal(t, []string{"audited", "secret"}, c.Labels)
}

// TestPositionBefore: Before is a strict order on positions.
func TestPositionBefore(t *testing.T) {
	p := func(m, part int) facts.Position { return facts.Position{Message: m, Part: part} }
	require.True(t, p(0, 5).Before(p(1, 0)))
	require.True(t, p(1, 0).Before(p(1, 1)))
	require.False(t, p(1, 1).Before(p(1, 1)), "a position is not before itself")
	require.False(t, p(1, 1).Before(p(1, 0)))
	require.False(t, p(1, 0).Before(p(0, 5)))
	require.False(t, p(2, 0).Before(p(1, 9)))
}
