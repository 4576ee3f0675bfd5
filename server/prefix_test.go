package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/conformance/runner"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/server"
)

// prefixMetrics reads the prefix cache's lookup counters and gauges.
func prefixMetrics(t testing.TB, rs *running) map[string]float64 {
	t.Helper()
	status, body := rs.do(t, "GET", "/metrics", nil)
	require.Equal(t, 200, status)
	out := map[string]float64{}
	re := regexp.MustCompile(`(?m)^policycheck_prefix_cache_(lookups_total\{result="(\w+)"\}|entries|bytes|noted) (\S+)$`)
	for _, m := range re.FindAllSubmatch(body, -1) {
		key := string(m[1])
		if len(m[2]) > 0 {
			key = string(m[2])
		}
		v, err := strconv.ParseFloat(string(m[3]), 64)
		require.NoError(t, err)
		out[key] = v
	}
	return out
}

// growing sends the history msgs[:k] for k = 1..len(msgs) to both
// servers (and the facts endpoint too) and requires identical answers.
func growing(t *testing.T, name string, with, without *running, registry json.RawMessage, msgs []json.RawMessage) {
	t.Helper()
	ctxDoc := json.RawMessage(`{"user": "u1"}`)
	for k := 1; k <= len(msgs); k++ {
		doc := map[string]json.RawMessage{"history": joinMessages(msgs[:k]), "context": ctxDoc}
		if registry != nil {
			doc["registry"] = registry
		}
		body := mustJSON(t, doc)
		for _, path := range []string{"/v1/decide", "/v1/facts", "/v1/facts?format=input"} {
			ws, want := without.post(t, path, body)
			gs, got := with.post(t, path, body)
			require.Equal(t, ws, gs, "%s %s prefix %d: %s", name, path, k, got)
			require.Equal(t, string(want), string(got), "%s %s prefix %d", name, path, k)
		}
	}
}

// TestPrefixCacheEqualsWholeDecoding: a stateless client resending its
// growing history gets, on every prefix of every conformance history and
// of generated histories with compactions, exactly the answer of a server
// without the prefix cache, while the cache does resume.
func TestPrefixCacheEqualsWholeDecoding(t *testing.T) {
	cases := conformance.Cases(t)
	type pair struct{ with, without *running }
	servers := map[string]pair{}
	for _, c := range cases {
		mods := runner.FilterModules(c)
		key := filterKey(mods)
		p, ok := servers[key]
		if !ok {
			p = pair{start(t, withEngine(engine.Modules(mods...))), start(t, withEngine(engine.Modules(mods...)), withPrefixCache(0))}
			servers[key] = p
		}
		growing(t, filepath.Base(c.File), p.with, p.without, c.Registry, splitHistory(t, c.History))
	}
	for seed := int64(1); seed <= 4; seed++ {
		o := gen.Default(60)
		o.CompactionRate = 0.1
		reg := gen.Registry(seed, o)
		var msgs []json.RawMessage
		for _, m := range gen.Messages(seed, o) {
			msgs = append(msgs, m)
		}
		p := servers[""]
		growing(t, fmt.Sprintf("gen seed %d", seed), p.with, p.without, reg, msgs)
	}
	var hits float64
	for _, p := range servers {
		m := prefixMetrics(t, p.with)
		hits += m["hit"]
		require.Zero(t, prefixMetrics(t, p.without)["hit"], "a server without the cache never resumes")
	}
	require.Greater(t, hits, float64(len(cases)), "the growing histories resume from their prefixes")
}

