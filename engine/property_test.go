package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/internal/testkit/racetest"
	"github.com/policycheck/policycheck/loader"
)

// Property tests: over generated registries and histories (internal/testkit/gen),
// with generated capability filters and operator rules, the decision keeps
// one definition of "available" — the gate, the verdicts, advertisement and
// the unknown-tool listing never disagree — and it is a pure function of
// its request: the same whatever the order requests arrive in and however
// many goroutines share the engine, and the shared registry is never
// written (seed 004).

// propertyRules hides and denies what the request's context names, so
// that the generated requests reach every verdict.
var propertyRules = engine.Source{File: "rules/property.rego", Text: `package policycheck.rules.property

hide contains name if some name in input.context.hide

deny contains {"reason": "listed in input.context.deny", "message": "Denied for this test."} if {
	input.call.tool in input.context.deny
}
`}

// propertyCase is one generated registry with its engine options and the
// requests to decide against it.
type propertyCase struct {
	seed     int64
	reg      *facts.Registry
	filters  []engine.Source
	opts     []engine.Option
	requests []propertyRequest
}

type propertyRequest struct {
	name    string
	history facts.History
	tracked facts.Facts // the same history's facts from a facts.Tracker
	context any
}

func propertyOptions(seed int64) gen.Options {
	o := gen.Default(20 + int(seed*37)%100)
	o.Tools = 4 + int(seed*7)%24
	o.Capabilities = int(seed) % 6
	o.CompactionRate = []float64{0, 0.05, 0.2, 0.5}[seed%4]
	o.Noise = []float64{0, 0.02, 0.1, 0.3}[seed%4]
	return o
}

// filtersFor writes a capability filter for about half of the registry's
// capabilities: each drops a random subset of the registry's tools, some
// only while another capability is active.
func filtersFor(r *rand.Rand, reg *facts.Registry) []engine.Source {
	var out []engine.Source
	names := reg.ToolNames()
	caps := reg.Capabilities()
	for _, c := range caps {
		if r.IntN(2) == 0 || len(names) == 0 {
			continue
		}
		var drop []string
		for _, n := range names {
			if r.IntN(4) == 0 {
				drop = append(drop, n)
			}
		}
		src := dropFilter(c.ID, drop...)
		if other := caps[r.IntN(len(caps))].ID; r.IntN(3) == 0 {
			src.Text = fmt.Sprintf(`package policycheck.capabilities[%q]

prepare_tools contains t.name if {
	some t in input.tools
	not _dropped(t.name)
}

_dropped(name) if {
	name in %s
	%q in input.active_capabilities
}
`, c.ID, regoSet(drop), other)
		}
		out = append(out, src)
	}
	return out
}

func propertyContext(r *rand.Rand, reg *facts.Registry) any {
	names := reg.ToolNames()
	pick := func() []string {
		var out []string
		for _, n := range names {
			if r.IntN(5) == 0 {
				out = append(out, n)
			}
		}
		return out
	}
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return map[string]any{"hide": pick()}
	case 2:
		return map[string]any{"deny": pick()}
	}
	return map[string]any{"hide": pick(), "deny": pick(), "user": "u1"}
}

// propertyCases generates the registries and requests: for each seed, up
// to eight prefixes of the history that end with a response (each a step
// being dispatched), plus the whole history.
func propertyCases(t testing.TB, seeds int) []propertyCase {
	t.Helper()
	var out []propertyCase
	for seed := int64(1); seed <= int64(seeds); seed++ {
		o := propertyOptions(seed)
		regName := fmt.Sprintf("registry-%d.json", seed)
		reg, err := loader.ParseRegistry(regName, gen.Registry(seed, o))
		require.NoError(t, err, regName)
		r := rand.New(rand.NewPCG(uint64(seed), 0x70726f70))
		pc := propertyCase{seed: seed, reg: reg}
		pc.filters = filtersFor(r, reg)
		pc.opts = []engine.Option{engine.Registry(reg), engine.Modules(append(slices.Clone(pc.filters), propertyRules)...)}

		histName := fmt.Sprintf("history-%d.json", seed)
		full, err := loader.DecodeHistory(histName, gen.History(seed, o), loader.DefaultLimits())
		require.NoError(t, err, histName)
		tr := facts.NewTracker(reg)
		for i := range full {
			// Messages decode independently, so a prefix of the decoded
			// history is the decoded prefix.
			tr.Append(full[i])
			last := i == len(full)-1
			if !last && (full[i].Kind != facts.Response || r.IntN(3) > 0 || len(pc.requests) >= 8) {
				continue
			}
			name := fmt.Sprintf("seed=%d,prefix=%d", seed, i+1)
			pc.requests = append(pc.requests, propertyRequest{name: name, history: full[: i+1 : i+1], tracked: tr.Facts(), context: propertyContext(r, reg)})
		}
		out = append(out, pc)
	}
	return out
}

