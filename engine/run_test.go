package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/conformance/runner"
	"github.com/policycheck/policycheck/internal/ground/faults"
	"github.com/policycheck/policycheck/internal/testkit/cputime"
	"github.com/policycheck/policycheck/loader"
)

// Helpers of this file carry a run prefix: other test files of the
// package define their own.

func runPrompt() facts.Message {
	return facts.Message{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt}}}
}

// runCallPart is a tool call; "load:CAP" is a typed load_capability call.
func runCallPart(tool, id string) facts.Part {
	if capID, ok := strings.CutPrefix(tool, "load:"); ok {
		return facts.Part{Kind: facts.ToolCall, ToolKind: facts.ToolKindLoad, ToolName: facts.LoadCapabilityTool,
			ToolCallID: id, HasToolCallID: true, LoadID: capID, HasLoadID: true, Args: []byte(`{"id":"` + capID + `"}`)}
	}
	return facts.Part{Kind: facts.ToolCall, ToolName: tool, ToolCallID: id, HasToolCallID: true, Args: []byte(`{}`)}
}

func runResponse(parts ...facts.Part) facts.Message {
	return facts.Message{Kind: facts.Response, Parts: parts}
}

func runRequest(parts ...facts.Part) facts.Message {
	return facts.Message{Kind: facts.Request, Parts: parts}
}

func runRetryPart(tool, id string) facts.Part {
	return facts.Part{Kind: facts.RetryPrompt, ToolName: tool, ToolCallID: id, HasToolCallID: true}
}

func runReturnPart(tool, id string, kind facts.ToolKind) facts.Part {
	return facts.Part{Kind: facts.ToolReturn, ToolKind: kind, ToolName: tool, ToolCallID: id, HasToolCallID: true}
}

// runRegistry: get_time (always on), secret_op of the deferred capability
// vault with the given max_retries (nil: none), search_docs (search-gated).
func runRegistry(t testing.TB, secretRetries *int) *facts.Registry {
	t.Helper()
	reg, err := facts.NewRegistry(
		[]facts.Capability{{ID: "vault", DeferLoading: true}, {ID: "ops"}},
		[]facts.Tool{
			{Name: "get_time", Capability: "ops"},
			{Name: "secret_op", Capability: "vault", MaxRetries: secretRetries},
			{Name: "search_docs", DeferLoading: true},
		})
	require.NoError(t, err)
	return reg
}

func runEngine(t testing.TB, reg *facts.Registry, opts ...engine.Option) *engine.Engine {
	t.Helper()
	e, err := engine.New(context.Background(), append([]engine.Option{engine.Registry(reg)}, opts...)...)
	require.NoError(t, err)
	return e
}

// runDescribe renders a call's verdict and retry accounting compactly:
// "VERDICT KIND COUNT/BUDGET" with KIND one of free, charged, exceeded, -.
func runDescribe(c engine.CallVerdict, r engine.Retry) string {
	kind := "-"
	switch {
	case r.Exceeded:
		kind = "exceeded"
	case r.Charged:
		kind = "charged"
	case r.Free:
		kind = "free"
	}
	return fmt.Sprintf("%s %s %d/%d", c.Verdict, kind, r.Count, r.Budget)
}

// runStep is one dispatch of a scripted run.
type runStep struct {
	calls   []string // tools the response calls ("load:CAP" loads)
	rebuild int      // same-step re-decisions after the first one
	fail    []string // failures reported after the decision
	succeed []string // successes reported after the decision
	want    []string // runDescribe of each call, at every decision of the step
	// wantReport is the error text of each failure report ("" for none).
	wantReport []string
	// wantCounts is Run.Retries() at this step (counts carried into it).
	wantCounts map[string]int
}

