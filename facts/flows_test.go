package facts_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
)

// bruteFlows is the definition of flows (docs/flows.md), transcribed
// literally and independently of the index: every string and
// non-trivial number of every return part, in history order, kept while
// their bytes fit the cap; for each string leaf of a call's arguments,
// every kept string of a return before the call that the leaf equals or
// contains, and for each number leaf every equal kept number.
func bruteFlows(h facts.History, reg *facts.Registry, minLen, limit int) ([][]facts.Flow, bool) {
	type occ struct {
		s   string
		num bool
		at  facts.Position
		src facts.FlowSource
	}
	var occs []occ
	used, truncated := 0, false
	for m := range h {
		for p := range h[m].Parts {
			part := h[m].Parts[p]
			if part.Kind != facts.ToolReturn && part.Kind != facts.BuiltinToolReturn || len(part.Content) == 0 {
				continue
			}
			src := facts.FlowSource{Tool: part.ToolName, Labels: []string{}, At: facts.Position{Message: m, Part: p}}
			if t, ok := reg.Tool(part.ToolName); ok {
				src.Labels = t.Labels
			}
			if part.HasToolCallID {
				id := part.ToolCallID
				src.ToolCallID = &id
			}
			var v any
			dec := json.NewDecoder(bytes.NewReader(part.Content))
			dec.UseNumber()
			if dec.Decode(&v) != nil {
				continue
			}
			for _, o := range bruteStrings(v, 0, minLen) {
				if truncated || used+len(o.s) > limit {
					truncated = true
					break
				}
				used += len(o.s)
				occs = append(occs, occ{s: o.s, num: o.num, at: src.At, src: src})
			}
		}
	}
	r := len(h) - 1
	if r < 0 || h[r].Kind != facts.Response {
		return nil, truncated
	}
	var out [][]facts.Flow
	for p, part := range h[r].Parts {
		if part.Kind != facts.ToolCall {
			continue
		}
		call := facts.Position{Message: r, Part: p}
		flows := []facts.Flow{}
		for _, leaf := range bruteLeaves(facts.ArgsValue(part.Args), "") {
			match := map[facts.Position]facts.FlowMatch{}
			srcs := map[facts.Position]facts.FlowSource{}
			for _, o := range occs {
				if !o.at.Before(call) {
					continue
				}
				var m facts.FlowMatch
				switch {
				case o.num != leaf.num:
				case leaf.s == o.s:
					m = facts.FlowExact
				case !leaf.num && strings.Contains(leaf.s, o.s):
					m = facts.FlowContains
				}
				if m == 0 {
					continue
				}
				if match[o.at] != facts.FlowExact {
					match[o.at] = m
				}
				srcs[o.at] = o.src
			}
			var at []facts.Position
			for p := range match {
				at = append(at, p)
			}
			sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
			for _, p := range at {
				flows = append(flows, facts.Flow{Path: leaf.path, Match: match[p], Source: srcs[p]})
			}
		}
		out = append(out, flows)
	}
	return out, truncated
}

type bruteString struct {
	s, path string
	num     bool
}

// bruteNumber is the key of a number with at least five significant
// digits.
func bruteNumber(n json.Number) (string, bool) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return "", false
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, _, _ := strings.Cut(e, "e")
	if len(strings.ReplaceAll(strings.TrimPrefix(mant, "-"), ".", "")) < 5 {
		return "", false
	}
	return e, true
}

