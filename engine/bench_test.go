package engine_test

// Benchmarks of the engine and of the naive pure-Rego baseline
// (testdata/baseline/naive.rego). BENCHMARKS.md at the repository root has
// the command lines, the numbers and what they mean.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/format"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/conformance/runner"
	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/policies"
)

const (
	baselineFile  = "testdata/baseline/naive.rego"
	baselineQuery = "data.policycheck.baseline.naive.decision"
)

// naiveQuery prepares the baseline's decision query once.
func naiveQuery(tb testing.TB) rego.PreparedEvalQuery {
	tb.Helper()
	src, err := os.ReadFile(baselineFile)
	if err != nil {
		tb.Fatal(err)
	}
	pq, err := rego.New(
		rego.Query(baselineQuery),
		rego.Module(baselineFile, string(src)),
		rego.SetRegoVersion(ast.RegoV1),
	).PrepareForEval(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return pq
}

// naiveInputJSON is the baseline's input document as stock OPA receives
// it: {"history": <raw history>, "registry": <registry document>}.
func naiveInputJSON(history, registry []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(history) + len(registry) + 32)
	b.WriteString(`{"history":`)
	b.Write(history)
	b.WriteString(`,"registry":`)
	b.Write(registry)
	b.WriteString(`}`)
	return b.Bytes()
}

// parseInput parses a JSON input document into a Rego value the way the
// OPA server does (numbers kept as json.Number).
func parseInput(raw []byte) (ast.Value, error) {
	var doc any
	if err := util.UnmarshalJSON(raw, &doc); err != nil {
		return nil, err
	}
	return ast.InterfaceToValue(doc)
}

// naiveDecision is the baseline's decision document.
type naiveDecision struct {
	Window     []int    `json:"window"`
	Discovered []string `json:"discovered"`
	Loaded     []string `json:"loaded"`
	Available  []string `json:"available"`
	Verdicts   []struct {
		ToolCallID *string `json:"tool_call_id"`
		Tool       string  `json:"tool"`
		Verdict    string  `json:"verdict"`
	} `json:"verdicts"`
}

func evalNaive(ctx context.Context, pq rego.PreparedEvalQuery, input ast.Value) (*naiveDecision, error) {
	rs, err := pq.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, fmt.Errorf("%s is undefined", baselineQuery)
	}
	b, err := json.Marshal(rs[0].Expressions[0].Value)
	if err != nil {
		return nil, err
	}
	var d naiveDecision
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	for _, s := range [][]string{d.Discovered, d.Loaded, d.Available} {
		sort.Strings(s)
	}
	return &d, nil
}

// missing returns the names of a (sorted) that b (sorted) lacks.
func missing(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TestBaselineIsFormatted keeps the benchmark fixtures (the baseline and
// the evaluation floor) `opa fmt` clean.
func TestBaselineIsFormatted(t *testing.T) {
	for _, file := range []string{baselineFile, "testdata/floor/floor.rego"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := format.SourceWithOpts(file, src, format.Opts{RegoVersion: ast.RegoV1})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, src) {
			t.Errorf("%s is not opa fmt clean; formatted:\n%s", file, got)
		}
	}
}

// TestFloorPolicyMatchesTheShippedAvailableSet keeps BenchmarkDecideFloor
// honest: on each of its inputs, under the benchmark filters, the floor
// yields the available set the shipped policy does, so it does that part
// of the shipped policy's work and not less.
func TestFloorPolicyMatchesTheShippedAvailableSet(t *testing.T) {
	ctx := context.Background()
	for _, tools := range decideTools {
		o := benchOptions(100, tools)
		reg, err := loader.ParseRegistry("bench.json", gen.Registry(benchSeed, o))
		if err != nil {
			t.Fatal(err)
		}
		h, err := loader.DecodeHistory("bench.json", gen.History(benchSeed, o), benchLimits())
		if err != nil {
			t.Fatal(err)
		}
		f := facts.Derive(h, reg)
		var avail [2][]string
		for i, opts := range [][]engine.Option{nil, floorPolicy(t)} {
			// A comparison of results, not of speed: on a saturated
			// machine the default deadline can pass on 1,000 tools.
			e, err := engine.New(ctx, append(opts, engine.Registry(reg), engine.Modules(benchFilters(reg)...), engine.DefaultDeadline(10*time.Minute))...)
			if err != nil {
				t.Fatal(err)
			}
			d, err := e.Decide(ctx, engine.Request{Facts: &f, Context: benchContext(false, 0)})
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Errors) > 0 {
				t.Fatalf("tools=%d: decision failed closed: %v", tools, d.Errors)
			}
			avail[i] = d.Available
		}
		if len(avail[0]) == 0 || !slices.Equal(avail[0], avail[1]) {
			t.Errorf("tools=%d: only the shipped policy's: %q; only the floor's: %q",
				tools, missing(avail[0], avail[1]), missing(avail[1], avail[0]))
		}
	}
}