// runScript plays steps on a new run of e: each response follows a request
// holding the previous step's outcomes (retry prompts for refusals and
// reported failures, returns otherwise).
func runScript(t *testing.T, e *engine.Engine, steps []runStep, opts ...engine.RunOption) []*engine.Decision {
	t.Helper()
	ctx := context.Background()
	r := e.NewRun(opts...)
	next := []facts.Message{runPrompt()}
	var out []*engine.Decision
	for i, st := range steps {
		parts := make([]facts.Part, len(st.calls))
		for j, tool := range st.calls {
			parts[j] = runCallPart(tool, fmt.Sprintf("s%dc%d", i+1, j))
		}
		msgs := append(next, runResponse(parts...))
		var sd *engine.Decision
		for k := 0; k <= st.rebuild; k++ {
			var err error
			sd, err = r.Step(ctx, msgs, nil)
			require.NoError(t, err)
			msgs = nil
			require.Equal(t, i+1, sd.Step, "step %d, decision %d: step number", i+1, k)
			require.Equal(t, i+1, r.Steps())
			got := make([]string, len(sd.Calls))
			for j := range sd.Calls {
				got[j] = runDescribe(sd.Calls[j], sd.Retries[j])
			}
			require.Equal(t, st.want, got, "step %d, decision %d", i+1, k)
			counts := st.wantCounts
			if counts == nil {
				counts = map[string]int{}
			}
			require.Equal(t, counts, r.Retries(), "step %d, decision %d: counts", i+1, k)
		}
		out = append(out, sd)
		for j, tool := range st.fail {
			err := r.ReportFailure(tool)
			want := ""
			if j < len(st.wantReport) {
				want = st.wantReport[j]
			}
			if want == "" {
				require.NoError(t, err, "step %d: report failure of %s", i+1, tool)
			} else {
				var ex *engine.ExceededError
				require.ErrorAs(t, err, &ex)
				require.Equal(t, want, err.Error())
			}
		}
		for _, tool := range st.succeed {
			r.ReportSuccess(tool)
		}
		var req []facts.Part
		for j, c := range sd.Calls {
			id := *c.ToolCallID
			switch {
			case c.Verdict != engine.Execute || runContains(st.fail, c.Tool):
				req = append(req, runRetryPart(c.Tool, id))
			case st.calls[j] != c.Tool:
				req = append(req, runReturnPart(c.Tool, id, facts.ToolKindLoad))
			default:
				req = append(req, runReturnPart(c.Tool, id, facts.ToolKindNone))
			}
		}
		next = []facts.Message{runRequest(req...)}
	}
	return out
}

func runContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func runIntp(n int) *int { return &n }

// runUntilAbort plays a model that keeps calling secret_op without
// loading vault, as the reference tests of spec X8 do. It returns the
// refusals the history shows and the abort text.
func runUntilAbort(t *testing.T, e *engine.Engine, opts ...engine.RunOption) (int, string) {
	t.Helper()
	ctx := context.Background()
	r := e.NewRun(opts...)
	next := []facts.Message{runPrompt()}
	for i := 1; i <= 50; i++ {
		id := fmt.Sprintf("c%d", i)
		sd, err := r.Step(ctx, append(next, runResponse(runCallPart("secret_op", id))), nil)
		require.NoError(t, err)
		if err := sd.Err(); err != nil {
			require.True(t, sd.Retries[0].Exceeded)
			require.Equal(t, err.Error(), sd.Retries[0].Message)
			return i - 1, err.Error()
		}
		require.Equal(t, engine.NotAvailableYet, sd.Calls[0].Verdict)
		next = []facts.Message{runRequest(runRetryPart("secret_op", id))}
	}
	t.Fatal("the run never aborted")
	return 0, ""
}

// TestRunAvailabilityRefusals mirrors the reference tests of spec X8
// (TestUnavailableCapabilityToolsAreNotCallable).
func TestRunAvailabilityRefusals(t *testing.T) {
	for _, tc := range []struct {
		note     string
		max      *int
		opts     []engine.RunOption
		refusals int
		abort    string
	}{
		{note: "an availability refusal leaves room to act on it", refusals: 2,
			abort: "Tool 'secret_op' exceeded max retries count of 1."},
		{note: "an availability refusal is charged against the tool's own budget", max: runIntp(4), refusals: 5,
			abort: "Tool 'secret_op' exceeded max retries count of 4."},
		{note: "a tool without max_retries takes the run default", opts: []engine.RunOption{engine.DefaultRetries(3)},
			refusals: 4, abort: "Tool 'secret_op' exceeded max retries count of 3."},
		{note: "max_retries 0: only the free refusal", max: runIntp(0), refusals: 1,
			abort: "Tool 'secret_op' exceeded max retries count of 0."},
	} {
		t.Run(tc.note, func(t *testing.T) {
			e := runEngine(t, runRegistry(t, tc.max))
			refusals, abort := runUntilAbort(t, e, tc.opts...)
			require.Equal(t, tc.refusals, refusals, "refusals in the history before the abort")
			require.Equal(t, tc.abort, abort)
		})
	}
}

