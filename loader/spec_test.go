package loader_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/spectable"
	"github.com/policycheck/policycheck/loader"
)

// TestEvidenceReadAsTheSpecSays decodes every case of the rule-by-rule
// fact tables (facts/testdata/spec) and checks the facts derived from
// what the loader read. The tables hold, for each reveal form (typed
// search return, provider-side search return, legacy metadata, delta),
// each load form (object args, string args, overwritten and unpaired
// ids, outcomes) and each compaction payload form (encrypted_content,
// content, neither), an accepted case and one just outside the rule, so
// a misreading in the loader changes the facts of one of them.
func TestEvidenceReadAsTheSpecSays(t *testing.T) {
	cases, reg, err := spectable.LoadWithRegistry()
	require.NoError(t, err)
	for _, c := range cases {
		t.Run(c.Title(), func(t *testing.T) {
			h, err := loader.DecodeHistory(c.File, c.History, loader.DefaultLimits())
			require.NoError(t, err)
			diff, err := c.Diff(facts.Derive(h, reg))
			require.NoError(t, err)
			if len(diff) > 0 {
				t.Errorf("%s (%s):\n%s", c.Rule, c.Name, strings.Join(diff, "\n"))
			}
			// Decoded in pieces, as a server appends a growing history,
			// the messages read the same.
			for cut := 0; cut <= len(h); cut++ {
				msgs := splitHistory(t, c.History)
				first, err := loader.DecodeMessages(c.File, []byte("["+strings.Join(msgs[:cut], ",")+"]"), 0, loader.DefaultLimits())
				require.NoError(t, err)
				rest, err := loader.DecodeMessages(c.File, []byte("["+strings.Join(msgs[cut:], ",")+"]"), cut, loader.DefaultLimits())
				require.NoError(t, err)
				require.Equal(t, facts.Derive(h, reg), facts.Derive(append(first, rest...), reg), "cut at %d", cut)
			}
		})
	}
}

// splitHistory returns the raw messages of a history array.
func splitHistory(t *testing.T, data []byte) []string {
	t.Helper()
	var raw []json.RawMessage
	require.NoError(t, json.Unmarshal(data, &raw))
	out := make([]string, len(raw))
	for i, m := range raw {
		out[i] = string(m)
	}
	return out
}