func isSubset(sub, of []string) bool {
	for _, s := range sub {
		if !slices.Contains(of, s) {
			return false
		}
	}
	return true
}

// checkOneDefinition asserts the invariants that make the gate, the
// verdicts, advertisement and the messages agree.
func checkOneDefinition(t *testing.T, reg *facts.Registry, req propertyRequest, d *engine.Decision) {
	t.Helper()
	known := append(slices.Clone(reg.ToolNames()), facts.LoadCapabilityTool, facts.SearchTool)
	var hidden, denied []string
	if m, ok := req.context.(map[string]any); ok {
		hidden, _ = m["hide"].([]string)
		denied, _ = m["deny"].([]string)
	}
	assert.Empty(t, d.Errors)
	assert.True(t, isSubset(d.Advertised, d.Available), "advertised %v ⊆ available %v", d.Advertised, d.Available)
	assert.True(t, isSubset(d.Available, known), "available %v holds only registry and framework tools", d.Available)
	assert.True(t, slices.IsSorted(d.Available) && slices.IsSorted(d.Advertised), "sorted lists")
	for _, n := range hidden {
		assert.NotContains(t, d.Available, n, "hidden tool")
	}
	if d.Dispatch == nil {
		assert.Empty(t, d.Calls)
		return
	}
	avail := d.Dispatch.Available
	assert.True(t, isSubset(avail, known), "dispatch available %v", avail)
	assert.True(t, slices.IsSorted(avail))
	for _, n := range hidden {
		assert.NotContains(t, avail, n, "hidden tool")
	}
	for _, c := range d.Calls {
		in := slices.Contains(avail, c.Tool)
		switch c.Verdict {
		case engine.Execute:
			assert.True(t, in, "%s executed but not in Dispatch.Available %v", c.Tool, avail)
			assert.Empty(t, c.Message)
			assert.False(t, slices.Contains(denied, c.Tool), "%s is denied by the context", c.Tool)
		case engine.UnknownTool:
			assert.False(t, in, "%s unknown but in Dispatch.Available", c.Tool)
			assert.True(t, strings.HasPrefix(c.Message, "Unknown tool name: "), c.Message)
			if len(avail) > 0 {
				assert.True(t, strings.HasSuffix(c.Message, ". Available tools: "+quotedList(avail)),
					"%q lists exactly %v", c.Message, avail)
			} else {
				assert.NotContains(t, c.Message, "Available tools:")
			}
		case engine.NotAvailableYet:
			assert.False(t, in, "%s not available yet but in Dispatch.Available", c.Tool)
			assert.Contains(t, reg.ToolNames(), c.Tool, "not_available_yet is only for registry tools")
			assert.NotEmpty(t, c.Message)
		case engine.Denied:
			assert.True(t, in, "%s denied by a rule, so past the gate", c.Tool)
			assert.Contains(t, denied, c.Tool)
			assert.Equal(t, "Denied for this test.", c.Message)
		default:
			t.Errorf("verdict %q", c.Verdict)
		}
		if in && !slices.Contains(denied, c.Tool) {
			assert.Equal(t, engine.Execute, c.Verdict, "%s is available and not denied", c.Tool)
		}
	}
}

func decisionJSON(t testing.TB, e *engine.Engine, req engine.Request) string {
	t.Helper()
	d, err := e.Decide(context.Background(), req)
	require.NoError(t, err)
	b, err := json.Marshal(d)
	require.NoError(t, err)
	return string(b)
}