// TestRunRetryAccounting plays scripted runs against spec X8.
func TestRunRetryAccounting(t *testing.T) {
	const (
		getTimeExceeded = "Tool 'get_time' exceeded max retries count of 1."
	)
	for _, tc := range []struct {
		note  string
		max   *int
		opts  []engine.RunOption
		steps []runStep
	}{
		{
			note: "a refusal, a load and a genuine failure: the retry is left for the failure",
			steps: []runStep{
				{calls: []string{"secret_op"}, want: []string{"not_available_yet free 0/1"}},
				{calls: []string{"load:vault"}, succeed: []string{"load_capability"}, want: []string{"execute - 0/1"}},
				{calls: []string{"secret_op"}, fail: []string{"secret_op"}, want: []string{"execute - 0/1"}},
				{calls: []string{"secret_op"}, succeed: []string{"secret_op"}, want: []string{"execute - 1/1"},
					wantCounts: map[string]int{"secret_op": 1}},
				{calls: []string{"secret_op"}, want: []string{"execute - 0/1"}},
			},
		},
		{
			note: "a refusal, a load and two genuine failures: the second exceeds",
			steps: []runStep{
				{calls: []string{"secret_op"}, want: []string{"not_available_yet free 0/1"}},
				{calls: []string{"load:vault"}, want: []string{"execute - 0/1"}},
				{calls: []string{"secret_op"}, fail: []string{"secret_op"}, want: []string{"execute - 0/1"}},
				{calls: []string{"secret_op"}, fail: []string{"secret_op"}, want: []string{"execute - 1/1"},
					wantReport: []string{"Tool 'secret_op' exceeded max retries count of 1."},
					wantCounts: map[string]int{"secret_op": 1}},
			},
		},
		{
			note: "unknown tool refusals are always charged",
			steps: []runStep{
				{calls: []string{"bogus"}, want: []string{"unknown_tool charged 0/1"}},
				{calls: []string{"bogus"}, want: []string{"unknown_tool exceeded 1/1"},
					wantCounts: map[string]int{"bogus": 1}},
			},
		},
		{
			note: "an unknown tool is charged against the run default",
			opts: []engine.RunOption{engine.DefaultRetries(2)},
			steps: []runStep{
				{calls: []string{"bogus"}, want: []string{"unknown_tool charged 0/2"}},
				{calls: []string{"bogus"}, want: []string{"unknown_tool charged 1/2"},
					wantCounts: map[string]int{"bogus": 1}},
				{calls: []string{"bogus"}, want: []string{"unknown_tool exceeded 2/2"},
					wantCounts: map[string]int{"bogus": 2}},
			},
		},
		{
			note: "several failures of one tool in one step cost one unit",
			opts: []engine.RunOption{engine.DefaultRetries(2)},
			steps: []runStep{
				{calls: []string{"bogus", "bogus", "bogus"},
					want: []string{"unknown_tool charged 0/2", "unknown_tool charged 0/2", "unknown_tool charged 0/2"}},
				{calls: []string{"bogus"}, want: []string{"unknown_tool charged 1/2"},
					wantCounts: map[string]int{"bogus": 1}},
			},
		},
		{
			note: "the second availability refusal of a name in one response is charged",
			steps: []runStep{
				{calls: []string{"secret_op", "secret_op"},
					want: []string{"not_available_yet free 0/1", "not_available_yet charged 0/1"}},
				{calls: []string{"secret_op"}, want: []string{"not_available_yet exceeded 1/1"},
					wantCounts: map[string]int{"secret_op": 1}},
			},
		},
		{
			note: "the free refusal is per name",
			steps: []runStep{
				{calls: []string{"secret_op"}, want: []string{"not_available_yet free 0/1"}},
				{calls: []string{"search_docs"}, want: []string{"not_available_yet free 0/1"}},
				{calls: []string{"search_docs", "secret_op"},
					want: []string{"not_available_yet charged 0/1", "not_available_yet charged 0/1"}},
			},
		},
		{
			note: "success clears the count",
			steps: []runStep{
				{calls: []string{"get_time"}, fail: []string{"get_time"}, want: []string{"execute - 0/1"}},
				{calls: []string{"get_time"}, succeed: []string{"get_time"}, want: []string{"execute - 1/1"},
					wantCounts: map[string]int{"get_time": 1}},
				{calls: []string{"get_time"}, fail: []string{"get_time"}, want: []string{"execute - 0/1"}},
				{calls: []string{"get_time"}, want: []string{"execute - 1/1"},
					wantCounts: map[string]int{"get_time": 1}},
			},
		},
		{
			note: "a reported failure at the budget exceeds it",
			steps: []runStep{
				{calls: []string{"get_time"}, fail: []string{"get_time"}, want: []string{"execute - 0/1"}},
				{calls: []string{"get_time"}, fail: []string{"get_time"}, want: []string{"execute - 1/1"},
					wantReport: []string{getTimeExceeded}, wantCounts: map[string]int{"get_time": 1}},
			},
		},
		{
			note: "a failure wins over a same-step success",
			steps: []runStep{
				{calls: []string{"get_time", "get_time"}, fail: []string{"get_time"}, succeed: []string{"get_time"},
					want: []string{"execute - 0/1", "execute - 0/1"}},
				{calls: []string{"get_time"}, fail: []string{"get_time"}, want: []string{"execute - 1/1"},
					wantReport: []string{getTimeExceeded}, wantCounts: map[string]int{"get_time": 1}},
			},
		},
		{
			note: "the count survives an interleaved step that succeeds with another tool",
			steps: []runStep{
				{calls: []string{"get_time"}, fail: []string{"get_time"}, want: []string{"execute - 0/1"}},
				{calls: []string{"load:vault"}, succeed: []string{"load_capability"}, want: []string{"execute - 0/1"},
					wantCounts: map[string]int{"get_time": 1}},
				{calls: []string{"get_time"}, fail: []string{"get_time"}, want: []string{"execute - 1/1"},
					wantReport: []string{getTimeExceeded}, wantCounts: map[string]int{"get_time": 1}},
			},
		},
		{
			note: "a failed tool-return (ToolFailed) is not charged: nothing is reported",
			steps: []runStep{
				{calls: []string{"get_time"}, want: []string{"execute - 0/1"}},
				{calls: []string{"get_time"}, want: []string{"execute - 0/1"}},
			},
		},
		{
			note: "several reported failures of one tool in one step cost one unit",
			opts: []engine.RunOption{engine.DefaultRetries(2)},
			steps: []runStep{
				{calls: []string{"get_time", "get_time"}, fail: []string{"get_time", "get_time"},
					want: []string{"execute - 0/2", "execute - 0/2"}},
				{calls: []string{"get_time"}, want: []string{"execute - 1/2"},
					wantCounts: map[string]int{"get_time": 1}},
			},
		},
		{
			note: "framework tools: load_capability budget 1, search_tools the run default",
			opts: []engine.RunOption{engine.DefaultRetries(3)},
			steps: []runStep{
				{calls: []string{"load:vault", "search_tools"}, want: []string{"execute - 0/1", "execute - 0/3"}},
			},
		},
		{
			note: "same-step rebuild of a free refusal does not charge it",
			steps: []runStep{
				{calls: []string{"secret_op"}, rebuild: 3, want: []string{"not_available_yet free 0/1"}},
				{calls: []string{"secret_op"}, rebuild: 3, want: []string{"not_available_yet charged 0/1"}},
				{calls: []string{"secret_op"}, rebuild: 1, want: []string{"not_available_yet exceeded 1/1"},
					wantCounts: map[string]int{"secret_op": 1}},
			},
		},
		{
			note: "same-step rebuild neither re-runs the carry-over nor charges twice",
			max:  runIntp(4),
			steps: []runStep{
				{calls: []string{"secret_op"}, rebuild: 2, want: []string{"not_available_yet free 0/4"}},
				{calls: []string{"secret_op"}, rebuild: 2, want: []string{"not_available_yet charged 0/4"}},
				{calls: []string{"secret_op"}, rebuild: 2, want: []string{"not_available_yet charged 1/4"},
					wantCounts: map[string]int{"secret_op": 1}},
				{calls: []string{"get_time"}, rebuild: 2, fail: []string{"get_time"}, want: []string{"execute - 0/1"},
					wantCounts: map[string]int{"secret_op": 2}},
				{calls: []string{"get_time"}, rebuild: 2, want: []string{"execute - 1/1"},
					wantCounts: map[string]int{"secret_op": 2, "get_time": 1}},
			},
		},
	} {
		t.Run(tc.note, func(t *testing.T) {
			e := runEngine(t, runRegistry(t, tc.max))
			runScript(t, e, tc.steps, tc.opts...)
		})
	}
}

