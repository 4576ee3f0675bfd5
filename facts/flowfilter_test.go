package facts_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/loader"
)

// A one-shot derivation (Derive, Flows) indexes only the returns its
// prefilter passes (flowfilter.go); the Tracker indexes every return.
// The tests below compare the two on every prefix of a history that ends
// with a response, under the option sets filterOptions: they must agree
// byte for byte, flows and truncation. TestFlowsAgreeWithBruteForce does
// the same on its random histories, and against the brute-force
// definition.

// filterOptions are the flow options the filter is compared under.
var filterOptions = []facts.Options{
	{Flows: true},
	{Flows: true, FlowTokens: true},
	{Flows: true, FlowTokens: true, FlowMinLength: 3},
	{Flows: true, FlowMinLength: 12},
	{Flows: true, FlowTokens: true, FlowIndexCap: 2000},
}

// requireFilterAgrees compares Derive and Flows with a Tracker fed h, on
// every prefix of h that ends with a response.
func requireFilterAgrees(t *testing.T, h facts.History, reg *facts.Registry, name string) {
	t.Helper()
	for _, o := range filterOptions {
		tr := facts.NewTracker(reg, o)
		for n := 1; n <= len(h); n++ {
			tr.Append(h[n-1])
			if h[n-1].Kind != facts.Response && n < len(h) {
				continue
			}
			want := tr.FactsWith(o)
			require.Equal(t, want, facts.Derive(h[:n], reg, o), "%s, %+v, prefix of %d messages", name, o, n)
			flows, trunc := facts.Flows(h[:n], reg, o)
			require.Equal(t, want.FlowIndexTruncated, trunc, "%s, %+v, prefix of %d messages", name, o, n)
			if want.Dispatch != nil {
				for i, c := range want.Dispatch.Calls {
					require.Equal(t, c.Flows, flows[i], "%s, %+v, prefix of %d messages, call %d", name, o, n, i)
				}
			}
		}
	}
}

// TestFlowFilterAgreesOnAgentDojo: the AgentDojo-style histories of
// examples/agentdojo, whose injected values reach the arguments
// verbatim, inside longer strings, re-cased and split.
func TestFlowFilterAgreesOnAgentDojo(t *testing.T) {
	files, err := filepath.Glob("../examples/agentdojo/*/histories/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	if testing.Short() {
		files = files[:len(files)/4]
	}
	for _, file := range files {
		reg, err := loader.ReadRegistry(filepath.Join(filepath.Dir(filepath.Dir(file)), "registry.yaml"))
		require.NoError(t, err)
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		h, err := loader.DecodeHistory(file, raw, loader.DefaultLimits())
		require.NoError(t, err)
		requireFilterAgrees(t, h, reg, filepath.Base(file))
	}
}

// TestFlowFilterAgreesOnConformance: the shared conformance histories.
func TestFlowFilterAgreesOnConformance(t *testing.T) {
	for _, c := range conformance.Cases(t) {
		reg := caseRegistry(t, c.Registry)
		h, err := loader.DecodeHistory(c.File, c.History, loader.DefaultLimits())
		require.NoError(t, err)
		requireFilterAgrees(t, h, reg, filepath.Base(c.File))
	}
}