// registrySnapshot is a deep copy of what a Registry exposes.
type registrySnapshot struct {
	Tools        []facts.Tool
	MaxRetries   []int
	Capabilities []facts.Capability
	Names        []string
}

func snapshotRegistry(reg *facts.Registry) registrySnapshot {
	s := registrySnapshot{
		Tools:        slices.Clone(reg.Tools()),
		Capabilities: slices.Clone(reg.Capabilities()),
		Names:        slices.Clone(reg.ToolNames()),
	}
	for i, tool := range s.Tools {
		v := -1
		if tool.MaxRetries != nil {
			v = *tool.MaxRetries
		}
		s.MaxRetries = append(s.MaxRetries, v)
		s.Tools[i].MaxRetries = nil
	}
	return s
}

func TestOneDefinitionOfAvailable(t *testing.T) {
	ctx := context.Background()
	seeds := racetest.Size(40, 10) // one goroutine: in full without -race (scripts/test.sh)
	if testing.Short() {
		seeds = 10
	}
	decisions, calls := 0, map[string]int{}
	for _, pc := range propertyCases(t, seeds) {
		e, err := engine.New(ctx, pc.opts...)
		require.NoError(t, err)
		for _, req := range pc.requests {
			t.Run(req.name, func(t *testing.T) {
				d, err := e.Decide(ctx, engine.Request{History: req.history, Context: req.context})
				require.NoError(t, err)
				decisions++
				for _, c := range d.Calls {
					calls[c.Verdict]++
				}
				checkOneDefinition(t, pc.reg, req, d)

				// The tracker's facts decide the same.
				tracked := req.tracked
				fromTracker, err := e.Decide(ctx, engine.Request{Facts: &tracked, Context: req.context})
				require.NoError(t, err)
				want, _ := json.Marshal(d)
				got, _ := json.Marshal(fromTracker)
				assert.JSONEq(t, string(want), string(got), "tracker facts decide as the history does")
			})
		}
	}
	t.Logf("%d decisions; verdicts %v", decisions, calls)
	// The generator must reach every verdict, or the properties are vacuous.
	for _, v := range []string{engine.Execute, engine.UnknownTool, engine.NotAvailableYet, engine.Denied} {
		assert.Positive(t, calls[v], "no %s verdict generated", v)
	}
}

// TestAdvertisedIsTheGateOverOutgoingEvidence: advertised is what the
// gate makes available from the evidence of the cleaned outgoing history
// alone (design.md "Decisions"), on every prefix of noisy generated
// histories, many of which hold reveals that cleaning removes (orphan
// returns, search returns without a call).
func TestAdvertisedIsTheGateOverOutgoingEvidence(t *testing.T) {
	ctx := context.Background()
	seeds := racetest.Size(24, 8) // one goroutine: in full without -race (scripts/test.sh)
	if testing.Short() {
		seeds = 8
	}
	decisions, cleaned, narrower := 0, 0, 0
	for seed := int64(1); seed <= int64(seeds); seed++ {
		o := propertyOptions(seed)
		o.Noise = 0.3
		reg, err := loader.ParseRegistry("registry.json", gen.Registry(seed, o))
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(uint64(seed), 0x616476))
		e, err := engine.New(ctx, engine.Registry(reg), engine.Modules(append(filtersFor(r, reg), propertyRules)...))
		require.NoError(t, err)
		h, err := loader.DecodeHistory("history.json", gen.History(seed, o), loader.DefaultLimits())
		require.NoError(t, err)
		tr := facts.NewTracker(reg)
		for i, m := range h {
			tr.Append(m)
			f := tr.Facts()
			ctxDoc := propertyContext(r, reg)
			d, err := e.Decide(ctx, engine.Request{Facts: &f, Context: ctxDoc})
			require.NoError(t, err)
			outgoing := f
			outgoing.Discovered, outgoing.Loaded, outgoing.Dispatch = f.Outgoing.Discovered, f.Outgoing.Loaded, nil
			onOutgoing, err := e.Decide(ctx, engine.Request{Facts: &outgoing, Context: ctxDoc})
			require.NoError(t, err)
			require.Equal(t, onOutgoing.Available, d.Advertised, "seed %d, prefix %d", seed, i+1)
			decisions++
			if len(f.Outgoing.Discovered) < len(f.Discovered) {
				cleaned++
			}
			if len(d.Advertised) < len(d.Available) {
				narrower++
			}
		}
	}
	t.Logf("%d decisions, %d where cleaning removed a reveal, %d where advertised is narrower than available", decisions, cleaned, narrower)
	// Without those the property says nothing about cleaning.
	assert.GreaterOrEqual(t, cleaned, 20)
	assert.GreaterOrEqual(t, narrower, 10)
}