// TestRunDenials: an operator denial is charged like a hook's ModelRetry;
// a fail-closed denial is the policy's fault and is not.
func TestRunDenials(t *testing.T) {
	for _, tc := range []struct {
		note   string
		module string
		steps  []runStep
	}{
		{
			note: "an operator denial is charged",
			module: `package policycheck.rules.ops

deny contains {"reason": "closed", "message": "The clock is closed."} if input.call.tool == "get_time"
`,
			steps: []runStep{
				{calls: []string{"get_time"}, want: []string{"denied charged 0/1"}},
				{calls: []string{"get_time"}, want: []string{"denied exceeded 1/1"},
					wantCounts: map[string]int{"get_time": 1}},
			},
		},
		{
			note: "a fail-closed denial is not charged",
			module: `package policycheck.capabilities.ops

prepare_tools contains "no_such_tool"
`,
			steps: []runStep{
				{calls: []string{"get_time"}, want: []string{"denied - 0/1"}},
				{calls: []string{"get_time"}, want: []string{"denied - 0/1"}},
				{calls: []string{"get_time"}, want: []string{"denied - 0/1"}},
			},
		},
	} {
		t.Run(tc.note, func(t *testing.T) {
			e := runEngine(t, runRegistry(t, nil), engine.Modules(engine.Source{File: "ops.rego", Text: tc.module}))
			runScript(t, e, tc.steps)
		})
	}
}