// TestPrefixCacheNeedsTheSameBytes: a history that differs from a
// remembered one anywhere before its new messages, or the same history
// under another registry, is decided whole, correctly.
func TestPrefixCacheNeedsTheSameBytes(t *testing.T) {
	with := start(t, testReg(t))
	without := start(t, testReg(t), withPrefixCache(0))
	msgs := splitHistory(t, []byte(testHistory))
	user := func(text string) json.RawMessage {
		return json.RawMessage(`{"kind":"request","parts":[{"part_kind":"user-prompt","content":` + strconv.Quote(text) + `}]}`)
	}
	// The client's history grows, then is rewritten in the middle (as a
	// compaction would), then grows again.
	steps := [][]json.RawMessage{
		{user("a"), msgs[1]},
		{user("a"), msgs[1], user("b"), msgs[1]},
		{user("A"), msgs[1], user("b"), msgs[1], user("c")},           // first message edited
		{user("a"), msgs[1], user("B"), msgs[1], user("c")},           // a middle message edited
		{user("a"), msgs[1], user("b"), msgs[1], user("c")},           // resumes the second step
		{user("a"), msgs[1], user("b"), msgs[1], user("c "), msgs[1]}, // last remembered message edited
	}
	for i, h := range steps {
		body := mustJSON(t, map[string]json.RawMessage{"history": joinMessages(h)})
		_, want := without.post(t, "/v1/decide", body)
		status, got := with.post(t, "/v1/decide", body)
		require.Equal(t, 200, status, string(got))
		require.Equal(t, string(want), string(got), "step %d", i)
	}
	require.Positive(t, prefixMetrics(t, with)["hit"])

	// The same bytes under another registry, in which secret_op is not a
	// tool: unknown there, never answered from the first registry's facts.
	other := json.RawMessage(`{"tools": [{"name": "get_time"}]}`)
	h := joinMessages(msgs)
	body := mustJSON(t, map[string]json.RawMessage{"history": h})
	status, first := with.post(t, "/v1/decide", body)
	require.Equal(t, 200, status, string(first))
	longer := joinMessages(append(append([]json.RawMessage{}, msgs...), user("again"), msgs[1]))
	for _, reg := range []json.RawMessage{nil, other} {
		doc := map[string]json.RawMessage{"history": longer}
		if reg != nil {
			doc["registry"] = reg
		}
		b := mustJSON(t, doc)
		_, want := without.post(t, "/v1/decide", b)
		status, got := with.post(t, "/v1/decide", b)
		require.Equal(t, 200, status, string(got))
		require.Equal(t, string(want), string(got))
	}
}

// TestPrefixCacheErrorsAndLimits: invalid new messages and limits reached
// by resumed histories are reported exactly as without the cache.
func TestPrefixCacheErrorsAndLimits(t *testing.T) {
	lim := loader.DefaultLimits()
	lim.MaxMessages, lim.MaxParts = 5, 5
	with := start(t, testReg(t), withLimits(lim))
	without := start(t, testReg(t), withLimits(lim), withPrefixCache(0))
	msgs := splitHistory(t, []byte(testHistory))
	bad := json.RawMessage(`{"kind": "request", "parts": [{"part_kind": "nope"}]}`)
	for _, h := range [][]json.RawMessage{
		msgs,
		append(append([]json.RawMessage{}, msgs...), bad),                                // invalid new message
		append(append([]json.RawMessage{}, msgs...), msgs[0], msgs[1], msgs[0]),          // five messages, five parts: fine
		append(append([]json.RawMessage{}, msgs...), msgs[0], msgs[1], msgs[0], msgs[1]), // six messages
	} {
		body := mustJSON(t, map[string]json.RawMessage{"history": joinMessages(h)})
		ws, want := without.post(t, "/v1/decide", body)
		gs, got := with.post(t, "/v1/decide", body)
		require.Equal(t, ws, gs, string(got))
		require.Equal(t, string(want), string(got))
	}
	// A byte limit that a resumed history crosses.
	msgsLen := len(joinMessages(msgs))
	blim := loader.DefaultLimits()
	blim.MaxBytes = int64(msgsLen + 10)
	withB := start(t, testReg(t), withLimits(blim))
	withoutB := start(t, testReg(t), withLimits(blim), withPrefixCache(0))
	for _, h := range [][]json.RawMessage{msgs, append(append([]json.RawMessage{}, msgs...), msgs[0])} {
		body := mustJSON(t, map[string]json.RawMessage{"history": joinMessages(h)})
		ws, want := withoutB.post(t, "/v1/decide", body)
		gs, got := withB.post(t, "/v1/decide", body)
		require.Equal(t, ws, gs, string(got))
		require.Equal(t, string(want), string(got))
	}
	_, last := withB.post(t, "/v1/decide", mustJSON(t, map[string]json.RawMessage{"history": joinMessages(append(append([]json.RawMessage{}, msgs...), msgs[0]))}))
	require.Equal(t, server.CodeLimit, decodeError(t, last).Error.Code)

	// A syntax error after a remembered prefix, inside a message and as
	// a message: the scan, which reads on after the prefix without
	// counting its messages, must not name a wrong index.
	plain := start(t, testReg(t))
	plainWithout := start(t, testReg(t), withPrefixCache(0))
	whole := mustJSON(t, map[string]json.RawMessage{"history": joinMessages(msgs)})
	for range 2 { // noted, then kept
		status, out := plain.post(t, "/v1/decide", whole)
		require.Equal(t, 200, status, string(out))
	}
	for i, tail := range []string{`,tru]}`, `,{"kind": }]}`} {
		body := []byte(`{"history": ` + string(joinMessages(msgs))[:len(joinMessages(msgs))-1] + tail)
		ws, want := plainWithout.post(t, "/v1/decide", body)
		gs, got := plain.post(t, "/v1/decide", body)
		require.Equal(t, 400, ws)
		require.Equal(t, ws, gs)
		require.Equal(t, string(want), string(got))
		if i == 0 {
			require.Equal(t, "/history", decodeError(t, got).Error.Pointer)
		}
	}
}