// TestDecisionsIndependentOfOrderAndConcurrency: each decision's JSON is
// the same whether the requests come in order, in reverse, shuffled, or
// from 8 goroutines at once on one Engine with a cold cache (each request
// decided by 4 of them, in each goroutine's own order); and no
// request changes the shared registry (seed 004).
func TestDecisionsIndependentOfOrderAndConcurrency(t *testing.T) {
	ctx := context.Background()
	seeds := 10
	if testing.Short() {
		seeds = 4
	}
	for _, pc := range propertyCases(t, seeds) {
		t.Run(fmt.Sprintf("seed=%d", pc.seed), func(t *testing.T) {
			before := snapshotRegistry(pc.reg)
			reqs := make([]engine.Request, len(pc.requests))
			for i, r := range pc.requests {
				reqs[i] = engine.Request{History: r.history, Context: r.context}
			}
			baseline := make([]string, len(reqs))
			// The baseline evaluates every decision (no decision memo): the
			// engines below, memo on, must agree with it.
			seq, err := engine.New(ctx, append(pc.opts, engine.DecisionCache(0))...)
			require.NoError(t, err)
			for i, r := range reqs {
				baseline[i] = decisionJSON(t, seq, r)
			}

			rng := rand.New(rand.NewPCG(uint64(pc.seed), 0x6f72646572))
			orders := map[string][]int{"reverse": {}, "shuffled": rng.Perm(len(reqs))}
			for i := len(reqs) - 1; i >= 0; i-- {
				orders["reverse"] = append(orders["reverse"], i)
			}
			for name, order := range orders {
				e, err := engine.New(ctx, pc.opts...)
				require.NoError(t, err)
				for _, i := range order {
					assert.Equal(t, baseline[i], decisionJSON(t, e, reqs[i]), "%s order, request %s", name, pc.requests[i].name)
				}
			}

			shared, err := engine.New(ctx, pc.opts...)
			require.NoError(t, err)
			const workers = 8
			got := make([][]string, workers)
			var wg sync.WaitGroup
			for w := range workers {
				order := rng.Perm(len(reqs))
				got[w] = make([]string, len(reqs))
				wg.Go(func() {
					for _, i := range order {
						if (i+w)%2 != 0 {
							continue // each request goes to 4 of the 8 goroutines
						}
						d, err := shared.Decide(ctx, reqs[i])
						if err != nil {
							got[w][i] = "error: " + err.Error()
							continue
						}
						b, _ := json.Marshal(d)
						got[w][i] = string(b)
					}
				})
			}
			wg.Wait()
			for w := range workers {
				for i := range reqs {
					if (i+w)%2 != 0 {
						continue
					}
					assert.Equal(t, baseline[i], got[w][i], "goroutine %d, request %s", w, pc.requests[i].name)
				}
			}
			assert.Equal(t, before, snapshotRegistry(pc.reg), "the registry is shared and read-only")
			assert.Same(t, pc.reg, shared.Registry())
		})
	}
}

// propertyHide is propertyRules' hide rule alone.
var propertyHide = engine.Source{File: "rules/property.rego", Text: `package policycheck.rules.property

hide contains name if some name in input.context.hide
`}