// TestRunRebuildAfterReload: a Reload between two decisions of one step
// (here with a new registry that raises secret_op's budget) re-decides the
// step on the new snapshot without counting a new step or charging again.
func TestRunRebuildAfterReload(t *testing.T) {
	ctx := context.Background()
	e := runEngine(t, runRegistry(t, nil))
	r := e.NewRun()
	call := func(id string) []facts.Message {
		return []facts.Message{runRequest(runRetryPart("secret_op", id)), runResponse(runCallPart("secret_op", id+"'"))}
	}

	sd, err := r.Step(ctx, []facts.Message{runPrompt(), runResponse(runCallPart("secret_op", "a"))}, nil)
	require.NoError(t, err)
	require.Equal(t, "not_available_yet free 0/1", runDescribe(sd.Calls[0], sd.Retries[0]))
	sd, err = r.Step(ctx, call("a"), nil)
	require.NoError(t, err)
	require.Equal(t, "not_available_yet charged 0/1", runDescribe(sd.Calls[0], sd.Retries[0]))

	require.NoError(t, e.Reload(ctx, engine.Registry(runRegistry(t, runIntp(2)))))
	for range 2 {
		sd, err = r.Step(ctx, nil, nil)
		require.NoError(t, err)
		require.Equal(t, 2, sd.Step)
		require.Equal(t, "not_available_yet charged 0/2", runDescribe(sd.Calls[0], sd.Retries[0]))
	}
	sd, err = r.Step(ctx, call("b"), nil)
	require.NoError(t, err)
	require.Equal(t, 3, sd.Step)
	require.Equal(t, "not_available_yet charged 1/2", runDescribe(sd.Calls[0], sd.Retries[0]))
	require.Equal(t, []string{"secret_op"}, r.AvailabilityRefused())
}

// TestRunNextRequestDecisions: a Step that ends with a request decides the
// next request and leaves the accounting alone.
func TestRunNextRequestDecisions(t *testing.T) {
	ctx := context.Background()
	e := runEngine(t, runRegistry(t, nil))
	r := e.NewRun()
	sd, err := r.Step(ctx, []facts.Message{runPrompt()}, nil)
	require.NoError(t, err)
	require.Nil(t, sd.Dispatch)
	require.Zero(t, sd.Step)
	require.Empty(t, sd.Retries)
	require.Zero(t, r.Steps())

	sd, err = r.Step(ctx, []facts.Message{runResponse(runCallPart("bogus", "x"))}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, sd.Step)
	sd, err = r.Step(ctx, []facts.Message{runRequest(runRetryPart("bogus", "x"))}, nil)
	require.NoError(t, err)
	require.Zero(t, sd.Step)
	require.Equal(t, 1, r.Steps())
	require.Empty(t, r.Retries(), "the carry-over waits for the next dispatch")
	require.Equal(t, 3, r.Len())

	// Only the last response of a Step is dispatched.
	sd, err = r.Step(ctx, []facts.Message{runResponse(runCallPart("bogus", "y")), runRequest(runRetryPart("bogus", "y")),
		runResponse(runCallPart("get_time", "z"))}, nil)
	require.NoError(t, err)
	require.Equal(t, 2, sd.Step)
	require.Equal(t, map[string]int{"bogus": 1}, r.Retries())

	out, err := json.Marshal(sd)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(out, &doc))
	require.EqualValues(t, 2, doc["step"])
	require.Equal(t, []any{map[string]any{"count": float64(0), "budget": float64(1)}}, doc["retries"])
	require.Contains(t, doc, "fingerprint")
}

