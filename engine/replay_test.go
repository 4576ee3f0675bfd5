package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/conformance/runner"
	"github.com/policycheck/policycheck/loader"
)

// recorded is what Run.Replay takes of a decision: each call's tool,
// part, verdict and whether it failed closed.
func recorded(d *engine.Decision) []engine.CallVerdict {
	out := make([]engine.CallVerdict, len(d.Calls))
	for i, c := range d.Calls {
		out[i] = engine.CallVerdict{Tool: c.Tool, Part: c.Part, Verdict: c.Verdict, FailClosed: c.FailClosed}
	}
	return out
}

// TestRunReplayMatchesStep: a run given the first k messages of a
// history by Replay, with the verdicts a run that stepped through them
// gave, then stepped through the rest, decides each later step as the
// stepping run did (the whole decision, its Step and Retries too), on
// every conformance case; each replayed step's Step and Retries are the
// stepping run's.
func TestRunReplayMatchesStep(t *testing.T) {
	ctx := context.Background()
	for _, c := range conformance.Cases(t) {
		t.Run(filepath.Base(c.File), func(t *testing.T) {
			reg, err := loader.ParseRegistry("registry", c.Registry)
			require.NoError(t, err)
			h, err := loader.DecodeHistory(c.File, c.History, loader.DefaultLimits())
			require.NoError(t, err)
			e := runEngine(t, reg, engine.Modules(runner.FilterModules(c)...))
			ctxDoc := map[string]any{"user": "u1"}
			stepped := e.NewRun()
			var want []*engine.Decision
			for n := range h {
				d, err := stepped.Step(ctx, h[n:n+1], ctxDoc)
				require.NoError(t, err)
				want = append(want, d)
			}
			for _, k := range []int{1, len(h) / 3, 2 * len(h) / 3, len(h) - 1} {
				r := e.NewRun()
				for n := range k {
					d, err := r.Replay(h[n:n+1], recorded(want[n]))
					require.NoError(t, err, "replaying message %d", n)
					require.Equal(t, []any{want[n].Step, want[n].Retries}, []any{d.Step, d.Retries}, "replayed message %d", n)
				}
				for n := k; n < len(h); n++ {
					d, err := r.Step(ctx, h[n:n+1], ctxDoc)
					require.NoError(t, err)
					requireSameDecision(t, want[n], d, "message %d after %d replayed", n, k)
				}
			}
		})
	}
}

// TestRunReplayKeepsTheRetryAccounting: reported failures and successes
// after replayed steps count as after stepped ones: a tool refused and
// failing until its budget is exceeded is exceeded at the same step.
func TestRunReplayKeepsTheRetryAccounting(t *testing.T) {
	ctx := context.Background()
	e := runEngine(t, runRegistry(t, nil))
	tools := []string{"secret_op", "load:vault", "get_time", "get_time", "bogus", "get_time", "secret_op", "bogus", "get_time", "get_time"}
	play := func(r *engine.Run, replay func(msgs []facts.Message, i int) (*engine.Decision, error)) []string {
		var out []string
		next := []facts.Message{runPrompt()}
		for i, tool := range tools {
			id := fmt.Sprintf("c%d", i)
			msgs := append(next, runResponse(runCallPart(tool, id)))
			var d *engine.Decision
			var err error
			if replay != nil && i < len(tools)-2 {
				d, err = replay(msgs, i)
			} else {
				d, err = r.Step(ctx, msgs, nil)
			}
			require.NoError(t, err)
			if tool == "get_time" && i%2 == 0 {
				if err := r.ReportFailure(tool); err != nil && !errors.As(err, new(*engine.ExceededError)) {
					t.Fatal(err)
				}
			}
			b, err := json.Marshal([]any{d.Step, d.Retries})
			require.NoError(t, err)
			out = append(out, string(b))
			next = []facts.Message{runRequest(runRetryPart(tool, id))}
		}
		return out
	}
	var decisions []*engine.Decision
	stepped := e.NewRun()
	want := play(stepped, func(msgs []facts.Message, i int) (*engine.Decision, error) {
		d, err := stepped.Step(ctx, msgs, nil)
		decisions = append(decisions, d)
		return d, err
	})
	r := e.NewRun()
	got := play(r, func(msgs []facts.Message, i int) (*engine.Decision, error) {
		return r.Replay(msgs, recorded(decisions[i]))
	})
	require.Equal(t, want, got)
}

// TestRunReplayRefusesVerdictsOfOtherCalls: verdicts that do not name the
// dispatched response's calls (another count, tool or part) are refused,
// and the run is as it was.
func TestRunReplayRefusesVerdictsOfOtherCalls(t *testing.T) {
	ctx := context.Background()
	e := runEngine(t, runRegistry(t, nil))
	msgs := []facts.Message{runPrompt(), runResponse(runCallPart("get_time", "c1"))}
	d, err := e.NewRun().Step(ctx, msgs, nil)
	require.NoError(t, err)
	good := recorded(d)
	for name, calls := range map[string][]engine.CallVerdict{
		"none":       nil,
		"two":        append(append([]engine.CallVerdict{}, good...), good...),
		"other tool": {{Tool: "secret_op", Part: good[0].Part, Verdict: engine.Execute}},
		"other part": {{Tool: "get_time", Part: good[0].Part + 1, Verdict: engine.Execute}},
		"no verdict": {{Tool: "get_time", Part: good[0].Part, Verdict: "ok"}},
	} {
		r := e.NewRun()
		_, err := r.Replay(msgs, calls)
		require.Error(t, err, name)
		require.Zero(t, r.Len(), "%s: the run is as it was", name)
	}
	_, err = e.NewRun().Replay(msgs[:1], good)
	require.Error(t, err, "verdicts for a history that ends with no response")
}

// requireSameDecision compares two decisions as JSON.
func requireSameDecision(t *testing.T, want, got *engine.Decision, msg string, args ...any) {
	t.Helper()
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g), fmt.Sprintf(msg, args...))
}
