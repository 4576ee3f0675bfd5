package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
)

// TestExplainPlacesTheEvidence: the explanation says where each load
// pair and compaction sits, whether the load lies in the conservative
// window and in the window the serving provider saw (another provider's
// compaction is no boundary for it), and which rule, at which file, row
// and column, decided each call.
func TestExplainPlacesTheEvidence(t *testing.T) {
	reg := mustRegistry(t, secretsRegistry)
	e := mustEngine(t, reg)
	h := mustHistory(t,
		wReq(wUser("rotate")),
		wResp("", wLoadCall("l1", "secrets")),
		wReq(wLoadReturn("l1"), wDelta("l1", "rotate_key", "secret_op")),
		wResp("openai", wCompaction("openai", "summary")),
		wReq(wUser("go on")),
		wResp("anthropic", wCall("secret_op", "c1", `{}`)))
	x, err := e.Explain(context.Background(), engine.Request{History: h})
	require.NoError(t, err)
	assert.Equal(t, []facts.Position{{Message: 3, Part: 0}}, x.Compactions)
	assert.Equal(t, facts.Position{Message: 3, Part: 0}, x.Decision.Window)
	var secretOp *engine.ToolExplained
	for i := range x.Tools {
		if x.Tools[i].Name == "secret_op" {
			secretOp = &x.Tools[i]
		}
		if x.Tools[i].Name == "get_time" {
			assert.Empty(t, x.Tools[i].Loads, "an always-on tool has no evidence")
			assert.Empty(t, x.Tools[i].Reveals, "an always-on tool has no evidence")
		}
	}
	require.NotNil(t, secretOp)
	yes := true
	require.Len(t, secretOp.Loads, 1)
	l := secretOp.Loads[0]
	assert.Equal(t, "secrets", l.Capability)
	assert.Equal(t, facts.Position{Message: 1, Part: 0}, l.Call)
	assert.Equal(t, facts.Position{Message: 2, Part: 0}, l.Return)
	assert.False(t, l.InWindow)
	assert.Equal(t, &yes, l.InDispatchWindow)
	require.Len(t, x.Calls, 1)
	d := x.Calls[0].DecidedBy
	require.NotNil(t, d)
	assert.Equal(t, "policycheck.lib.gate", d.Package)
	assert.Equal(t, "verdict", d.Rule)
	// The location is the rule's first definition in the shipped file.
	file, row, ok := strings.Cut(d.Location, ":")
	require.True(t, ok, d.Location)
	row, _, _ = strings.Cut(row, ":")
	n, err := strconv.Atoi(row)
	require.NoError(t, err, d.Location)
	src, err := os.ReadFile(filepath.Join("..", file))
	require.NoError(t, err)
	lines := strings.Split(string(src), "\n")
	require.Less(t, n-1, len(lines), d.Location)
	assert.True(t, strings.HasPrefix(lines[n-1], "verdict("), "%s is %q", d.Location, lines[n-1])
}