// TestRunMatchesDecide: at every prefix of every conformance history, fed
// one message at a time, the run's decision is the stateless Decide's on
// the full prefix, fingerprint included, and so is Explain's: the three
// entry points call the same stages (prepare, evaluate, check, assemble),
// so they agree on the JSON and on what the JSON leaves out (each call's
// rule, part, capability, fail-closed mark and deciders).
func TestRunMatchesDecide(t *testing.T) {
	ctx := context.Background()
	for _, c := range conformance.Cases(t) {
		t.Run(filepath.Base(c.File), func(t *testing.T) {
			reg, err := loader.ParseRegistry("registry", c.Registry)
			require.NoError(t, err)
			h, err := loader.DecodeHistory(c.File, c.History, loader.DefaultLimits())
			require.NoError(t, err)
			e := runEngine(t, reg, engine.Modules(runner.FilterModules(c)...))
			ctxDoc := map[string]any{"user": "u1"}
			r := e.NewRun()
			for n := 1; n <= len(h); n++ {
				sd, err := r.Step(ctx, h[n-1:n], ctxDoc)
				require.NoError(t, err)
				want, err := e.Decide(ctx, engine.Request{History: h[:n], Context: ctxDoc})
				require.NoError(t, err)
				wantJSON, err := json.Marshal(want)
				require.NoError(t, err)
				gotJSON, err := json.Marshal(sd)
				require.NoError(t, err)
				// The run's decision is Decide's with its step section.
				var got map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(gotJSON, &got))
				delete(got, "step")
				delete(got, "retries")
				gotJSON, err = json.Marshal(got)
				require.NoError(t, err)
				require.JSONEq(t, string(wantJSON), string(gotJSON), "prefix of %d messages", n)
				require.Len(t, sd.Retries, len(sd.Calls))
				x, err := e.Explain(ctx, engine.Request{History: h[:n], Context: ctxDoc})
				require.NoError(t, err)
				explained, err := json.Marshal(x.Decision)
				require.NoError(t, err)
				require.Equal(t, string(wantJSON), string(explained), "Explain's decision, prefix of %d messages", n)
				for i, c := range want.Calls {
					for _, other := range []engine.CallVerdict{sd.Calls[i], x.Decision.Calls[i]} {
						require.Equal(t, []any{c.Rule, c.Part, c.Capability, c.FailClosed, c.DecidedByOperator()},
							[]any{other.Rule, other.Part, other.Capability, other.FailClosed, other.DecidedByOperator()}, "call %d, prefix of %d messages", i, n)
					}
				}
			}
		})
	}
}

// runTrace plays a fixed script on r and returns every decision as JSON.
func runTrace(t testing.TB, r *engine.Run, tools []string) []string {
	ctx := context.Background()
	var out []string
	next := []facts.Message{runPrompt()}
	for i, tool := range tools {
		id := fmt.Sprintf("c%d", i)
		sd, err := r.Step(ctx, append(next, runResponse(runCallPart(tool, id))), map[string]any{"i": i})
		if err != nil {
			t.Error(err)
			return nil
		}
		if tool == "get_time" && i%2 == 0 {
			if err := r.ReportFailure(tool); err != nil && !errors.As(err, new(*engine.ExceededError)) {
				t.Error(err)
			}
		}
		b, err := json.Marshal(sd)
		if err != nil {
			t.Error(err)
			return nil
		}
		out = append(out, string(b))
		next = []facts.Message{runRequest(runRetryPart(tool, id))}
	}
	return out
}

// TestRunsAreIndependent: two runs on one engine, interleaved and then
// concurrent, produce what each produces alone (run with -race).
func TestRunsAreIndependent(t *testing.T) {
	e := runEngine(t, runRegistry(t, runIntp(3)), engine.CacheSize(2))
	scripts := [][]string{
		{"secret_op", "secret_op", "secret_op", "secret_op", "bogus", "secret_op"},
		{"get_time", "get_time", "bogus", "get_time", "load:vault", "get_time"},
	}
	alone := make([][]string, len(scripts))
	for i, s := range scripts {
		alone[i] = runTrace(t, e.NewRun(), s)
	}
	require.NotEqual(t, alone[0], alone[1])

	t.Run("interleaved", func(t *testing.T) {
		ctx := context.Background()
		runs := []*engine.Run{e.NewRun(), e.NewRun()}
		got := make([][]string, 2)
		next := [][]facts.Message{{runPrompt()}, {runPrompt()}}
		for step := range scripts[0] {
			for k, r := range runs {
				tool, id := scripts[k][step], fmt.Sprintf("c%d", step)
				sd, err := r.Step(ctx, append(next[k], runResponse(runCallPart(tool, id))), map[string]any{"i": step})
				require.NoError(t, err)
				if tool == "get_time" && step%2 == 0 {
					_ = r.ReportFailure(tool)
				}
				b, err := json.Marshal(sd)
				require.NoError(t, err)
				got[k] = append(got[k], string(b))
				next[k] = []facts.Message{runRequest(runRetryPart(tool, id))}
			}
		}
		require.Equal(t, alone, got)
	})

	t.Run("concurrent", func(t *testing.T) {
		const rounds = 8
		var wg sync.WaitGroup
		got := make([][]string, 2*rounds)
		for i := range got {
			wg.Go(func() { got[i] = runTrace(t, e.NewRun(), scripts[i%2]) })
		}
		wg.Wait()
		for i := range got {
			require.Equal(t, alone[i%2], got[i], "run %d", i)
		}
	})
}