// TestBaselineAgreesWithEngine keeps the benchmark honest: on every shared
// conformance case without capability filters, and on generated histories
// (internal/testkit/gen, fixed seeds), the naive pure-Rego baseline computes the
// same window, discovered names, loaded ids and available set as the
// engine's default policy, and, where the dispatched response carries no
// anchored evidence (which the baseline leaves out), the same verdicts.
func TestBaselineAgreesWithEngine(t *testing.T) {
	pq := naiveQuery(t)
	ctx := context.Background()
	t.Run("conformance", func(t *testing.T) {
		compared, verdicts := 0, 0
		for _, c := range conformance.Cases(t) {
			if len(c.Filters) > 0 {
				continue
			}
			t.Run(strings.TrimSuffix(filepath.Base(c.File), ".json"), func(t *testing.T) {
				res, err := runner.Run(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				compared++
				if compareBaseline(t, pq, res.Decision, c.History, c.Registry) {
					verdicts++
				}
			})
		}
		t.Logf("compared %d cases without filters (verdicts on %d without anchored evidence)", compared, verdicts)
	})
	t.Run("generated", func(t *testing.T) {
		for seed := int64(1); seed <= 12; seed++ {
			o := gen.Options{Messages: 40 + int(seed)*15, Tools: 30, Capabilities: 6, CompactionRate: 0.08, Noise: 0.1}
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				regDoc, history := gen.Registry(seed, o), gen.History(seed, o)
				reg, err := loader.ParseRegistry("gen.json", regDoc)
				if err != nil {
					t.Fatal(err)
				}
				h, err := loader.DecodeHistory("gen.json", history, loader.DefaultLimits())
				if err != nil {
					t.Fatal(err)
				}
				eng, err := engine.New(ctx, engine.Registry(reg))
				if err != nil {
					t.Fatal(err)
				}
				d, err := eng.Decide(ctx, engine.Request{History: h})
				if err != nil {
					t.Fatal(err)
				}
				compareBaseline(t, pq, d, history, regDoc)
			})
		}
	})
}