// TestPrefixCacheConcurrentClients: clients resending the same growing
// history at once (retries, or one conversation served twice) race for
// its prefix; every answer is still the cache-free one.
func TestPrefixCacheConcurrentClients(t *testing.T) {
	o := gen.Default(40)
	o.CompactionRate = 0.05
	reg, err := loader.ParseRegistry("gen", gen.Registry(3, o))
	require.NoError(t, err)
	with := start(t, withRegistry(reg))
	without := start(t, withRegistry(reg), withPrefixCache(0))
	raw := gen.Messages(3, o)
	msgs := make([]json.RawMessage, len(raw))
	for i, m := range raw {
		msgs[i] = m
	}
	want := make([]string, len(msgs)+1)
	bodies := make([][]byte, len(msgs)+1)
	for k := 1; k <= len(msgs); k++ {
		bodies[k] = mustJSON(t, map[string]json.RawMessage{"history": joinMessages(msgs[:k])})
		status, body := without.post(t, "/v1/decide", bodies[k])
		require.Equal(t, 200, status, string(body))
		want[k] = string(body)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(msgs))
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 1; k <= len(msgs); k++ {
				resp, err := with.client.Post(with.url+"/v1/decide", "application/json", bytes.NewReader(bodies[k]))
				if err != nil {
					errs <- err.Error()
					return
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(got) != want[k] {
					errs <- fmt.Sprintf("prefix %d: %s", k, got)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	m := prefixMetrics(t, with)
	require.Positive(t, m["hit"])
}

// TestPrefixCacheIsBounded: the cache keeps its estimate under the bound,
// evicting the least recently used histories.
func TestPrefixCacheIsBounded(t *testing.T) {
	const bound = 64 << 10
	rs := start(t, testReg(t), withPrefixCache(bound))
	msgs := splitHistory(t, []byte(testHistory))
	for i := range 400 {
		user := json.RawMessage(`{"kind":"request","parts":[{"part_kind":"user-prompt","content":"conversation ` + strconv.Itoa(i) + `"}]}`)
		h := []json.RawMessage{user, msgs[1], user, msgs[1]}
		for range 2 { // kept from its second sight
			status, body := rs.post(t, "/v1/decide", mustJSON(t, map[string]json.RawMessage{"history": joinMessages(h)}))
			require.Equal(t, 200, status, string(body))
		}
	}
	m := prefixMetrics(t, rs)
	require.LessOrEqual(t, m["bytes"], float64(bound))
	require.Positive(t, m["entries"])
	require.Less(t, m["entries"], float64(400), "old conversations were evicted")
}

// TestPrefixCacheAdmitsOnSecondSight: a history sent once is not kept
// (only its fingerprint is noted); a request that extends it, or resends
// it, is decoded whole and kept; the request after that resumes. Traffic
// of histories each sent once leaves the cache empty.
func TestPrefixCacheAdmitsOnSecondSight(t *testing.T) {
	rs := start(t, testReg(t))
	msgs := splitHistory(t, []byte(testHistory))
	user := func(text string) json.RawMessage {
		return json.RawMessage(`{"kind":"request","parts":[{"part_kind":"user-prompt","content":` + strconv.Quote(text) + `}]}`)
	}
	post := func(h ...json.RawMessage) map[string]float64 {
		status, body := rs.post(t, "/v1/decide", mustJSON(t, map[string]json.RawMessage{"history": joinMessages(h)}))
		require.Equal(t, 200, status, string(body))
		return prefixMetrics(t, rs)
	}
	for i := range 50 {
		m := post(user("once "+strconv.Itoa(i)), msgs[1])
		require.Zero(t, m["entries"], "a history seen once is not kept")
		require.Zero(t, m["bytes"])
		require.Equal(t, float64(i+1), m["noted"], "its fingerprint is")
	}
	a, b := user("a"), user("b")
	m := post(a, msgs[1])
	require.Zero(t, m["entries"])
	require.Equal(t, float64(51), m["noted"])
	m = post(a, msgs[1], b, msgs[1]) // extends a noted history: kept
	require.Equal(t, float64(1), m["entries"])
	require.Equal(t, float64(50), m["noted"], "the note of a kept history is dropped")
	require.Zero(t, m["hit"])
	m = post(a, msgs[1], b, msgs[1], user("c"), msgs[1]) // resumes
	require.Equal(t, float64(1), m["hit"])
	require.Equal(t, float64(1), m["entries"])

	// The same history resent is a second sight too.
	c := user("resent")
	post(c, msgs[1])
	m = post(c, msgs[1])
	require.Equal(t, float64(2), m["entries"])
	m = post(c, msgs[1], user("more"))
	require.Equal(t, float64(2), m["hit"])

	// A history that differs in an earlier message is not a second sight.
	post(user("x"), msgs[1], user("y"))
	m = post(user("X"), msgs[1], user("y"), msgs[1])
	require.Equal(t, float64(2), m["entries"])
}

// TestPrefixCacheCountsToolCalls: with a policy that reads
// input.facts.tool_calls, a history resumed from a remembered prefix is
// decided as the whole history is: the prefix's tracker keeps the calls.
func TestPrefixCacheCountsToolCalls(t *testing.T) {
	budget := engine.Source{File: "budget.rego", Text: `package policycheck.rules.budget

import data.policycheck.lib

deny contains "fourth transfer" if {
	input.call.tool == "transfer_funds"
	lib.call_count(input.call) > 3
}
`}
	with := start(t, withEngine(engine.Modules(budget)))
	without := start(t, withEngine(engine.Modules(budget)), withPrefixCache(0))
	raw, err := os.ReadFile("../examples/histories/budget.json")
	require.NoError(t, err)
	registry := json.RawMessage(`{"tools": [{"name": "transfer_funds"}]}`)
	msgs := splitHistory(t, raw)
	growing(t, "budget", with, without, registry, msgs)
	require.Positive(t, prefixMetrics(t, with)["hit"], "the growing history resumes from its prefixes")
	_, body := with.post(t, "/v1/decide", mustJSON(t, map[string]json.RawMessage{"history": joinMessages(msgs), "registry": registry}))
	require.Contains(t, string(body), "fourth transfer")
}
