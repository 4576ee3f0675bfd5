package facts_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/spectable"
	"github.com/policycheck/policycheck/loader"
)

// TestSpecTables runs every case of the rule-by-rule tables
// (facts/testdata/spec, one file per section of the spec) through Derive
// and compares the facts with the case's expectations; the Tracker, fed
// the history one message at a time and all at once, must produce the
// same facts as Derive. internal/cli's TestSpecTablesThroughEval runs the
// same cases through `policycheck eval`.
func TestSpecTables(t *testing.T) {
	cases, reg, err := spectable.LoadWithRegistry()
	require.NoError(t, err)
	sections := map[string]int{}
	for _, c := range cases {
		sections[c.File]++
		t.Run(c.Title(), func(t *testing.T) {
			h, err := loader.DecodeHistory(c.File, c.History, loader.DefaultLimits())
			require.NoError(t, err)
			f := facts.Derive(h, reg)
			diff, err := c.Diff(f)
			require.NoError(t, err)
			if len(diff) > 0 {
				t.Errorf("Derive disagrees with %s (%s):\n%s", c.Rule, c.Name, strings.Join(diff, "\n"))
			}

			one := facts.NewTracker(reg)
			for i := range h {
				one.Append(h[i])
			}
			require.Equal(t, f, one.Facts(), "Tracker fed one message at a time")
			all := facts.NewTracker(reg)
			all.Append(h...)
			require.Equal(t, f, all.Facts(), "Tracker fed the whole history")
		})
	}
	for _, file := range []string{"windows.json", "discovery.json", "loads.json", "evidence.json", "active.json", "returned.json"} {
		require.NotZero(t, sections[file], "the table %s has no cases", file)
	}
}