// compareBaseline evaluates the baseline on a raw history and registry and
// compares it with the engine's decision d. It reports whether the
// verdicts were compared too (no anchored evidence).
func compareBaseline(t *testing.T, pq rego.PreparedEvalQuery, d *engine.Decision, history, registry []byte) bool {
	t.Helper()
	input, err := parseInput(naiveInputJSON(history, registry))
	if err != nil {
		t.Fatal(err)
	}
	got, err := evalNaive(context.Background(), pq, input)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, want, got []string) {
		t.Helper()
		if !reflect.DeepEqual(nonNil(want), nonNil(got)) {
			t.Errorf("%s: engine %q, baseline %q", what, want, got)
		}
	}
	if w := []int{d.Window.Message, d.Window.Part}; !reflect.DeepEqual(w, got.Window) {
		t.Errorf("window: engine %v, baseline %v", w, got.Window)
	}
	check("discovered", d.Facts.Discovered, got.Discovered)
	check("loaded", d.Facts.Loaded, got.Loaded)
	check("available", d.Available, got.Available)
	if d.Dispatch != nil && (len(d.Dispatch.Evidence.Discovered) > 0 || len(d.Dispatch.Evidence.Loaded) > 0) {
		return false
	}
	if len(got.Verdicts) != len(d.Calls) {
		t.Fatalf("verdicts: engine %d, baseline %d", len(d.Calls), len(got.Verdicts))
	}
	for i, v := range got.Verdicts {
		e := d.Calls[i]
		if v.Tool != e.Tool || v.Verdict != e.Verdict || !reflect.DeepEqual(v.ToolCallID, e.ToolCallID) {
			t.Errorf("call %d: engine %s %s, baseline %s %s", i, e.Tool, e.Verdict, v.Tool, v.Verdict)
		}
	}
	return true
}

// --- benchmarks ---------------------------------------------------------------

// benchSeed fixes every generated input.
const benchSeed = 1

// benchOptions are the generator options of a benchmark input: gen's
// defaults with the requested size and eight capabilities, so that
// several always-on capabilities carry filters.
func benchOptions(messages, tools int) gen.Options {
	o := gen.Default(messages)
	o.Tools = tools
	o.Capabilities = 8
	return o
}

// benchInput is one generated registry and history, decoded, built once
// per process.
type benchInput struct {
	history, registry []byte
	h                 facts.History
	reg               *facts.Registry

	naiveOnce sync.Once
	naive     ast.Value // the baseline's parsed input
	naiveErr  error
}

func (in *benchInput) naiveInput(b *testing.B) ast.Value {
	b.Helper()
	in.naiveOnce.Do(func() { in.naive, in.naiveErr = parseInput(naiveInputJSON(in.history, in.registry)) })
	if in.naiveErr != nil {
		b.Fatal(in.naiveErr)
	}
	return in.naive
}

func benchLimits() loader.Limits {
	lim := loader.DefaultLimits()
	lim.MaxBytes = 1 << 30
	return lim
}

var benchInputs = func() func(b testing.TB, messages, tools int) *benchInput {
	var mu sync.Mutex
	cache := map[[2]int]*benchInput{}
	return func(b testing.TB, messages, tools int) *benchInput {
		b.Helper()
		mu.Lock()
		defer mu.Unlock()
		if in, ok := cache[[2]int{messages, tools}]; ok {
			return in
		}
		o := benchOptions(messages, tools)
		in := &benchInput{history: gen.History(benchSeed, o), registry: gen.Registry(benchSeed, o)}
		var err error
		if in.reg, err = loader.ParseRegistry("bench.json", in.registry); err != nil {
			b.Fatal(err)
		}
		if in.h, err = loader.DecodeHistory("bench.json", in.history, benchLimits()); err != nil {
			b.Fatal(err)
		}
		cache[[2]int{messages, tools}] = in
		return in
	}
}()

// benchFilters writes a prepare_tools filter for every capability of reg,
// in two styles that both iterate input.tools: a "destructive verbs only
// for admins" filter, and lib.keep_own with a set built from input.tools.
func benchFilters(reg *facts.Registry) []engine.Source {
	var out []engine.Source
	for i, c := range reg.Capabilities() {
		id, _ := json.Marshal(c.ID)
		var src string
		if i%2 == 0 {
			src = fmt.Sprintf(`package policycheck.capabilities[%s]

prepare_tools contains t.name if {
	some t in input.tools
	not _destructive(t.name)
}

prepare_tools contains t.name if {
	some t in input.tools
	input.context.group == "admin"
}

_destructive(name) if startswith(name, "delete_")

_destructive(name) if startswith(name, "cancel_")
`, id)
		} else {
			src = fmt.Sprintf(`package policycheck.capabilities[%s]

import data.policycheck.lib

prepare_tools := lib.keep_own(input.tools, %s, {t.name |
	some t in input.tools
	t.capability == %s
	not startswith(t.name, "export_")
})
`, id, id, id)
		}
		out = append(out, engine.Source{File: fmt.Sprintf("bench/filters/%s.rego", c.ID), Text: src})
	}
	return out
}

