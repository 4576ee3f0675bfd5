package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/testkit/racetest"
)

// TestDecisionMemoAgreesWithEvaluation: an engine that answers from its
// decision memo decides every request exactly as one that evaluates each
// time. The requests are mixed so that most inputs share almost
// everything with one decided before: every generated prefix under its
// own context and under another, from the history and from tracked
// facts, each asked twice, in a shuffled order.
func TestDecisionMemoAgreesWithEvaluation(t *testing.T) {
	ctx := context.Background()
	seeds := racetest.Size(20, 6) // one goroutine: in full without -race (scripts/test.sh)
	if testing.Short() {
		seeds = 6
	}
	var hits, misses int64
	for _, pc := range propertyCases(t, seeds) {
		memo, err := engine.New(ctx, pc.opts...)
		require.NoError(t, err)
		plain, err := engine.New(ctx, append(pc.opts, engine.DecisionCache(0))...)
		require.NoError(t, err)

		r := rand.New(rand.NewPCG(uint64(pc.seed), 0x6d656d6f))
		type asked struct {
			name string
			req  engine.Request
		}
		var reqs []asked
		for _, pr := range pc.requests {
			other := propertyContext(r, pc.reg)
			tracked := pr.tracked
			for _, c := range []any{pr.context, other} {
				reqs = append(reqs,
					asked{pr.name + "/history", engine.Request{History: pr.history, Context: c}},
					asked{pr.name + "/facts", engine.Request{Facts: &tracked, Context: c}})
			}
		}
		reqs = append(reqs, reqs...)
		r.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
		for _, a := range reqs {
			assert.Equal(t, decisionJSON(t, plain, a.req), decisionJSON(t, memo, a.req), "seed %d, %s", pc.seed, a.name)
		}
		h, m, _ := memo.DecisionCacheStats()
		hits, misses = hits+h, misses+m
		ph, pm, pn := plain.DecisionCacheStats()
		assert.Zero(t, ph+pm+int64(pn), "DecisionCache(0) turns the memo off")
	}
	t.Logf("decision memo: %d hits, %d misses", hits, misses)
	// Without both the comparison says nothing about the memo.
	assert.Positive(t, hits)
	assert.Positive(t, misses)
}

// TestDecisionMemoSeesEverythingTheRulesRead: requests that differ only in
// a call's arguments, in the context, or in a fact no default rule reads
// are decided apart, because an operator rule may read any of them.
func TestDecisionMemoSeesEverythingTheRulesRead(t *testing.T) {
	reg := mustRegistry(t, paymentsRegistry)
	e := mustEngine(t, reg, engine.PolicyPaths("testdata/rules"))
	transfer := func(args string) facts.History {
		return mustHistory(t, wReq(wUser("pay")), wResp("", wCall("transfer_funds", "c1", args)))
	}
	finance := map[string]any{"group": "finance"}
	verdict := func(h facts.History, ctxDoc any) string {
		return callTo(t, mustDecide(t, e, h, ctxDoc), "transfer_funds").Verdict
	}
	for range 2 { // the second round answers from the memo
		assert.Equal(t, engine.Execute, verdict(transfer(`{"amount": 10}`), finance))
		assert.Equal(t, engine.Denied, verdict(transfer(`{"amount": 5000}`), finance))
		assert.Equal(t, engine.UnknownTool, verdict(transfer(`{"amount": 10}`), map[string]any{"group": "interns"}))
	}
	hits, misses, entries := e.DecisionCacheStats()
	assert.Equal(t, []int64{3, 3}, []int64{hits, misses})
	assert.Equal(t, 3, entries)

	// A rule reading a fact the default policy ignores (facts.returned).
	rule := engine.Source{File: "rules/returned.rego", Text: `package policycheck.rules.returned

hide contains "read_ledger" if "get_time" in input.facts.returned
`}
	e = mustEngine(t, reg, engine.Modules(rule))
	before := mustHistory(t, wReq(wUser("time?")), wResp("", wCall("get_time", "t1", `{}`)))
	after := mustHistory(t, wReq(wUser("time?")), wResp("", wCall("get_time", "t1", `{}`)),
		wReq(wReturn("get_time", "t1", "noon")), wResp("", wCall("get_time", "t2", `{}`)))
	for range 2 {
		assert.Contains(t, mustDecide(t, e, before, nil).Available, "read_ledger")
		assert.NotContains(t, mustDecide(t, e, after, nil).Available, "read_ledger")
	}
}

