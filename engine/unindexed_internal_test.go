package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/loader"
)

// TestRuleIndexOffOnlyWhereItWouldSwallowAnError: a policy set that
// calls a built-in OPA's rule index answers without evaluating it
// (affixRuleIndexed) is evaluated with the index off, so a wrong type
// raises its error; the shipped policies alone and with each example
// policy set keep the index, so their evaluation is what it was.
func TestRuleIndexOffOnlyWhereItWouldSwallowAnError(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ReadRegistry("../examples/registry.yaml")
	require.NoError(t, err)
	unindexed := func(t *testing.T, opts ...Option) bool {
		t.Helper()
		e, err := New(ctx, append(opts, Registry(reg))...)
		require.NoError(t, err)
		return e.snap.Load().unindexed
	}
	assert.False(t, unindexed(t), "the shipped policies")
	examples, err := filepath.Glob("../examples/policies/*")
	require.NoError(t, err)
	require.NotEmpty(t, examples)
	for _, dir := range examples {
		assert.False(t, unindexed(t, Policies(os.DirFS(dir))), dir)
	}
	for body, want := range map[string]bool{
		`startswith(input.call.args.repo, "prod-")`:                 true,
		`endswith(input.call.args.repo, "-prod")`:                   true,
		`strings.any_prefix_match(input.call.args.repo, ["prod-"])`: true,
		`strings.any_suffix_match(input.call.args.repo, ["-prod"])`: true,
		`glob.match("prod-*", [], input.call.args.repo)`:            true,
		`x := startswith(input.call.args.repo, "prod-"); x`:         false, // a captured result is evaluated
		`input.call.args.repo == "prod"`:                            false, // equality never raises
		`contains(input.call.args.repo, "prod")`:                    false, // not indexed: evaluated, so it raises
	} {
		mod := "package policycheck.rules.repos\n\ndeny contains \"no\" if {\n\t" + body + "\n}\n"
		got := unindexed(t, Policies(fstest.MapFS{"repos.rego": {Data: []byte(mod)}}))
		assert.Equal(t, want, got, body)
	}
}
