package facts_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/loader"
)

// fuzzOptions turns the fuzzer's knobs into generator options. Histories
// stay under 64 messages: every prefix is derived from scratch, so an
// input costs time quadratic in its length.
func fuzzOptions(messages, tools, caps, compaction, noise uint8) gen.Options {
	return gen.Options{
		Messages:       int(messages % 64),
		Tools:          int(tools % 48),
		Capabilities:   int(caps % 8),
		CompactionRate: float64(compaction) / 255,
		Noise:          float64(noise) / 510, // at most 0.5
	}
}

// FuzzDerive checks the invariants of Derive and its agreement with the
// incremental Tracker, on a generated registry and history (from seed and
// knobs) and, when raw decodes, on raw as a history with the same
// registry.
func FuzzDerive(f *testing.F) {
	f.Add(int64(1), uint8(12), uint8(24), uint8(4), uint8(8), uint8(10), uint8(3), []byte(nil))
	f.Add(int64(2), uint8(60), uint8(10), uint8(3), uint8(80), uint8(60), uint8(7), []byte(nil))
	f.Add(int64(3), uint8(200), uint8(40), uint8(6), uint8(20), uint8(5), uint8(1), []byte(nil))
	f.Add(int64(4), uint8(1), uint8(0), uint8(0), uint8(255), uint8(255), uint8(0), []byte(nil))
	if dir, err := conformance.SharedDir(); err == nil {
		cases, err := conformance.Load(filepath.Join(dir, "conformance", "cases"))
		require.NoError(f, err)
		for i, c := range cases {
			f.Add(int64(i), uint8(i%32), uint8(24), uint8(4), uint8(30), uint8(20), uint8(i), []byte(c.History))
		}
	}
	f.Fuzz(deriveProperties)
}

// deriveProperties is the body of FuzzDerive.
func deriveProperties(t *testing.T, seed int64, messages, tools, caps, compaction, noise, chunks uint8, raw []byte) {
	lim := loader.DefaultLimits()
	lim.MaxBytes = 1 << 20
	o := fuzzOptions(messages, tools, caps, compaction, noise)
	reg, err := loader.ParseRegistry("gen.json", gen.Registry(seed, o))
	require.NoError(t, err)
	msgs := gen.Messages(seed, o)
	data := gen.History(seed, o)
	h, err := loader.DecodeHistory("gen.json", data, lim)
	require.NoError(t, err, "a generated history must decode")
	rnd := rand.New(rand.NewPCG(uint64(seed), uint64(chunks)))

	checkInvariants(t, h, reg)
	checkTrackerPrefixes(t, h, reg)
	// Random chunks, each decoded on its own as an appended batch.
	tr := facts.NewTracker(reg)
	for a := 0; a < len(msgs); {
		b := min(len(msgs), a+1+rnd.IntN(int(chunks)%16+1))
		batch := append(append([]byte("["), bytes.Join(msgs[a:b], []byte(","))...), ']')
		got, err := loader.DecodeMessages("chunk.json", batch, a, lim)
		require.NoError(t, err)
		tr.Append(got...)
		require.Equal(t, facts.Derive(h[:b], reg), tr.Facts(), "after chunk [%d:%d]", a, b)
		a = b
	}

	if len(raw) == 0 {
		return
	}
	hr, err := loader.DecodeHistory("raw.json", raw, lim)
	if err != nil {
		return
	}
	checkInvariants(t, hr, reg)
	checkTrackerPrefixes(t, hr, reg)
	tr = facts.NewTracker(reg)
	for a := 0; a < len(hr); {
		b := min(len(hr), a+1+rnd.IntN(4))
		tr.Append(hr[a:b]...)
		require.Equal(t, facts.Derive(hr[:b], reg), tr.Facts(), "raw, after chunk [%d:%d]", a, b)
		a = b
	}
}