// bruteStrings lists a return value's strings (keys sorted, each before
// its value, nested JSON after its string, four levels) and numbers.
func bruteStrings(v any, depth, minLen int) []bruteString {
	var out []bruteString
	switch v := v.(type) {
	case string:
		if len(v) >= minLen {
			out = append(out, bruteString{s: v})
		}
		t := strings.TrimSpace(v)
		if depth < 4 && t != "" && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
			var inner any
			dec := json.NewDecoder(strings.NewReader(t))
			dec.UseNumber()
			if dec.Decode(&inner) == nil {
				out = append(out, bruteStrings(inner, depth+1, minLen)...)
			}
		}
	case json.Number:
		if k, ok := bruteNumber(v); ok {
			out = append(out, bruteString{s: k, num: true})
		}
	case []any:
		for _, e := range v {
			out = append(out, bruteStrings(e, depth, minLen)...)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if len(k) >= minLen {
				out = append(out, bruteString{s: k})
			}
			out = append(out, bruteStrings(v[k], depth, minLen)...)
		}
	}
	return out
}

// bruteLeaves lists the string and number leaves of an argument value
// with their JSON pointers, in document order (keys sorted).
func bruteLeaves(v any, path string) []bruteString {
	switch v := v.(type) {
	case string:
		return []bruteString{{s: v, path: path}}
	case json.Number:
		if k, ok := bruteNumber(v); ok {
			return []bruteString{{s: k, path: path, num: true}}
		}
	case []any:
		var out []bruteString
		for i, e := range v {
			out = append(out, bruteLeaves(e, fmt.Sprintf("%s/%d", path, i))...)
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []bruteString
		for _, k := range keys {
			tok := strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			out = append(out, bruteLeaves(v[k], path+"/"+tok)...)
		}
		return out
	}
	return nil
}

// flowHistory generates a history whose calls copy values of earlier
// returns into their arguments: whole strings, strings inside longer
// ones, parts of strings, numbers, and strings of JSON-encoded returns.
type flowHistory struct {
	rnd  *rand.Rand
	pool []string // strings returned so far
	nums []string // numbers returned so far
	id   int
}

var flowAlphabet = []byte("ab/~-")

func (g *flowHistory) word() string {
	b := make([]byte, 1+g.rnd.IntN(14))
	for i := range b {
		b[i] = flowAlphabet[g.rnd.IntN(len(flowAlphabet))]
	}
	return string(b)
}

func (g *flowHistory) number() string {
	switch g.rnd.IntN(4) {
	case 0:
		return strconv.Itoa(g.rnd.IntN(2000) - 1000)
	case 1:
		return strconv.Itoa(10000 + g.rnd.IntN(200))
	case 2:
		return fmt.Sprintf("%d.%02d", 100+g.rnd.IntN(5), g.rnd.IntN(100))
	}
	return strconv.Itoa(12300 + g.rnd.IntN(3))
}

// value is a return value: new strings and numbers join the pool.
func (g *flowHistory) value(depth int) any {
	switch k := g.rnd.IntN(10); {
	case k < 4 || depth > 2:
		s := g.word()
		if g.rnd.IntN(3) == 0 && len(g.pool) > 0 {
			s = g.pool[g.rnd.IntN(len(g.pool))] // the same string again
		}
		g.pool = append(g.pool, s)
		return s
	case k < 6:
		n := g.number()
		g.nums = append(g.nums, n)
		return json.Number(n)
	case k < 7:
		enc, _ := json.Marshal(g.value(depth + 1))
		return string(enc) // JSON inside a string
	case k < 8:
		out := []any{}
		for range g.rnd.IntN(3) {
			out = append(out, g.value(depth+1))
		}
		return out
	default:
		out := map[string]any{}
		for range 1 + g.rnd.IntN(3) {
			key := g.word()
			g.pool = append(g.pool, key)
			out[key] = g.value(depth + 1)
		}
		return out
	}
}

// arg is an argument value, mostly copied from what was returned.
func (g *flowHistory) arg() any {
	pick := func() string {
		if len(g.pool) == 0 {
			return g.word()
		}
		return g.pool[g.rnd.IntN(len(g.pool))]
	}
	switch g.rnd.IntN(8) {
	case 0:
		return pick()
	case 1:
		return g.word() + pick() + g.word()
	case 2:
		s := pick()
		i := g.rnd.IntN(len(s) + 1)
		return s[i:] + pick()
	case 3:
		if len(g.nums) > 0 {
			return json.Number(g.nums[g.rnd.IntN(len(g.nums))])
		}
		return json.Number(g.number())
	case 4:
		return []any{pick(), g.word()}
	case 5:
		return map[string]any{"a/b": pick(), "~": pick() + pick()}
	case 6:
		return g.word()
	}
	return json.Number(g.number())
}

func (g *flowHistory) returnPart(kind facts.PartKind, tool string) facts.Part {
	content, _ := json.Marshal(g.value(0))
	g.id++
	p := facts.Part{Kind: kind, ToolName: tool, Content: content}
	if g.rnd.IntN(5) > 0 {
		p.ToolCallID, p.HasToolCallID = fmt.Sprintf("r%d", g.id), true
	}
	return p
}

func (g *flowHistory) callPart(tool string) facts.Part {
	var args []byte
	switch g.rnd.IntN(6) {
	case 0:
		args, _ = json.Marshal(g.arg()) // not an object
	case 1:
		inner, _ := json.Marshal(map[string]any{"x": g.arg()})
		args, _ = json.Marshal(string(inner)) // an object as a string
	default:
		obj := map[string]any{}
		for range 1 + g.rnd.IntN(3) {
			obj[g.word()] = g.arg()
		}
		args, _ = json.Marshal(obj)
	}
	g.id++
	return facts.Part{Kind: facts.ToolCall, ToolName: tool, Args: args, ToolCallID: fmt.Sprintf("c%d", g.id), HasToolCallID: true}
}

func (g *flowHistory) history(n int) facts.History {
	tools := []string{"read_secret", "send_email", "other"}
	var h facts.History
	for m := range n {
		if m%2 == 0 {
			msg := facts.Message{Kind: facts.Request}
			for range g.rnd.IntN(3) {
				if g.rnd.IntN(4) == 0 {
					msg.Parts = append(msg.Parts, facts.Part{Kind: facts.UserPrompt})
				} else {
					msg.Parts = append(msg.Parts, g.returnPart(facts.ToolReturn, tools[g.rnd.IntN(len(tools))]))
				}
			}
			h = append(h, msg)
			continue
		}
		msg := facts.Message{Kind: facts.Response}
		for range 1 + g.rnd.IntN(4) {
			switch g.rnd.IntN(6) {
			case 0:
				msg.Parts = append(msg.Parts, g.returnPart(facts.BuiltinToolReturn, "web_search"))
			case 1:
				msg.Parts = append(msg.Parts, facts.Part{Kind: facts.Compaction})
			default:
				msg.Parts = append(msg.Parts, g.callPart(tools[g.rnd.IntN(len(tools))]))
			}
		}
		h = append(h, msg)
	}
	return h
}

func flowRegistry(t *testing.T) *facts.Registry {
	t.Helper()
	reg, err := facts.NewRegistry(
		[]facts.Capability{{ID: "vault", Labels: []string{"secret"}}},
		[]facts.Tool{
			{Name: "read_secret", Capability: "vault"},
			{Name: "send_email", Labels: []string{"external"}},
			{Name: "other"},
		})
	require.NoError(t, err)
	return reg
}

// TestFlowsAgreeWithBruteForce compares the flows of random histories,
// whose calls copy returned values, with the brute-force definition, and
// the Tracker with Derive on every prefix, under random minimum
// lengths and caps (small ones truncate the index).
func TestFlowsAgreeWithBruteForce(t *testing.T) {
	reg := flowRegistry(t)
	seeds := 400
	if testing.Short() {
		seeds = 50
	}
	found := map[facts.FlowMatch]int{}
	truncated := 0
	for seed := range seeds {
		g := &flowHistory{rnd: rand.New(rand.NewPCG(uint64(seed), 33))}
		h := g.history(2 + g.rnd.IntN(14))
		o := facts.Options{Flows: true, FlowMinLength: 1 + g.rnd.IntN(10)}
		limit := facts.DefaultFlowIndexCap
		if seed%3 == 0 {
			o.FlowIndexCap = 1 + g.rnd.IntN(300)
			limit = o.FlowIndexCap
		}
		tr := facts.NewTracker(reg, o)
		for n := 1; n <= len(h); n++ {
			tr.Append(h[n-1])
			got := facts.Derive(h[:n], reg, o)
			require.Equal(t, got, tr.FactsWith(o), "seed %d, prefix of %d messages", seed, n)
			want, trunc := bruteFlows(h[:n], reg, o.FlowMinLength, limit)
			require.Equal(t, trunc, got.FlowIndexTruncated, "seed %d, prefix %d: truncated", seed, n)
			if trunc {
				truncated++
			}
			if got.Dispatch == nil {
				require.Nil(t, want)
				continue
			}
			require.Len(t, got.Dispatch.Calls, len(want))
			for i, c := range got.Dispatch.Calls {
				require.Equal(t, want[i], c.Flows, "seed %d, prefix %d, call %d (%s)", seed, n, i, c.Args)
				for _, f := range c.Flows {
					found[f.Match]++
				}
			}
			flows, trunc2 := facts.Flows(h[:n], reg, o)
			require.Equal(t, trunc, trunc2)
			for i := range want {
				require.Equal(t, want[i], flows[i])
			}
		}
	}
	// The generator exercises what it is meant to.
	require.Greater(t, found[facts.FlowExact], 100, "exact matches")
	require.Greater(t, found[facts.FlowContains], 100, "contains matches")
	require.Greater(t, truncated, 10, "truncated indexes")
}

// TestFlowsOnlyWhenAsked: without Options.Flows no call carries flows,
// and with them every call does (never nil).
func TestFlowsOnlyWhenAsked(t *testing.T) {
	reg := flowRegistry(t)
	g := &flowHistory{rnd: rand.New(rand.NewPCG(1, 2))}
	h := g.history(10)
	for _, c := range facts.Derive(h, reg).Dispatch.Calls {
		require.Nil(t, c.Flows)
	}
	for _, c := range facts.Derive(h, reg, facts.Options{Flows: true}).Dispatch.Calls {
		require.NotNil(t, c.Flows)
	}
}

// TestFlowsExample pins one history's flows: an exact copy, a copy
// inside a longer string, a string of JSON-encoded content, a number,
// a source before the compaction, and what is not a flow (a short
// string, a part of a returned string, a trivial number).
func TestFlowsExample(t *testing.T) {
	reg := flowRegistry(t)
	id := "r1"
	h := facts.History{
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.ToolReturn, ToolName: "read_secret", ToolCallID: id, HasToolCallID: true,
			Content: []byte(`{"key":"sk-live-4242","note":"{\"pin\":\"hunter22\"}","balance":123456,"count":7,"short":"abc"}`)}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.Compaction}}},
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "send_email", ToolCallID: "c1", HasToolCallID: true,
			Args: []byte(`{"to":"sk-live-4242","body":"the pin is hunter22, ok?","n":123456,"c":7,"s":"abc","part":"sk-live"}`)}}},
	}
	f := facts.Derive(h, reg, facts.Options{Flows: true})
	src := facts.FlowSource{ToolCallID: &id, Tool: "read_secret", Labels: []string{"secret"}, At: facts.Position{}}
	require.Equal(t, []facts.Flow{
		{Path: "/body", Match: facts.FlowContains, Source: src},
		{Path: "/n", Match: facts.FlowExact, Source: src},
		{Path: "/to", Match: facts.FlowExact, Source: src},
	}, f.Dispatch.Calls[0].Flows)
	require.False(t, f.FlowIndexTruncated)
	f = facts.Derive(h, reg, facts.Options{Flows: true, FlowIndexCap: 5})
	require.True(t, f.FlowIndexTruncated)
	require.Equal(t, []facts.Flow{}, f.Dispatch.Calls[0].Flows)
}