// ExampleEngine_NewRun follows a model that keeps calling a tool of a
// capability it never loads: the first refusal is free, the second is
// charged against the budget of 1, the third exceeds it.
func ExampleEngine_NewRun() {
	ctx := context.Background()
	reg, err := loader.ParseRegistry("tools.yaml", []byte(`
capabilities:
  - id: vault
    defer_loading: true
tools:
  - name: secret_op
    capability: vault
`))
	if err != nil {
		panic(err)
	}
	e, err := engine.New(ctx, engine.Registry(reg))
	if err != nil {
		panic(err)
	}
	run := e.NewRun()

	next := `{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "Rotate the key."}]},`
	for i := 1; ; i++ {
		// The new messages of this step, as the service receives them.
		data := fmt.Sprintf(`[%s {"kind": "response", "parts": [
			{"part_kind": "tool-call", "tool_name": "secret_op", "tool_call_id": "c%d", "args": {}}]}]`, next, i)
		msgs, err := loader.DecodeMessages("step", []byte(data), run.Len(), loader.DefaultLimits())
		if err != nil {
			panic(err)
		}
		sd, err := run.Step(ctx, msgs, map[string]any{"user": "alice"})
		if err != nil {
			panic(err)
		}
		if err := sd.Err(); err != nil {
			fmt.Printf("step %d: abort: %v\n", sd.Step, err)
			break
		}
		c, r := sd.Calls[0], sd.Retries[0]
		fmt.Printf("step %d: %s (free %t, charged %t, count %d of %d)\n", sd.Step, c.Verdict, r.Free, r.Charged, r.Count, r.Budget)
		content, _ := json.Marshal(c.Message) // the retry prompt the model gets
		next = fmt.Sprintf(`{"kind": "request", "parts": [
			{"part_kind": "retry-prompt", "tool_name": "secret_op", "tool_call_id": "c%d", "content": %s}]},`, i, content)
	}
	// Output:
	// step 1: not_available_yet (free true, charged false, count 0 of 1)
	// step 2: not_available_yet (free false, charged true, count 0 of 1)
	// step 3: abort: Tool 'secret_op' exceeded max retries count of 1.
}

// runLongHistory is n messages of a run that calls get_time step after
// step: request, response with one call, request with its return, ...
func runLongHistory(n int) facts.History {
	h := facts.History{runPrompt()}
	for i := 0; len(h) < n; i++ {
		id := fmt.Sprintf("h%d", i)
		h = append(h, runResponse(runCallPart("get_time", id)), runRequest(runReturnPart("get_time", id, facts.ToolKindNone)))
	}
	return h[:n]
}

// BenchmarkRunStep measures one step (a request with a return, then a
// response with a call) on a run that already holds a history of the
// given length, against a stateless Decide of the same full history. The
// decision memo is off: the stateless side decides one history over and
// over, which the memo would answer without evaluating the policy, while
// each step of the run carries a new call id and is evaluated.
func BenchmarkRunStep(b *testing.B) {
	ctx := context.Background()
	e := runEngine(b, runRegistry(b, nil), engine.DecisionCache(0))
	for _, n := range []int{10, 1000, 10000} {
		h := runLongHistory(n)
		b.Run(fmt.Sprintf("run/history=%d", n), func(b *testing.B) {
			r := e.NewRun()
			if _, err := r.Step(ctx, h, nil); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu := cputime.PerOp(b)
			i := 0
			for b.Loop() {
				id := fmt.Sprintf("b%d", i)
				i++
				sd, err := r.Step(ctx, []facts.Message{
					runRequest(runReturnPart("get_time", "p"+id, facts.ToolKindNone)),
					runResponse(runCallPart("get_time", id)),
				}, nil)
				if err != nil || sd.Calls[0].Verdict != engine.Execute {
					b.Fatal(err, sd.Calls)
				}
			}
			cpu()
		})
		b.Run(fmt.Sprintf("decide/history=%d", n), func(b *testing.B) {
			full := append(append(facts.History{}, h...),
				runRequest(runReturnPart("get_time", "p", facts.ToolKindNone)), runResponse(runCallPart("get_time", "x")))
			b.ReportAllocs()
			cpu := cputime.PerOp(b)
			for b.Loop() {
				d, err := e.Decide(ctx, engine.Request{History: full})
				if err != nil || d.Calls[0].Verdict != engine.Execute {
					b.Fatal(err)
				}
			}
			cpu()
		})
	}
}