// checkTrackerPrefixes feeds h to a tracker one message at a time and
// compares it with Derive on every prefix.
func checkTrackerPrefixes(t *testing.T, h facts.History, reg *facts.Registry) {
	t.Helper()
	tr := facts.NewTracker(reg, allOptions)
	require.Equal(t, facts.Derive(nil, reg), tr.Facts(), "empty history")
	for n := 1; n <= len(h); n++ {
		tr.Append(h[n-1])
		require.Equal(t, n, tr.Len())
		require.Equal(t, facts.Derive(h[:n], reg), tr.Facts(), "prefix of %d messages", n)
		require.Equal(t, facts.Derive(h[:n], reg, allOptions), tr.FactsWith(allOptions), "prefix of %d messages, every option", n)
		// Without the calls, Derive summarises the returns on its own
		// (returnsByTool): the same summary.
		require.Equal(t, tr.FactsWith(allOptions).ReturnsByTool, facts.Derive(h[:n], reg, summaryOnly).ReturnsByTool, "prefix of %d messages, the returns alone", n)
	}
	plain := facts.NewTracker(reg)
	plain.Append(h...)
	require.Nil(t, plain.FactsWith(allOptions).ToolCalls, "a tracker keeps only the optional facts it was built for")
	require.Nil(t, plain.Facts().Unvouched, "a tracker without a Voucher lists no unvouched evidence")

	// Verified evidence: a vouched tracker agrees with Derive with the voucher on
	// every prefix, and removing evidence never adds any.
	vt := facts.NewTracker(reg, allOptions, facts.VouchedBy(oddCallsUnvouched))
	for n := 1; n <= len(h); n++ {
		vt.Append(h[n-1])
		want := facts.Derive(h[:n], reg, allOptions, facts.VouchedBy(oddCallsUnvouched))
		require.Equal(t, want, vt.FactsWith(allOptions), "vouched, prefix of %d messages", n)
		all := facts.Derive(h[:n], reg)
		requireSubset(t, want.Discovered, all.Discovered, "vouched discovered")
		requireSubset(t, want.Loaded, all.Loaded, "vouched loaded")
		requireSubset(t, want.Outgoing.Discovered, all.Outgoing.Discovered, "vouched outgoing discovered")
		requireSubset(t, want.ActiveCapabilities, all.ActiveCapabilities, "vouched active capabilities")
		if want.Dispatch != nil {
			requireSubset(t, want.Dispatch.ActiveCapabilities, all.Dispatch.ActiveCapabilities, "vouched dispatch active capabilities")
			requireSubset(t, want.Dispatch.SameResponse.Revealed, all.Dispatch.SameResponse.Revealed, "vouched same-response reveals")
		}
	}
}

// oddCallsUnvouched vouches for the calls at an even position sum only:
// a deterministic mix of vouched and unvouched evidence.
var oddCallsUnvouched = facts.VoucherFunc(func(c facts.Claim) string {
	if (c.CallAt.Message+c.CallAt.Part)%2 == 0 {
		return ""
	}
	return "odd call position"
})

// allOptions asks for every optional fact.
var allOptions = facts.Options{ToolCalls: true, ReturnsByTool: true, Flows: true}

// summaryOnly asks for the per-tool summary of the returns without the
// calls (what input.call.window needs).
var summaryOnly = facts.Options{ReturnsByTool: true}

// bruteToolCalls is the definition of facts.ToolCalls, transcribed
// literally: every tool-call part, and for each the first tool-return or
// retry-prompt part after it that carries its tool_call_id.
func bruteToolCalls(h facts.History) []facts.ToolCallRecord {
	out := []facts.ToolCallRecord{}
	for m := range h {
		for p, part := range h[m].Parts {
			if part.Kind != facts.ToolCall {
				continue
			}
			rec := facts.ToolCallRecord{Tool: part.ToolName, Message: m, Part: p, Timestamp: h[m].Timestamp, Args: part.Args}
			if part.HasToolCallID {
				id := part.ToolCallID
				rec.ToolCallID = &id
			found:
				for m2 := m; m2 < len(h); m2++ {
					for p2, o := range h[m2].Parts {
						if m2 == m && p2 <= p || !o.HasToolCallID || o.ToolCallID != id {
							continue
						}
						switch o.Kind {
						case facts.ToolReturn:
							rec.Outcome = facts.CallReturned
							break found
						case facts.RetryPrompt:
							rec.Outcome = facts.CallRetried
							break found
						}
					}
				}
			}
			out = append(out, rec)
		}
	}
	return out
}

