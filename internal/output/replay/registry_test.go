package replay_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/output/replay"
	"github.com/policycheck/policycheck/loader"
)

// TestRegistryChanges names every change a decision reads, in registry
// order, and nothing for a description or for a registry written
// another way.
func TestRegistryChanges(t *testing.T) {
	parse := func(yaml string) *facts.Registry {
		t.Helper()
		reg, err := loader.ParseRegistry("registry.yaml", []byte(yaml))
		require.NoError(t, err)
		return reg
	}
	base := parse(`capabilities:
  - {id: vault, defer_loading: true}
  - {id: docs}
  - {id: old}
tools:
  - {name: get_time}
  - {name: secret_op, capability: vault}
  - {name: search_docs, capability: docs, defer_loading: true}
  - {name: issue_refund, max_retries: 2}
  - {name: gone}
`)
	cand := parse(`capabilities:
  - {id: vault}
  - {id: docs, defer_loading: true}
  - {id: billing, defer_loading: true}
tools:
  - {name: get_time, description: "Now with a description"}
  - {name: secret_op, capability: billing}
  - {name: search_docs, capability: docs}
  - {name: issue_refund}
  - {name: new_tool, capability: billing}
`)
	require.Equal(t, []string{
		"capability vault: defer_loading true -> false",
		"capability docs: defer_loading false -> true",
		"capability old: removed",
		"capability billing: added (defer_loading true)",
		"tool secret_op: capability vault -> billing",
		"tool search_docs: defer_loading true -> false",
		"tool issue_refund: max_retries 2 -> 1",
		"tool gone: removed",
		"tool new_tool: added (capability billing)",
	}, replay.RegistryChanges(base, cand))
	same := parse("tools:\n  - name: get_time\n    description: Now\n")
	require.Nil(t, replay.RegistryChanges(same, parse(`{"tools": [{"name": "get_time"}]}`)))
}