// TestRunStepWithoutADecisionLeavesTheRun: a Step that returns no
// decision, here a panic after its messages were appended (issue 43,
// item 2), leaves the run as it was: the same step sent again decides as
// if the first had never been tried. A panic inside the decision is the
// engine's to recover: the step answers a decision failed closed.
func TestRunStepWithoutADecisionLeavesTheRun(t *testing.T) {
	e := runEngine(t, runRegistry(t, nil))
	r := e.NewRun()
	at := func(want string) context.Context {
		return faults.With(context.Background(), func(point string) {
			if point == want {
				panic("injected at " + point)
			}
		})
	}
	msgs := []facts.Message{runPrompt(), runResponse(runCallPart("get_time", "a"))}
	require.PanicsWithValue(t, "injected at "+faults.RunStep, func() { _, _ = r.Step(at(faults.RunStep), msgs, nil) })
	assert.Equal(t, 0, r.Len(), "the messages of the failed step are not kept")
	assert.Equal(t, 0, r.Steps())

	sd, err := r.Step(at(faults.EngineDecide), msgs, nil)
	require.NoError(t, err)
	require.True(t, sd.FailedClosed())
	assert.True(t, sd.Panicked())
	assert.Contains(t, sd.Errors[0], "injected at "+faults.EngineDecide)
	assert.Equal(t, engine.Denied, sd.Calls[0].Verdict)
	assert.Equal(t, 2, r.Len(), "a step that decided (failed closed) keeps its messages")

	fresh := e.NewRun()
	want, err := fresh.Step(context.Background(), msgs, nil)
	require.NoError(t, err)
	got, err := r.Step(context.Background(), nil, nil)
	require.NoError(t, err)
	assert.Equal(t, want.Calls, got.Calls, "the run decides as a fresh run of the same history")
	assert.False(t, got.Panicked())
}

// TestRunStepWithRefusedCommitLeavesTheRun: StepWith's last word comes
// before the run records the step. When it refuses (the sidecar could not
// sign the decision's receipts), no decision comes back and the run is as
// it was: its history, its steps and the retries it carries; the same
// step sent again decides as it would have.
func TestRunStepWithRefusedCommitLeavesTheRun(t *testing.T) {
	e := runEngine(t, runRegistry(t, nil))
	ctx := context.Background()
	first := []facts.Message{runPrompt(), runResponse(runCallPart("no_such_tool", "a"))}
	r := e.NewRun()
	_, err := r.Step(ctx, first, nil)
	require.NoError(t, err)
	stepsBefore, retriesBefore, lenBefore := r.Steps(), r.Retries(), r.Len()

	next := []facts.Message{runResponse(runCallPart("no_such_tool", "b"))}
	refused := errors.New("the receipts could not be signed")
	var seen *engine.Decision
	sd, err := r.StepWith(ctx, next, nil, func(d *engine.Decision) error { seen = d; return refused })
	require.ErrorIs(t, err, refused)
	assert.Nil(t, sd)
	require.NotNil(t, seen, "the hook saw the decision")
	assert.Equal(t, lenBefore, r.Len(), "the step's messages are not kept")
	assert.Equal(t, stepsBefore, r.Steps(), "the run did not advance")
	assert.Equal(t, retriesBefore, r.Retries(), "no refusal was accounted")

	again, err := r.StepWith(ctx, next, nil, func(*engine.Decision) error { return nil })
	require.NoError(t, err)
	fresh := e.NewRun()
	_, err = fresh.Step(ctx, first, nil)
	require.NoError(t, err)
	want, err := fresh.Step(ctx, next, nil)
	require.NoError(t, err)
	assert.Equal(t, want.Calls, again.Calls)
	assert.Equal(t, want.Retries, again.Retries, "the retry is charged once, as in a run that never saw the refused step")
	assert.Equal(t, fresh.Steps(), r.Steps())
}