// newBenchEngine compiles the default policies, with the benchmark filters
// when filtered is set.
func newBenchEngine(b testing.TB, reg *facts.Registry, filtered bool, opts ...engine.Option) *engine.Engine {
	b.Helper()
	opts = append(opts, engine.Registry(reg))
	if filtered {
		opts = append(opts, engine.Modules(benchFilters(reg)...))
	}
	e, err := engine.New(context.Background(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// benchContext is the request context of iteration i: warm runs reuse one
// context, so every filter result is a cache hit; cold runs give each
// iteration its own nonce, so the context digest, hence every filter's
// cache key, is new and every active filter is evaluated.
func benchContext(cold bool, i int) any {
	nonce := 0
	if cold {
		nonce = i
	}
	return map[string]any{"user": "ada", "group": "ops", "nonce": nonce}
}

// activeFilters counts the filters a decision on f runs.
func activeFilters(reg *facts.Registry, f *facts.Facts) int {
	active := f.ActiveCapabilities
	if f.Dispatch != nil {
		active = slices.Concat(active, f.Dispatch.ActiveCapabilities)
		slices.Sort(active)
		active = slices.Compact(active)
	}
	n := 0
	for _, id := range active {
		if reg.IsRegistered(id) {
			n++
		}
	}
	return n
}

var (
	decideTools = []int{10, 100, 1000}
	naiveSizes  = []int{100, 1000, 10_000}
)

// benchDecide runs Decide with the benchmark filters on 100 messages,
// either from the decoded history (Derive included) or from precomputed
// facts; extra options replace the policy (see BenchmarkDecideFloor).
func benchDecide(b *testing.B, fromFacts bool, extra ...engine.Option) {
	ctx := context.Background()
	modes := []struct {
		name string
		cold bool // a new context digest every iteration
		memo bool // the decision memo on
	}{{"cold", true, true}, {"warm", false, true}, {"filters", false, false}}
	for _, mode := range modes {
		for _, tools := range decideTools {
			b.Run(fmt.Sprintf("cache=%s/messages=100/tools=%d", mode.name, tools), func(b *testing.B) {
				in := benchInputs(b, 100, tools)
				opts := slices.Clone(extra)
				if !mode.memo {
					opts = append(opts, engine.DecisionCache(0))
				}
				e := newBenchEngine(b, in.reg, true, opts...)
				f := facts.Derive(in.h, in.reg)
				if n := activeFilters(in.reg, &f); n < 2 {
					b.Fatalf("only %d filters are active: the benchmark needs at least two", n)
				}
				req := engine.Request{History: in.h}
				if fromFacts {
					req = engine.Request{Facts: &f}
				}
				req.Context = benchContext(mode.cold, 0)
				d, err := e.Decide(ctx, req) // warms the caches and checks the decision
				if err != nil {
					b.Fatal(err)
				}
				if len(d.Errors) > 0 {
					b.Fatalf("decision failed closed: %v", d.Errors)
				}
				_, miss0, _ := e.CacheStats()
				_, memoMiss0, _ := e.DecisionCacheStats()
				b.ReportAllocs()
				i := 0
				cpu := cputime.Start()
				for b.Loop() {
					cpu.Tick()
					i++
					req.Context = benchContext(mode.cold, i)
					if _, err := e.Decide(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
				cpu.Report(b)
				hits, misses, _ := e.CacheStats()
				memoHits, memoMisses, _ := e.DecisionCacheStats()
				// filter-evals/op: filter evaluations (cache misses) per
				// decision; policy-evals/op: decisions the policy was
				// evaluated for (not answered from the decision memo).
				b.ReportMetric(float64(misses-miss0)/float64(i), "filter-evals/op")
				policyEvals := float64(memoMisses-memoMiss0) / float64(i)
				if !mode.memo {
					policyEvals = 1
				}
				b.ReportMetric(policyEvals, "policy-evals/op")
				switch {
				case !mode.cold && misses != miss0:
					b.Fatalf("warm run missed the filter cache %d times", misses-miss0)
				case mode.cold && hits > 0:
					b.Fatalf("cold run hit the filter cache %d times", hits)
				case mode.memo && !mode.cold && memoMisses != memoMiss0:
					b.Fatalf("warm run missed the decision memo %d times", memoMisses-memoMiss0)
				case mode.cold && memoHits > 0:
					b.Fatalf("cold run hit the decision memo %d times", memoHits)
				}
			})
		}
	}
}

// BenchmarkDecide measures one decision from a decoded history of 100
// messages (Derive included) under active capability filters; cache=warm
// repeats the same facts and context (every filter result is a cache hit),
// cache=cold changes the context digest each iteration (every active
// filter is evaluated).
func BenchmarkDecide(b *testing.B) { benchDecide(b, false) }

// BenchmarkDecideFromFacts measures the decision given precomputed facts
// (Request.Facts): the per-step cost of a service that keeps a Tracker.
func BenchmarkDecideFromFacts(b *testing.B) { benchDecide(b, true) }

// floorPolicy is testdata/floor/floor.rego, with the library the
// benchmark filters import, in place of the shipped policies.
func floorPolicy(tb testing.TB) []engine.Option {
	tb.Helper()
	floor, err := os.ReadFile("testdata/floor/floor.rego")
	if err != nil {
		tb.Fatal(err)
	}
	lib, err := fs.ReadFile(policies.FS(), "lib/lib.rego")
	if err != nil {
		tb.Fatal(err)
	}
	return []engine.Option{engine.WithoutDefaults(), engine.Modules(
		engine.Source{File: "testdata/floor/floor.rego", Text: string(floor)},
		engine.Source{File: "policies/lib/lib.rego", Text: string(lib)},
	)}
}

// BenchmarkDecideFloor is BenchmarkDecideFromFacts with the evaluation
// floor (testdata/floor/floor.rego) in place of the shipped policy: one
// inline rule that yields the same available set for these inputs
// (TestFloorPolicyMatchesTheShippedAvailableSet) and nothing else. The
// gap between the two is the cost of the shipped policy's structure; what
// remains is the cost of any decision under OPA's evaluator.
func BenchmarkDecideFloor(b *testing.B) { benchDecide(b, true, floorPolicy(b)...) }

// BenchmarkConversation replays a generated 1,000-message conversation
// the way a service that keeps a facts.Tracker decides it: one decision
// per message, on the facts of the history up to and including it (a
// prefix ending in a request asks what to advertise next, one ending in a
// response judges its calls), with the benchmark filters. When the replay
// wraps around, the next pass runs under a new context, as another user's
// conversation would, so every pass starts with cold caches. memo=on is
// the default engine; memo=off evaluates the policy for every decision.
// policy-evals/op is the share of decisions the decision memo could not
// answer; filter-evals/op the filter evaluations per decision.
func BenchmarkConversation(b *testing.B) {
	ctx := context.Background()
	for _, memo := range []bool{true, false} {
		for _, tools := range []int{10, 100} {
			name := fmt.Sprintf("memo=%s/messages=1000/tools=%d", map[bool]string{true: "on", false: "off"}[memo], tools)
			b.Run(name, func(b *testing.B) {
				in := benchInputs(b, 1000, tools)
				var opts []engine.Option
				if !memo {
					opts = append(opts, engine.DecisionCache(0))
				}
				e := newBenchEngine(b, in.reg, true, opts...)
				tr := facts.NewTracker(in.reg)
				steps := make([]facts.Facts, len(in.h))
				for i, m := range in.h {
					tr.Append(m)
					steps[i] = tr.Facts()
				}
				b.ReportAllocs()
				i := 0
				cpu := cputime.Start()
				for b.Loop() {
					cpu.Tick()
					req := engine.Request{Facts: &steps[i%len(steps)], Context: benchContext(true, i/len(steps))}
					i++
					d, err := e.Decide(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					if len(d.Errors) > 0 {
						b.Fatalf("decision failed closed: %v", d.Errors)
					}
				}
				cpu.Report(b)
				_, misses, _ := e.CacheStats()
				_, memoMisses, _ := e.DecisionCacheStats()
				b.ReportMetric(float64(misses)/float64(i), "filter-evals/op")
				policyEvals := float64(memoMisses) / float64(i)
				if !memo {
					policyEvals = 1
				}
				b.ReportMetric(policyEvals, "policy-evals/op")
			})
		}
	}
}

// filterStyles are ways to write one capability's filter that drops two
// tools, from iterating input.tools to set algebra over the registry held
// as data (docs/writing-filters.md, "Keeping filters fast", quotes them).
// {{id}} stands for the capability id, quoted.
var filterStyles = []struct{ name, body string }{
	{"none", ""},
	{"iterate", `prepare_tools contains t.name if {
	some t in input.tools
	not t.name in {"delete_account", "delete_order"}
}`},
	{"names-minus", `import data.policycheck.lib

prepare_tools := lib.names(input.tools) - {"delete_account", "delete_order"}`},
	{"keep-own", `import data.policycheck.lib

prepare_tools := lib.keep_own(input.tools, {{id}}, set())`},
	{"registry-keep-own", `import data.policycheck.lib

prepare_tools := lib.registry_keep_own({{id}}, set())`},
	{"registry-minus", `prepare_tools := data.policycheck.registry.names - {"delete_account", "delete_order"}`},
}

// BenchmarkFilterStyles measures what one capability filter costs when it
// runs, written in each of filterStyles: a cold decision (a new context
// each iteration, so the filter is evaluated every time) with the filter
// on one always-on capability, from precomputed facts of 100 messages.
// style=none is the same decision without the filter: the difference is
// the filter's cost.
func BenchmarkFilterStyles(b *testing.B) {
	ctx := context.Background()
	for _, tools := range decideTools {
		for _, st := range filterStyles {
			b.Run(fmt.Sprintf("tools=%d/style=%s", tools, st.name), func(b *testing.B) {
				in := benchInputs(b, 100, tools)
				var id string
				for _, c := range in.reg.Capabilities() {
					if !c.DeferLoading {
						id = c.ID
						break
					}
				}
				opts := []engine.Option{engine.Registry(in.reg), engine.DecisionCache(0)}
				if st.body != "" {
					quoted := fmt.Sprintf("%q", id)
					src := "package policycheck.capabilities[" + quoted + "]\n\n" + strings.ReplaceAll(st.body, "{{id}}", quoted) + "\n"
					opts = append(opts, engine.Modules(engine.Source{File: "bench/filter.rego", Text: src}))
				}
				e, err := engine.New(ctx, opts...)
				if err != nil {
					b.Fatal(err)
				}
				f := facts.Derive(in.h, in.reg)
				i := 0
				b.ReportAllocs()
				cpu := cputime.Start()
				for b.Loop() {
					cpu.Tick()
					i++
					d, err := e.Decide(ctx, engine.Request{Facts: &f, Context: benchContext(true, i)})
					if err != nil || len(d.Errors) > 0 {
						b.Fatal(err, d.Errors)
					}
				}
				cpu.Report(b)
				if _, misses, _ := e.CacheStats(); st.body != "" && misses != int64(i) {
					b.Fatalf("%d filter evaluations in %d decisions", misses, i)
				}
			})
		}
	}
}

// BenchmarkNaiveRego evaluates the naive pure-Rego baseline, prepared once,
// with its input already parsed to an ast.Value outside the timer.
func BenchmarkNaiveRego(b *testing.B) {
	ctx := context.Background()
	pq := naiveQuery(b)
	for _, n := range naiveSizes {
		for _, tools := range decideTools {
			b.Run(fmt.Sprintf("messages=%d/tools=%d", n, tools), func(b *testing.B) {
				in := benchInputs(b, n, tools)
				input := in.naiveInput(b)
				b.SetBytes(int64(len(in.history)))
				b.ReportAllocs()
				cpu := cputime.Start()
				for b.Loop() {
					cpu.Tick()
					rs, err := pq.Eval(ctx, rego.EvalParsedInput(input))
					if err != nil || len(rs) != 1 {
						b.Fatal(err, len(rs))
					}
				}
				cpu.Report(b)
			})
		}
	}
}

// BenchmarkNaiveRegoJSON is BenchmarkNaiveRego plus parsing the raw JSON
// input document (history and registry) into a Rego value each time: what
// stock OPA pays per query.
func BenchmarkNaiveRegoJSON(b *testing.B) {
	ctx := context.Background()
	pq := naiveQuery(b)
	for _, n := range naiveSizes {
		for _, tools := range decideTools {
			b.Run(fmt.Sprintf("messages=%d/tools=%d", n, tools), func(b *testing.B) {
				in := benchInputs(b, n, tools)
				raw := naiveInputJSON(in.history, in.registry)
				b.SetBytes(int64(len(in.history)))
				b.ReportAllocs()
				cpu := cputime.Start()
				for b.Loop() {
					cpu.Tick()
					input, err := parseInput(raw)
					if err != nil {
						b.Fatal(err)
					}
					rs, err := pq.Eval(ctx, rego.EvalParsedInput(input))
					if err != nil || len(rs) != 1 {
						b.Fatal(err, len(rs))
					}
				}
				cpu.Report(b)
			})
		}
	}
}

// BenchmarkEngineBytesToDecision measures the engine on the same JSON
// bytes as BenchmarkNaiveRego: decode the history, derive the facts and
// decide with the default policy (no filters, like the baseline).
func BenchmarkEngineBytesToDecision(b *testing.B) {
	lim := benchLimits()
	benchEngine(b, func(b *testing.B, in *benchInput, e *engine.Engine) {
		h, err := loader.DecodeHistory("bench.json", in.history, lim)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Decide(context.Background(), engine.Request{History: h}); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkEngineHistoryToDecision is the engine's side of
// BenchmarkNaiveRego: both start from the history already parsed into
// their own in-memory form outside the timer (the baseline an ast.Value,
// the engine a facts.History), and each iteration derives what the model
// was shown and decides, with the default policy and no filters. It
// isolates what the issue compares: facts derived in Go against the same
// derivation in Rego.
func BenchmarkEngineHistoryToDecision(b *testing.B) {
	benchEngine(b, func(b *testing.B, in *benchInput, e *engine.Engine) {
		if _, err := e.Decide(context.Background(), engine.Request{History: in.h}); err != nil {
			b.Fatal(err)
		}
	})
}

// benchEngine runs step as the timed iteration over the baseline's sizes,
// with an engine of the default policies and no filters. The decision
// memo is off: each iteration decides the same history, which the memo
// would answer without evaluating the policy, and the baseline has no
// such shortcut.
func benchEngine(b *testing.B, step func(*testing.B, *benchInput, *engine.Engine)) {
	for _, n := range naiveSizes {
		for _, tools := range decideTools {
			b.Run(fmt.Sprintf("messages=%d/tools=%d", n, tools), func(b *testing.B) {
				in := benchInputs(b, n, tools)
				e := newBenchEngine(b, in.reg, false, engine.DecisionCache(0))
				b.SetBytes(int64(len(in.history)))
				b.ReportAllocs()
				cpu := cputime.Start()
				for b.Loop() {
					cpu.Tick()
					step(b, in, e)
				}
				cpu.Report(b)
			})
		}
	}
}