// replacementExecutingEverything is a replacement availability policy
// (--no-defaults) that says execute for every call, makes every called
// name dispatch-available and reports the rules' hidden tools.
var replacementExecutingEverything = engine.Source{File: "operator/availability.rego", Text: `package policycheck.availability

called := {c.tool | some c in input.dispatch.calls}

decision := {
	"available": called,
	"advertised": called,
	"dispatch_available": called,
	"verdicts": [{"verdict": "execute", "rule": "gate"} | some _ in input.dispatch.calls],
	"hidden": {n | some n in data.policycheck.rules[_].hide},
}
`}

// TestReplacementCannotExecuteOutsideTheResolvedSet: registry membership
// is part of the gate. Over generated registries, filters, rules and
// histories, a replacement availability policy that says execute for
// every call gets execute exactly for the calls the shipped gate resolves
// (a registry tool no filter dropped and no rule hid, or a framework tool
// present); every other call is denied, failing closed, with a reason.
func TestReplacementCannotExecuteOutsideTheResolvedSet(t *testing.T) {
	ctx := context.Background()
	seeds := racetest.Size(30, 8) // one goroutine: in full without -race (scripts/test.sh)
	if testing.Short() {
		seeds = 8
	}
	refused, executed := 0, 0
	for _, pc := range propertyCases(t, seeds) {
		shipped, err := engine.New(ctx, pc.opts...)
		require.NoError(t, err)
		// The replacement reads hide, not deny: the contract refuses a
		// deny rule it never reads, so only the hide rule comes along.
		replaced, err := engine.New(ctx, engine.Registry(pc.reg), engine.WithoutDefaults(),
			engine.Modules(append(slices.Clone(pc.filters), propertyHide, replacementExecutingEverything)...))
		require.NoError(t, err)
		for _, req := range pc.requests {
			r := engine.Request{History: req.history, Context: req.context}
			want, err := shipped.Decide(ctx, r)
			require.NoError(t, err)
			got, err := replaced.Decide(ctx, r)
			require.NoError(t, err)
			for i, c := range got.Calls {
				resolved := want.Calls[i].Verdict != engine.UnknownTool
				if resolved {
					executed++
					assert.Equal(t, engine.Execute, c.Verdict, "%s: call %d to resolved %q", req.name, i, c.Tool)
					continue
				}
				refused++
				assert.Equal(t, engine.Denied, c.Verdict, "%s: call %d to unresolved %q", req.name, i, c.Tool)
				assert.True(t, c.FailClosed)
				assert.NotEmpty(t, c.Reasons)
				assert.NotEmpty(t, got.Errors)
			}
		}
	}
	t.Logf("%d calls executed, %d refused", executed, refused)
	require.Positive(t, refused, "no unresolved call generated: the property is vacuous")
	require.Positive(t, executed)
}

// TestPerCallEvaluationDecidesAsTheCombined: the decision evaluated part
// by part (the decision without verdicts, then each call's verdict),
// which answers when the combined evaluation raises an error, is the
// combined decision wherever nothing errs: over the generated registries,
// histories, filters and rules, the two documents are equal (issue 43,
// item 11). A change to the shipped decision_from_sets that the per-call
// queries (engine/percall.go) do not follow shows here.
func TestPerCallEvaluationDecidesAsTheCombined(t *testing.T) {
	ctx := context.Background()
	seeds := racetest.Size(16, 4)
	if testing.Short() {
		seeds = 4
	}
	decisions := 0
	for _, pc := range propertyCases(t, seeds) {
		e, err := engine.New(ctx, pc.opts...)
		require.NoError(t, err)
		require.True(t, e.HasPerCall(), "the shipped gate judges the calls")
		for _, req := range pc.requests {
			combined, err := e.Decide(ctx, engine.Request{History: req.history, Context: req.context})
			require.NoError(t, err)
			perCall, err := e.Decide(ctx, engine.Request{History: req.history, Context: req.context}, engine.WithPerCallEvaluation())
			require.NoError(t, err)
			want, _ := json.Marshal(combined)
			got, _ := json.Marshal(perCall)
			require.JSONEq(t, string(want), string(got), "%s: part by part decides as the combined evaluation", req.name)
			decisions++
		}
	}
	t.Logf("%d decisions compared", decisions)
}
