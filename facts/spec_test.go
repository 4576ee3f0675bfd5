package facts_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/spectable"
	"github.com/policycheck/policycheck/loader"
)

// evalShape renders facts as `policycheck eval` prints them (the
// decision's "window", "facts" and "dispatch"), so that one table of
// expectations serves Derive, the Tracker and the command line.
func evalShape(f facts.Facts) map[string]any {
	doc := map[string]any{
		"window": f.Window,
		"facts": map[string]any{
			"discovered":          f.Discovered,
			"loaded":              f.Loaded,
			"returned":            f.Returned,
			"active_capabilities": f.ActiveCapabilities,
		},
	}
	if d := f.Dispatch; d != nil {
		doc["dispatch"] = map[string]any{
			"provider":            d.Provider,
			"window":              d.Window,
			"loaded":              d.Loaded,
			"evidence":            map[string]any{"discovered": d.Evidence.Discovered, "loaded": d.Evidence.Loaded},
			"active_capabilities": d.ActiveCapabilities,
		}
	}
	return doc
}

// TestSpecTables runs every case of the rule-by-rule tables
// (facts/testdata/spec, one file per section of the spec) through Derive
// and compares the facts with the case's expectations; the Tracker, fed
// the history one message at a time and all at once, must produce the
// same facts as Derive. internal/cli's TestSpecTablesThroughEval runs the
// same cases through `policycheck eval`.
func TestSpecTables(t *testing.T) {
	cases, err := spectable.Load()
	require.NoError(t, err)
	reg, err := loader.ReadRegistry(spectable.RegistryFile())
	require.NoError(t, err)
	sections := map[string]int{}
	for _, c := range cases {
		sections[c.File]++
		t.Run(c.Title(), func(t *testing.T) {
			h, err := loader.DecodeHistory(c.File, c.History, loader.DefaultLimits())
			require.NoError(t, err)
			f := facts.Derive(h, reg)
			got, err := spectable.Normalize(evalShape(f))
			require.NoError(t, err)
			want, err := spectable.Normalize(c.Want)
			require.NoError(t, err)
			if diff := spectable.Mismatches(want, got); len(diff) > 0 {
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
