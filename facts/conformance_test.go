package facts_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/loader"
)

// caseRegistry builds the registry of a conformance case directly, so that
// this package's tests do not depend on the registry schema.
func caseRegistry(t testing.TB, raw json.RawMessage) *facts.Registry {
	t.Helper()
	var doc struct {
		Capabilities []facts.Capability `json:"capabilities"`
		Tools        []struct {
			Name         string  `json:"name"`
			Capability   *string `json:"capability"`
			DeferLoading bool    `json:"defer_loading"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	tools := make([]facts.Tool, len(doc.Tools))
	for i, tl := range doc.Tools {
		tools[i] = facts.Tool{Name: tl.Name, DeferLoading: tl.DeferLoading}
		if tl.Capability != nil {
			tools[i].Capability = *tl.Capability
		}
	}
	reg, err := facts.NewRegistry(doc.Capabilities, tools)
	require.NoError(t, err)
	return reg
}

func pos(p conformance.Position) facts.Position {
	return facts.Position{Message: p.Message, Part: p.Part}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TestConformanceFacts checks window, discovered, loaded and the dispatch
// facts of every shared conformance case, through both Derive and the
// incremental Tracker.
func TestConformanceFacts(t *testing.T) {
	for _, c := range conformance.Cases(t) {
		t.Run(filepath.Base(c.File), func(t *testing.T) {
			reg := caseRegistry(t, c.Registry)
			h, err := loader.DecodeHistory(c.File, c.History, loader.DefaultLimits())
			require.NoError(t, err)

			f := facts.Derive(h, reg)
			require.Equal(t, pos(c.Expect.Window), f.Window, "window")
			require.Equal(t, orEmpty(c.Expect.Discovered), f.Discovered, "discovered")
			require.Equal(t, orEmpty(c.Expect.Loaded), f.Loaded, "loaded")
			if d := c.Expect.Dispatch; d != nil {
				require.NotNil(t, f.Dispatch)
				require.Equal(t, d.Provider, f.Dispatch.Provider, "provider")
				require.Equal(t, pos(d.AnchoredWindow), f.Dispatch.Window, "anchored window")
				require.Equal(t, orEmpty(d.EvidenceDiscovered), f.Dispatch.Evidence.Discovered, "evidence discovered")
				// The oracle reports the snapshot's raw evidence; design.md
				// narrows it to configured-deferred ids (deliberate
				// difference 2, spec A5).
				narrowed := []string{}
				for _, id := range d.EvidenceLoaded {
					if reg.IsDeferred(id) {
						narrowed = append(narrowed, id)
					}
				}
				require.Equal(t, narrowed, f.Dispatch.Evidence.Loaded, "evidence loaded, narrowed")
			}

			tr := facts.NewTracker(reg)
			tr.Append(h...)
			require.Equal(t, f, tr.Facts(), "tracker")
		})
	}
}

// TestTrackerEqualsDeriveOnEveryPrefix feeds each conformance history to a
// tracker one message at a time and compares its facts with a full
// derivation of the same prefix.
func TestTrackerEqualsDeriveOnEveryPrefix(t *testing.T) {
	for _, c := range conformance.Cases(t) {
		t.Run(filepath.Base(c.File), func(t *testing.T) {
			reg := caseRegistry(t, c.Registry)
			h, err := loader.DecodeHistory(c.File, c.History, loader.DefaultLimits())
			require.NoError(t, err)
			tr := facts.NewTracker(reg, allOptions)
			require.Equal(t, facts.Derive(nil, reg), tr.Facts(), "empty history")
			for n := 1; n <= len(h); n++ {
				tr.Append(h[n-1])
				require.Equal(t, facts.Derive(h[:n], reg), tr.Facts(), "prefix of %d messages", n)
				require.Equal(t, facts.Derive(h[:n], reg, allOptions), tr.FactsWith(allOptions), "prefix of %d messages, every option", n)
				require.Equal(t, bruteToolCalls(h[:n]), tr.FactsWith(allOptions).ToolCalls, "tool calls of the prefix of %d messages", n)
				require.Equal(t, facts.ReturnsByToolOf(facts.ToolCalls(h[:n]), facts.BuiltinReturns(h[:n]), facts.UnpairedReturns(h[:n])), tr.FactsWith(allOptions).ReturnsByTool,
					"returns by tool of the prefix of %d messages", n)
				require.Equal(t, tr.FactsWith(allOptions).ReturnsByTool, facts.Derive(h[:n], reg, summaryOnly).ReturnsByTool,
					"returns by tool of the prefix of %d messages, derived without the calls", n)
				require.Nil(t, tr.FactsWith(facts.Options{ToolCalls: true}).ReturnsByTool, "only when asked for")
				// The name lists are the caller's own: writing over them
				// changes nothing the tracker answers next.
				spoil(tr.Facts())
				require.Equal(t, facts.Derive(h[:n], reg), tr.Facts(), "prefix of %d messages, after a caller wrote over its facts", n)
			}
		})
	}
}

// spoil writes over every name list of f.
func spoil(f facts.Facts) {
	lists := [][]string{f.Discovered, f.Loaded, f.Returned, f.ActiveCapabilities, f.Outgoing.Discovered, f.Outgoing.Loaded}
	if d := f.Dispatch; d != nil {
		lists = append(lists, d.Loaded, d.ActiveCapabilities, d.Evidence.Discovered, d.Evidence.Loaded)
	}
	for _, l := range lists {
		for i := range l {
			l[i] = "spoiled"
		}
	}
}