// checkInvariants checks properties of Derive that hold for every history.
func checkInvariants(t *testing.T, h facts.History, reg *facts.Registry) {
	t.Helper()
	f := facts.Derive(h, reg)
	require.Nil(t, f.ToolCalls, "tool calls only when asked for")
	require.Equal(t, bruteToolCalls(h), facts.Derive(h, reg, allOptions).ToolCalls, "tool calls")

	requireWindow(t, h, f.Window, "window")
	for _, list := range [][]string{f.Discovered, f.Loaded, f.Returned, f.ActiveCapabilities, f.Outgoing.Discovered, f.Outgoing.Loaded} {
		requireSortedSet(t, list)
	}
	// Every fact comes from a part inside the window.
	reveals, loads, returns := evidenceFrom(h, f.Window)
	requireSubset(t, f.Discovered, reveals, "discovered names come from reveals in the window")
	requireSubset(t, f.Outgoing.Discovered, f.Discovered, "outgoing discovered ⊆ discovered")
	requireSubset(t, f.Loaded, loads, "loaded ids come from load calls in the window")
	requireSubset(t, f.Returned, returns, "returned names come from returns in the window")
	requireSubset(t, reg.AlwaysOnCapabilities(), f.ActiveCapabilities, "active ⊇ always-on")
	requireSubset(t, f.ActiveCapabilities, union(reg.AlwaysOnCapabilities(), reg.DeferredCapabilities()), "active ⊆ registered")

	last := len(h) - 1
	if last < 0 || h[last].Kind != facts.Response {
		require.Nil(t, f.Dispatch, "no dispatch without a final response")
		return
	}
	d := f.Dispatch
	require.NotNil(t, d, "dispatch when the last message is a response")
	R := h[last]
	if R.HasProvider {
		require.NotNil(t, d.Provider)
		require.Equal(t, R.Provider, *d.Provider)
	} else {
		require.Nil(t, d.Provider)
		require.Equal(t, f.Window, d.Window, "no provider: the conservative window")
	}
	requireWindow(t, h, d.Window, "dispatch window")
	require.False(t, after(d.Window, f.Window), "the anchored window %v starts after the conservative one %v", d.Window, f.Window)
	for _, list := range [][]string{d.Loaded, d.Evidence.Discovered, d.Evidence.Loaded, d.ActiveCapabilities, d.SameResponse.Revealed, d.SameResponse.PendingLoads} {
		requireSortedSet(t, list)
	}
	requireDisjoint(t, d.Evidence.Discovered, f.Discovered, "evidence discovered ∩ discovered")
	requireDisjoint(t, d.Evidence.Loaded, d.Loaded, "evidence loaded ∩ dispatch loaded")
	requireSubset(t, d.Evidence.Loaded, reg.DeferredCapabilities(), "evidence loaded ⊆ deferred")
	anchoredReveals, anchoredLoads, _ := evidenceFrom(h, d.Window)
	requireSubset(t, d.Evidence.Discovered, anchoredReveals, "evidence names come from reveals in the anchored window")
	requireSubset(t, d.Evidence.Loaded, anchoredLoads, "evidence ids come from load calls in the anchored window")
	requireSubset(t, reg.AlwaysOnCapabilities(), d.ActiveCapabilities, "dispatch active ⊇ always-on")
	requireSubset(t, d.Evidence.Loaded, d.ActiveCapabilities, "dispatch active ⊇ evidence loaded")
	for _, id := range d.Loaded {
		if reg.IsDeferred(id) {
			require.Contains(t, d.ActiveCapabilities, id, "dispatch active ⊇ dispatch loaded ∩ deferred")
		}
	}
	require.Equal(t, facts.Derive(h[:last], reg).Loaded, d.Loaded, "dispatch loaded is the loaded set before R")

	var calls []int
	for i, p := range R.Parts {
		if p.Kind == facts.ToolCall {
			calls = append(calls, i)
		}
	}
	require.Len(t, d.Calls, len(calls))
	for i, c := range d.Calls {
		p := R.Parts[calls[i]]
		require.Equal(t, calls[i], c.Part)
		require.Equal(t, p.ToolName, c.Tool)
		require.Equal(t, p.HasToolCallID, c.ToolCallID != nil)
	}
}

// evidenceFrom collects what parts from start on reveal, load and return.
func evidenceFrom(h facts.History, start facts.Position) (reveals, loads, returns []string) {
	for m := start.Message; m < len(h); m++ {
		p0 := 0
		if m == start.Message {
			p0 = start.Part
		}
		for _, p := range h[m].Parts[p0:] {
			reveals = append(reveals, p.Reveals...)
			if p.HasLoadID {
				loads = append(loads, p.LoadID)
			}
			if p.Kind == facts.ToolReturn {
				returns = append(returns, p.ToolName)
			}
		}
	}
	return reveals, loads, returns
}

func requireWindow(t *testing.T, h facts.History, w facts.Position, what string) {
	t.Helper()
	if w == (facts.Position{}) {
		return
	}
	require.GreaterOrEqual(t, w.Message, 0, what)
	require.Less(t, w.Message, len(h), what)
	require.GreaterOrEqual(t, w.Part, 0, what)
	require.Less(t, w.Part, len(h[w.Message].Parts), what)
	require.Equal(t, facts.Compaction, h[w.Message].Parts[w.Part].Kind, "%s starts at a compaction part", what)
}

// after reports whether position a is strictly after b.
func after(a, b facts.Position) bool {
	return a.Message > b.Message || (a.Message == b.Message && a.Part > b.Part)
}

func requireSortedSet(t *testing.T, s []string) {
	t.Helper()
	require.NotNil(t, s, "name lists are never nil")
	require.True(t, slices.IsSorted(s), "not sorted: %q", s)
	require.Equal(t, len(s), len(slices.Compact(slices.Clone(s))), "duplicates: %q", s)
}

func requireSubset(t *testing.T, sub, super []string, what string) {
	t.Helper()
	for _, s := range sub {
		require.Contains(t, super, s, what)
	}
}

func requireDisjoint(t *testing.T, a, b []string, what string) {
	t.Helper()
	for _, s := range a {
		require.NotContains(t, b, s, fmt.Sprintf("%s: %q in both", what, s))
	}
}

func union(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}