// TestDecisionMemoOffForNondeterministicRules: a policy set in which a
// rule reaches a nondeterministic built-in is evaluated every time; the
// same rule without it is answered from the memo.
func TestDecisionMemoOffForNondeterministicRules(t *testing.T) {
	reg := mustRegistry(t, paymentsRegistry)
	h := mustHistory(t, wReq(wUser("time?")), wResp("", wCall("get_time", "t1", `{}`)))
	for _, tc := range []struct {
		cond string
		hits int64
	}{
		{"time.now_ns() < 0", 0},
		{"x := time.now_ns(); x < 0", 0},
		{"input.context.never", 1},
	} {
		t.Run(tc.cond, func(t *testing.T) {
			e := mustEngine(t, reg, engine.Modules(engine.Source{File: "rules/clock.rego",
				Text: fmt.Sprintf("package policycheck.rules.clock\n\nhide contains \"read_ledger\" if {\n\t%s\n}\n", tc.cond)}))
			mustDecide(t, e, h, nil)
			mustDecide(t, e, h, nil)
			hits, _, _ := e.DecisionCacheStats()
			assert.Equal(t, tc.hits, hits)
		})
	}
}

// TestDecisionMemoKeepsNoFailure: a decision that timed out fails closed
// and is not remembered, and a decision whose deadline passed before
// evaluation fails closed even though the memo holds its result.
func TestDecisionMemoKeepsNoFailure(t *testing.T) {
	reg := mustRegistry(t, paymentsRegistry)
	e := mustEngine(t, reg, engine.Modules(engine.Source{File: "rules/slow.rego", Text: `package policycheck.rules.slow

hide contains "read_ledger" if {
	input.context.slow
	` + slowLoop + `
}
`}))
	h := mustHistory(t, wReq(wUser("time?")), wResp("", wCall("get_time", "t1", `{}`)))
	slow := map[string]any{"slow": true}

	timedOut := mustDecide(t, e, h, slow, engine.WithDeadline(time.Millisecond))
	assert.NotEmpty(t, timedOut.Errors)
	assert.Equal(t, engine.Denied, callTo(t, timedOut, "get_time").Verdict)
	_, _, entries := e.DecisionCacheStats()
	assert.Zero(t, entries, "a failed evaluation is not remembered")

	ok := mustDecide(t, e, h, nil)
	require.Empty(t, ok.Errors)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := e.Decide(cancelled, engine.Request{History: h})
	require.NoError(t, err)
	assert.NotEmpty(t, d.Errors, "a decision past its deadline fails closed, remembered or not")
	assert.Contains(t, strings.Join(d.Errors, "; "), "deadline passed before evaluation")
	assert.Equal(t, engine.Denied, callTo(t, d, "get_time").Verdict)

	again := mustDecide(t, e, h, nil)
	want, _ := json.Marshal(ok)
	got, _ := json.Marshal(again)
	assert.JSONEq(t, string(want), string(got))
	hits, _, _ := e.DecisionCacheStats()
	assert.Equal(t, int64(1), hits)
}

// TestDecisionMemoSharesNothingWithTheCaller: a caller that writes to the
// name lists of a decision answered from the memo does not change the
// next decision on the same input.
func TestDecisionMemoSharesNothingWithTheCaller(t *testing.T) {
	reg := mustRegistry(t, paymentsRegistry)
	e := mustEngine(t, reg)
	h := mustHistory(t, wReq(wUser("time?")), wResp("", wCall("get_time", "t1", `{}`)))
	var want []byte
	for range 3 {
		d := mustDecide(t, e, h, nil)
		got, _ := json.Marshal(d)
		if want == nil {
			want = got
		}
		require.JSONEq(t, string(want), string(got))
		for _, list := range [][]string{d.Available, d.Advertised, d.Dispatch.Available} {
			for i := range list {
				list[i] = "scribbled"
			}
		}
	}
	hits, _, _ := e.DecisionCacheStats()
	assert.Equal(t, int64(2), hits)
}