// FuzzFlowFilter builds a history of one return (content, as is when it
// is JSON, else as a JSON string) and one call (args, as is when it is a
// JSON object, else {"a": args}) and compares the filtered derivation
// with the full index. The seeds hold what the filter must read as the
// walk does: escapes, \u escapes of plain ASCII, surrogate pairs, JSON
// inside strings, Unicode case pairs (the Kelvin sign, dotted İ),
// separators inside identifiers, numbers in exponent form.
// Run it with go test ./facts -run '^$' -fuzz FuzzFlowFilter.
func FuzzFlowFilter(f *testing.F) {
	seeds := [][2]string{
		{`{"k":"the secret value 42"}`, `send the secret value 42 now`},
		{`{"k":"the \"secret\" value"}`, `the "secret" value`},
		{`{"k":"a\\b\/c\nline two is here"}`, `x a\b/c` + "\n" + `line two is here y`},
		{`{"k":"\u0041BCDEFGHIJ"}`, `ABCDEFGHIJ`},
		{`{"k":"emoji \ud83d\ude00 inside it"}`, "emoji \U0001F600 inside it"},
		{`{"k":"lone \ud83d surrogate here"}`, "lone \uFFFD surrogate here"},
		{`{"k":"{\"inner\":\"nested secret value\"}"}`, `nested secret value`},
		{`{"k":"{\"inner\":\"{\\\"deep\\\":\\\"deeper secret value\\\"}\"}"}`, `deeper secret value`},
		{`{"k":"  [\"spaced nested value\"]"}`, `spaced nested value`},
		{`{"k":"\u007b\"x\":\"escaped brace value\"}"}`, `escaped brace value`},
		{`{"url":"see https://EXAMPLE.com/Path/x"}`, `go to https://example.com/Path/x`},
		{`{"url":"see https://\u212Aelvin.example/abc"}`, `https://kelvin.example/abc`},
		{`{"url":"see https://İstanbul.example/abc"}`, `https://i̇stanbul.example/abc`},
		{`{"mail":"Ada.Lovelace@Example.COM wrote"}`, `to ada.lovelace@example.com`},
		{`{"iban":"DE89 3704 0044 0532 0130 00"}`, `pay DE89370400440532013000`},
		{`{"iban":"DE89-3704-0044-0532-0130-00"}`, `pay DE89 3704 0044 0532 0130 00 today`},
		{`{"card":"4111 1111-1111 1111"}`, `card 4111111111111111`},
		{`{"amount":1.234567e4}`, `{"n":12345.67}`},
		{`{"amount":12345.670}`, `{"n":1.234567E+4}`},
		{`{"amount":0.000123456}`, `{"n":1.23456e-4}`},
		{`{"amount":123409.99999999999999999}`, `{"n":123410}`},
		{`{"amount":1.2345e-320}`, `{"n":1.2345e-320}`},
		{`{"pair":"token=abcdefgh12"}`, `use abcdefgh12`},
		{`{"pair":"Key: value of the pair"}`, `value of the pair`},
		{`["a","b",{"x":"multi\nline\ttext with runs"}]`, `runs multi line`},
		{"not json at all but a long string", `not json at all`},
		{`"just a JSON string value"`, `a JSON string value here`},
	}
	for _, s := range seeds {
		f.Add([]byte(s[0]), []byte(s[1]), uint8(8), true)
		f.Add([]byte(s[0]), []byte(s[1]), uint8(4), false)
	}
	reg, err := facts.NewRegistry(nil, []facts.Tool{{Name: "read"}, {Name: "send"}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, content, args []byte, minLen uint8, tokens bool) {
		if len(content) > 4096 || len(args) > 4096 {
			return
		}
		if !json.Valid(content) {
			content, _ = json.Marshal(string(content))
		}
		var obj map[string]any
		if json.Unmarshal(args, &obj) != nil {
			args, _ = json.Marshal(map[string]string{"a": string(args)})
		}
		h := facts.History{
			{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt, Content: []byte(`"please do it"`)}}},
			{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "read", ToolCallID: "r", HasToolCallID: true, Args: []byte(`{}`)}}},
			{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.ToolReturn, ToolName: "read", ToolCallID: "r", HasToolCallID: true, Content: content}}},
			{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "send", ToolCallID: "s", HasToolCallID: true, Args: args}}},
		}
		o := facts.Options{Flows: true, FlowTokens: tokens, FlowMinLength: 1 + int(minLen%16)}
		tr := facts.NewTracker(reg, o)
		tr.Append(h...)
		want := tr.FactsWith(o)
		got := facts.Derive(h, reg, o)
		require.Equal(t, want, got, "content %q, args %q, %+v", content, args, o)
	})
}
