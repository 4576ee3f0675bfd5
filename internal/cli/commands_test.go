package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/conformance/runner"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/policies"
)

var examplesDir = filepath.Join(conformance.ModuleRoot(), "examples")

// scenario is one set of command-line inputs whose output is checked
// against the contract of design.md "Output of policycheck eval".
type scenario struct {
	note     string
	registry string
	history  string
	args     []string            // --context, --policy, ...
	expect   *conformance.Expect // the corpus's expectations, when from the corpus
	// oracle: the case's available lists leave the framework tools out
	// (the conformance runner strips them for "oracle" cases).
	oracle bool
	// failClosed: a filter fails, so the decision must fail closed.
	failClosed bool
	// sampled: only eval and facts run; explain and the input document
	// (two more engine compilations and an OPA evaluation) are checked on
	// every third corpus case and every case with filters, which keeps the
	// package's -race run short on a 2-core machine.
	sampled bool
}

func (s scenario) inputArgs() []string {
	return append([]string{"--registry", s.registry, "--history", s.history}, s.args...)
}

// scenarios returns the shipped examples, a few hand-made histories for
// the corners of the contract (a history ending with a request, a response
// without provider_name, a call without tool_call_id, a response without
// calls) and, when the shared corpus is present, every conformance case
// written to temporary files (with its filters compiled to a --policy
// directory).
func scenarios(t *testing.T) []scenario {
	t.Helper()
	reg := filepath.Join(examplesDir, "registry.yaml")
	out := []scenario{
		{note: "examples/refund", registry: reg, history: filepath.Join(examplesDir, "histories", "refund.json"),
			args: []string{"--context", filepath.Join(examplesDir, "context", "support.json")}},
		{note: "examples/after-compaction", registry: reg, history: filepath.Join(examplesDir, "histories", "after-compaction.json")},
		{note: "examples/refund with a failing filter", registry: reg, history: filepath.Join(examplesDir, "histories", "refund.json"),
			args: []string{"--policy", filepath.Join("testdata", "policy_failclosed", "docs.rego")}, failClosed: true},
	}
	dir := t.TempDir()
	small := filepath.Join("testdata", "registry.yaml")
	for _, h := range []struct{ note, data string }{
		{"ends with a request", hist(req(userPrompt), resp(searchCall), req(searchReturn(`{"discovered_tools":[{"name":"search_docs"}]}`)))},
		{"response without provider_name, call without tool_call_id",
			hist(req(userPrompt), resp(`{"part_kind":"tool-call","tool_name":"get_time","args":{}}`, `{"part_kind":"tool-call","tool_name":"secret_op"}`))},
		{"response with a provider and no calls",
			hist(req(userPrompt), withKey(resp(`{"part_kind":"text","content":"hello"}`), "provider_name", `"openai"`))},
		{"response with null provider_name and a hidden tool",
			hist(req(userPrompt), withKey(resp(`{"part_kind":"tool-call","tool_name":"search_docs","tool_call_id":"x1"}`), "provider_name", "null"))},
	} {
		name := strings.NewReplacer(" ", "-", ",", "").Replace(h.note) + ".json"
		out = append(out, scenario{note: h.note, registry: small, history: writeFile(t, dir, name, h.data)})
	}
	shared, err := conformance.SharedDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v", err)
		}
		t.Logf("the conformance histories are not checked: %v", err)
		return out
	}
	cases, err := conformance.Load(filepath.Join(shared, "conformance", "cases"))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		base := strings.TrimSuffix(filepath.Base(c.File), ".json")
		cdir := filepath.Join(dir, base)
		if err := os.Mkdir(cdir, 0o700); err != nil {
			t.Fatal(err)
		}
		s := scenario{note: "conformance/" + base, expect: &c.Expect, oracle: strings.HasPrefix(c.Name, "oracle"),
			sampled:  i%3 != 0 && len(c.Filters) == 0,
			registry: writeFile(t, cdir, "registry.json", string(c.Registry)),
			history:  writeFile(t, cdir, "history.json", string(c.History))}
		if mods := runner.FilterModules(c); len(mods) > 0 {
			pdir := filepath.Join(cdir, "policies")
			if err := os.Mkdir(pdir, 0o700); err != nil {
				t.Fatal(err)
			}
			for i, m := range mods {
				writeFile(t, pdir, fmt.Sprintf("filter%d.rego", i), m.Text)
			}
			s.args = []string{"--policy", pdir}
		}
		out = append(out, s)
	}
	return out
}

// lastMessage is what the contract needs to know of a history's end.
type lastMessage struct {
	response bool
	provider *string // nil when the response has none (or a null one)
	calls    []struct {
		tool string
		id   *string
	}
}

func readLast(t *testing.T, path string) lastMessage {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h []struct {
		Kind     string `json:"kind"`
		Provider any    `json:"provider_name"`
		Parts    []struct {
			PartKind string  `json:"part_kind"`
			ToolName string  `json:"tool_name"`
			ID       *string `json:"tool_call_id"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(data, &h); err != nil || len(h) == 0 {
		t.Fatalf("%s: %v", path, err)
	}
	var lm lastMessage
	last := h[len(h)-1]
	if last.Kind != "response" {
		return lm
	}
	lm.response = true
	if p, ok := last.Provider.(string); ok {
		lm.provider = &p
	}
	for _, p := range last.Parts {
		if p.PartKind == "tool-call" {
			lm.calls = append(lm.calls, struct {
				tool string
				id   *string
			}{p.ToolName, p.ID})
		}
	}
	return lm
}

// decodeJSON decodes a command's stdout: one JSON document and nothing else.
func decodeJSON(t *testing.T, what, out string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: stdout is not a JSON object: %v\n%s", what, err, out)
	}
	if dec.More() {
		t.Fatalf("%s: more than one JSON document on stdout", what)
	}
	return m
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// names checks that v is a sorted JSON array of distinct strings (never
// null) and returns it.
func names(t *testing.T, path string, v any) []string {
	t.Helper()
	arr, ok := v.([]any)
	if !ok {
		t.Errorf("%s: want a JSON array of names, got %#v", path, v)
		return nil
	}
	out := make([]string, len(arr))
	for i, x := range arr {
		s, ok := x.(string)
		if !ok {
			t.Errorf("%s[%d]: want a string, got %#v", path, i, x)
			return nil
		}
		out[i] = s
		if i > 0 && out[i-1] >= s {
			t.Errorf("%s: not sorted and distinct: %q", path, out)
		}
	}
	return out
}

func obj(t *testing.T, path string, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: want an object, got %#v", path, v)
	}
	return m
}

func wantKeys(t *testing.T, path string, m map[string]any, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := keys(m); !slices.Equal(got, want) {
		t.Errorf("%s: keys %q, want %q", path, got, want)
	}
}

func position(t *testing.T, path string, v any) facts.Position {
	t.Helper()
	m := obj(t, path, v)
	wantKeys(t, path, m, "message", "part")
	var p facts.Position
	for k, dst := range map[string]*int{"message": &p.Message, "part": &p.Part} {
		n, ok := m[k].(json.Number)
		if !ok {
			t.Errorf("%s.%s: want a number, got %#v", path, k, m[k])
			continue
		}
		i, err := n.Int64()
		if err != nil || i < 0 {
			t.Errorf("%s.%s: want a non-negative integer, got %s", path, k, n)
		}
		*dst = int(i)
	}
	return p
}

var fingerprintRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

var verdicts = []string{"execute", "not_available_yet", "unknown_tool", "denied"}

// checkEval checks eval's output against design.md "Output of policycheck
// eval" and, for corpus cases, against the case's expectations.
func checkEval(t *testing.T, s scenario, d map[string]any) {
	t.Helper()
	lm := readLast(t, s.history)
	top := []string{"fingerprint", "window", "facts", "available", "advertised", "calls"}
	if lm.response {
		top = append(top, "dispatch")
	}
	if _, ok := d["errors"]; ok {
		top = append(top, "errors")
	}
	wantKeys(t, "eval", d, top...)

	if fp, _ := d["fingerprint"].(string); !fingerprintRE.MatchString(fp) {
		t.Errorf("fingerprint %#v does not match %s", d["fingerprint"], fingerprintRE)
	}
	window := position(t, "window", d["window"])
	f := obj(t, "facts", d["facts"])
	wantKeys(t, "facts", f, "discovered", "loaded", "returned", "active_capabilities")
	discovered := names(t, "facts.discovered", f["discovered"])
	loaded := names(t, "facts.loaded", f["loaded"])
	names(t, "facts.returned", f["returned"])
	names(t, "facts.active_capabilities", f["active_capabilities"])
	available := names(t, "available", d["available"])
	advertised := names(t, "advertised", d["advertised"])
	for _, a := range advertised {
		if !slices.Contains(available, a) {
			t.Errorf("advertised %q is not available", a)
		}
	}

	var dispAvailable []string
	if lm.response {
		disp := obj(t, "dispatch", d["dispatch"])
		wantKeys(t, "dispatch", disp, "provider", "window", "loaded", "evidence", "active_capabilities", "available")
		switch p := disp["provider"]; {
		case lm.provider == nil && p != nil:
			t.Errorf("dispatch.provider = %#v, want null: the response has no provider_name", p)
		case lm.provider != nil && p != *lm.provider:
			t.Errorf("dispatch.provider = %#v, want %q", p, *lm.provider)
		}
		position(t, "dispatch.window", disp["window"])
		names(t, "dispatch.loaded", disp["loaded"])
		ev := obj(t, "dispatch.evidence", disp["evidence"])
		wantKeys(t, "dispatch.evidence", ev, "discovered", "loaded")
		names(t, "dispatch.evidence.discovered", ev["discovered"])
		names(t, "dispatch.evidence.loaded", ev["loaded"])
		names(t, "dispatch.active_capabilities", disp["active_capabilities"])
		dispAvailable = names(t, "dispatch.available", disp["available"])
	}

	calls, ok := d["calls"].([]any)
	if !ok {
		t.Fatalf("calls: want an array (never null), got %#v", d["calls"])
	}
	if len(calls) != len(lm.calls) {
		t.Fatalf("calls: %d entries, want one per tool-call part of the last response (%d)", len(calls), len(lm.calls))
	}
	for i, x := range calls {
		c := obj(t, fmt.Sprintf("calls[%d]", i), x)
		want := lm.calls[i]
		if c["tool"] != want.tool {
			t.Errorf("calls[%d].tool = %#v, want %q", i, c["tool"], want.tool)
		}
		id, present := c["tool_call_id"]
		switch {
		case !present:
			t.Errorf("calls[%d]: tool_call_id missing; it is copied, null when absent", i)
		case want.id == nil && id != nil:
			t.Errorf("calls[%d].tool_call_id = %#v, want null", i, id)
		case want.id != nil && id != *want.id:
			t.Errorf("calls[%d].tool_call_id = %#v, want %q", i, id, *want.id)
		}
		v, _ := c["verdict"].(string)
		if !slices.Contains(verdicts, v) {
			t.Errorf("calls[%d].verdict = %#v, want one of %q", i, c["verdict"], verdicts)
		}
		msg, hasMsg := c["message"]
		switch {
		case v == "execute" && hasMsg:
			t.Errorf("calls[%d]: execute with a message %#v", i, msg)
		case v != "execute" && v != "" && (!hasMsg || msg == ""):
			t.Errorf("calls[%d]: %s without a model-facing message", i, v)
		case hasMsg:
			if _, ok := msg.(string); !ok {
				t.Errorf("calls[%d].message: want a string, got %#v", i, msg)
			}
		}
		if r, ok := c["reasons"]; ok {
			for _, x := range r.([]any) {
				if _, ok := x.(string); !ok {
					t.Errorf("calls[%d].reasons: want strings, got %#v", i, r)
				}
			}
		}
		for k := range c {
			if !slices.Contains([]string{"tool_call_id", "tool", "verdict", "message", "reasons"}, k) {
				t.Errorf("calls[%d]: unexpected key %q", i, k)
			}
		}
		if v == "execute" && !slices.Contains(dispAvailable, want.tool) {
			t.Errorf("calls[%d]: %q executes but is not in dispatch.available %q", i, want.tool, dispAvailable)
		}
	}

	// The corpus's expectations, read from the JSON the operator sees.
	e := s.expect
	if e == nil {
		return
	}
	if window.Message != e.Window.Message || window.Part != e.Window.Part {
		t.Errorf("window %+v, want %+v", window, e.Window)
	}
	if !slices.Equal(discovered, sortedCopy(e.Discovered)) {
		t.Errorf("facts.discovered %q, want %q", discovered, e.Discovered)
	}
	if !slices.Equal(loaded, sortedCopy(e.Loaded)) {
		t.Errorf("facts.loaded %q, want %q", loaded, e.Loaded)
	}
	strip := func(names []string) []string {
		if !s.oracle {
			return names
		}
		return slices.DeleteFunc(slices.Clone(names), func(n string) bool {
			return n == facts.LoadCapabilityTool || n == facts.SearchTool
		})
	}
	if e.Available != nil && !slices.Equal(strip(available), sortedCopy(*e.Available)) {
		t.Errorf("available %q, want %q", available, *e.Available)
	}
	if e.Advertised != nil && !slices.Equal(advertised, sortedCopy(*e.Advertised)) {
		t.Errorf("advertised %q, want %q", advertised, *e.Advertised)
	}
	if e.Calls != nil {
		if len(*e.Calls) != len(calls) {
			t.Fatalf("%d calls, want %d", len(calls), len(*e.Calls))
		}
		for i, w := range *e.Calls {
			c := calls[i].(map[string]any)
			if c["tool"] != w.Tool || c["verdict"] != w.Verdict {
				t.Errorf("calls[%d] = %v %v, want %s %s", i, c["tool"], c["verdict"], w.Tool, w.Verdict)
			}
		}
	}
	if e.Dispatch != nil {
		disp := obj(t, "dispatch", d["dispatch"])
		if w := position(t, "dispatch.window", disp["window"]); w.Message != e.Dispatch.AnchoredWindow.Message || w.Part != e.Dispatch.AnchoredWindow.Part {
			t.Errorf("dispatch.window %+v, want %+v", w, e.Dispatch.AnchoredWindow)
		}
		ev := disp["evidence"].(map[string]any)
		if got := names(t, "dispatch.evidence.discovered", ev["discovered"]); !slices.Equal(got, sortedCopy(e.Dispatch.EvidenceDiscovered)) {
			t.Errorf("dispatch.evidence.discovered %q, want %q", got, e.Dispatch.EvidenceDiscovered)
		}
		if !reflect.DeepEqual(disp["provider"], anyString(e.Dispatch.Provider)) {
			t.Errorf("dispatch.provider %#v, want %#v", disp["provider"], anyString(e.Dispatch.Provider))
		}
		if e.Dispatch.Available != nil && !slices.Equal(strip(dispAvailable), sortedCopy(*e.Dispatch.Available)) {
			t.Errorf("dispatch.available %q, want %q", dispAvailable, *e.Dispatch.Available)
		}
	}
}

// checkExplainAgrees checks that explain's text reports eval's decision:
// its fingerprint, a line per call with the same tool, id and verdict, in
// order, and the model-facing message of each refusal.
func checkExplainAgrees(t *testing.T, text string, d map[string]any) {
	t.Helper()
	if want := fmt.Sprintf("Filter-cache fingerprint (active capabilities, context, policy and registry revisions; not the history): %s\n", d["fingerprint"]); !strings.HasPrefix(text, want) {
		t.Errorf("explain starts %q, want %q", strings.SplitN(text, "\n", 2)[0], want)
	}
	rest := text
	for i, x := range d["calls"].([]any) {
		c := x.(map[string]any)
		id := "<no id>"
		if s, ok := c["tool_call_id"].(string); ok {
			id = s
		}
		line := fmt.Sprintf("  %s %s -> %s\n", id, c["tool"], c["verdict"])
		if msg, ok := c["message"].(string); ok {
			line += "      model is told: " + msg + "\n"
		}
		at := strings.Index(rest, line)
		if at < 0 {
			t.Errorf("explain does not report call %d (in order) as %q:\n%s", i, line, text)
			return
		}
		rest = rest[at+len(line):]
	}
}

// checkFailClosed checks a decision against the fail-closed contract when
// the scenario's filter fails (every registry tool unavailable, every call
// denied, "errors" naming the filter's file) and that no other decision
// carries errors.
func checkFailClosed(t *testing.T, s scenario, d map[string]any) {
	t.Helper()
	errs, has := d["errors"]
	if !s.failClosed {
		if has {
			t.Errorf("errors %s on a decision that should not fail", mustJSON(errs))
		}
		return
	}
	list, ok := errs.([]any)
	if !ok || len(list) == 0 {
		t.Fatalf("a failing filter: errors = %s, want a non-empty list", mustJSON(errs))
	}
	for _, e := range list {
		if msg, _ := e.(string); !strings.Contains(msg, "policy_failclosed/docs.rego") {
			t.Errorf("errors: %q does not name the filter's file", e)
		}
	}
	reg, err := loader.ReadRegistry(s.registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, lst := range []any{d["available"], d["advertised"], d["dispatch"].(map[string]any)["available"]} {
		for _, n := range lst.([]any) {
			if _, isTool := reg.Tool(n.(string)); isTool {
				t.Errorf("registry tool %v available while failing closed", n)
			}
		}
	}
	calls := d["calls"].([]any)
	if len(calls) == 0 {
		t.Fatal("the scenario should have calls to deny")
	}
	for i, c := range calls {
		if v := c.(map[string]any)["verdict"]; v != "denied" {
			t.Errorf("calls[%d]: %v while failing closed, want denied", i, v)
		}
	}
}

func anyString(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return out
}

// TestOutputContract runs eval, facts and facts --format input on every
// scenario and checks the output contract, that facts reports exactly
// what eval reports, and that the input document is what the engine
// evaluates: the shipped policy evaluated on it with OPA's rego package
// reaches eval's decision.
func TestOutputContract(t *testing.T) {
	t.Parallel()
	shipped := shippedModules(t)
	for _, s := range scenarios(t) {
		t.Run(s.note, func(t *testing.T) {
			t.Parallel()
			res := run(t, "", append([]string{"eval"}, s.inputArgs()...)...)
			if res.code != cli.ExitOK || res.stderr != "" {
				t.Fatalf("eval: exit %d, stderr %q", res.code, res.stderr)
			}
			d := decodeJSON(t, "eval", res.stdout)
			checkEval(t, s, d)
			checkFailClosed(t, s, d)

			// facts: exactly window, facts and (dispatch), with eval's values.
			res = run(t, "", append([]string{"facts"}, s.inputArgs()...)...)
			if res.code != cli.ExitOK || res.stderr != "" {
				t.Fatalf("facts: exit %d, stderr %q", res.code, res.stderr)
			}
			fo := decodeJSON(t, "facts", res.stdout)
			want := map[string]any{"window": d["window"], "facts": d["facts"]}
			if dd, ok := d["dispatch"].(map[string]any); ok {
				dispatch := map[string]any{}
				for k, v := range dd {
					if k != "available" {
						dispatch[k] = v
					}
				}
				want["dispatch"] = dispatch
			}
			if !reflect.DeepEqual(fo, want) {
				t.Errorf("facts output differs from eval's facts\n got: %s\nwant: %s", mustJSON(fo), mustJSON(want))
			}
			if s.sampled {
				return
			}

			// explain: the same decision, every call with eval's verdict.
			res = run(t, "", append([]string{"explain"}, s.inputArgs()...)...)
			if res.code != cli.ExitOK || res.stderr != "" {
				t.Fatalf("explain: exit %d, stderr %q", res.code, res.stderr)
			}
			checkExplainAgrees(t, res.stdout, d)

			// facts --format input: the Rego input document.
			res = run(t, "", append([]string{"facts", "--format", "input"}, s.inputArgs()...)...)
			if res.code != cli.ExitOK || res.stderr != "" {
				t.Fatalf("facts --format input: exit %d, stderr %q", res.code, res.stderr)
			}
			in := decodeJSON(t, "facts --format input", res.stdout)
			top := []string{"facts", "outgoing", "filters", "context"}
			if _, ok := d["dispatch"]; ok {
				top = append(top, "dispatch")
			}
			wantKeys(t, "input", in, top...)
			inFacts := obj(t, "input.facts", in["facts"])
			for k, v := range d["facts"].(map[string]any) {
				if !reflect.DeepEqual(inFacts[k], v) {
					t.Errorf("input.facts.%s = %s, eval says %s", k, mustJSON(inFacts[k]), mustJSON(v))
				}
			}
			if !reflect.DeepEqual(inFacts["window"], d["window"]) {
				t.Errorf("input.facts.window = %s, eval says %s", mustJSON(inFacts["window"]), mustJSON(d["window"]))
			}
			if dd, ok := d["dispatch"].(map[string]any); ok {
				inD := obj(t, "input.dispatch", in["dispatch"])
				for _, k := range []string{"provider", "window", "loaded", "evidence", "active_capabilities"} {
					if !reflect.DeepEqual(inD[k], dd[k]) {
						t.Errorf("input.dispatch.%s = %s, eval says %s", k, mustJSON(inD[k]), mustJSON(dd[k]))
					}
				}
			}

			// The input document is what the engine evaluates.
			reg, err := loader.ReadRegistry(s.registry)
			if err != nil {
				t.Fatal(err)
			}
			got := evalShipped(t, shipped, reg, in)
			checkSame := func(what string, got any, want any) {
				t.Helper()
				if !reflect.DeepEqual(got, want) {
					t.Errorf("the shipped policy on facts --format input: %s = %s, eval says %s", what, mustJSON(got), mustJSON(want))
				}
			}
			checkSame("available", got["available"], d["available"])
			checkSame("advertised", got["advertised"], d["advertised"])
			if dd, ok := d["dispatch"].(map[string]any); ok {
				checkSame("dispatch_available", got["dispatch_available"], dd["available"])
			}
			var evalVerdicts []any
			for _, c := range d["calls"].([]any) {
				evalVerdicts = append(evalVerdicts, c.(map[string]any)["verdict"])
			}
			var regoVerdicts []any
			for _, v := range got["verdicts"].([]any) {
				regoVerdicts = append(regoVerdicts, v.(map[string]any)["verdict"])
			}
			checkSame("verdicts", regoVerdicts, evalVerdicts)
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// shippedModules compiles the shipped policies, without their unit tests,
// once for every evalShipped.
func shippedModules(t *testing.T) *ast.Compiler {
	t.Helper()
	c, err := ast.CompileModulesWithOpt(shippedSources(t), ast.CompileOpts{ParserOptions: ast.ParserOptions{RegoVersion: ast.RegoV1}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// shippedSources reads the shipped policies, without their unit tests.
func shippedSources(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := fs.WalkDir(policies.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".rego") || strings.HasSuffix(p, "_test.rego") {
			return err
		}
		b, err := fs.ReadFile(policies.FS(), p)
		out["policies/"+p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// inputSets are the paths of the input document that the engine hands to
// Rego as sets: JSON has no sets, so `facts --format input` prints them as
// sorted arrays and they are turned back into sets here.
var inputSets = [][]string{
	{"facts", "discovered"}, {"facts", "loaded"}, {"facts", "returned"}, {"facts", "active_capabilities"},
	{"outgoing", "discovered"}, {"outgoing", "loaded"},
	{"filters", "next", "dropped"}, {"filters", "dispatch", "dropped"},
	{"dispatch", "loaded"}, {"dispatch", "active_capabilities"},
	{"dispatch", "evidence", "discovered"}, {"dispatch", "evidence", "loaded"},
	{"dispatch", "same_response", "revealed"}, {"dispatch", "same_response", "pending_loads"},
}

func inputValue(t *testing.T, in map[string]any) ast.Value {
	t.Helper()
	v, err := ast.InterfaceToValue(in)
	if err != nil {
		t.Fatal(err)
	}
	root := v.(ast.Object)
	for _, path := range inputSets {
		ref := make(ast.Ref, len(path))
		for i, k := range path {
			ref[i] = ast.StringTerm(k)
		}
		x, err := root.Find(ref)
		if err != nil {
			if _, ok := in["dispatch"]; !ok && path[0] == "dispatch" {
				continue
			}
			t.Fatalf("input: no %s", strings.Join(path, "."))
		}
		arr, ok := x.(*ast.Array)
		if !ok {
			t.Fatalf("input.%s: want an array of names, got %v", strings.Join(path, "."), x)
		}
		parent, err := root.Find(ref[:len(ref)-1])
		if err != nil {
			t.Fatal(err)
		}
		set := ast.NewSet()
		arr.Foreach(func(e *ast.Term) { set.Add(e) })
		parent.(ast.Object).Insert(ref[len(ref)-1], ast.NewTerm(set))
	}
	return root
}

// registryValue is the registry as the policies read it under
// data.policycheck.registry (policies/lib/lib.rego documents it).
func registryValue(reg *facts.Registry) ast.Value {
	set := func(s []string) *ast.Term {
		terms := make([]*ast.Term, len(s))
		for i, x := range s {
			terms[i] = ast.StringTerm(x)
		}
		return ast.SetTerm(terms...)
	}
	tools := ast.NewObject()
	for _, tl := range reg.Tools() {
		gate, _ := reg.GateOf(tl.Name)
		capTerm := ast.NullTerm()
		if tl.Capability != "" {
			capTerm = ast.StringTerm(tl.Capability)
		}
		tools.Insert(ast.StringTerm(tl.Name), ast.ObjectTerm(
			ast.Item(ast.StringTerm("name"), ast.StringTerm(tl.Name)),
			ast.Item(ast.StringTerm("capability"), capTerm),
			ast.Item(ast.StringTerm("defer_loading"), ast.BooleanTerm(tl.DeferLoading)),
			ast.Item(ast.StringTerm("gate"), ast.StringTerm(gate.String())),
			ast.Item(ast.StringTerm("description"), ast.StringTerm(tl.Description)),
		))
	}
	caps, capTools := ast.NewObject(), ast.NewObject()
	for _, c := range reg.Capabilities() {
		caps.Insert(ast.StringTerm(c.ID), ast.ObjectTerm(
			ast.Item(ast.StringTerm("id"), ast.StringTerm(c.ID)),
			ast.Item(ast.StringTerm("defer_loading"), ast.BooleanTerm(c.DeferLoading)),
			ast.Item(ast.StringTerm("description"), ast.StringTerm(c.Description)),
		))
		if c.DeferLoading {
			capTools.Insert(ast.StringTerm(c.ID), set(reg.CapabilityTools(c.ID)))
		}
	}
	return ast.NewObject(
		ast.Item(ast.StringTerm("tools"), ast.NewTerm(tools)),
		ast.Item(ast.StringTerm("capabilities"), ast.NewTerm(caps)),
		ast.Item(ast.StringTerm("names"), set(reg.ToolNames())),
		ast.Item(ast.StringTerm("always_available"), set(reg.AlwaysAvailableTools())),
		ast.Item(ast.StringTerm("search_gated"), set(reg.SearchGatedTools())),
		ast.Item(ast.StringTerm("deferred_capabilities"), set(reg.DeferredCapabilities())),
		ast.Item(ast.StringTerm("always_on_capabilities"), set(reg.AlwaysOnCapabilities())),
		ast.Item(ast.StringTerm("capability_tools"), ast.NewTerm(capTools)),
	)
}

// evalShipped evaluates data.policycheck.availability.decision, the
// engine's entrypoint, with OPA's rego package: the shipped policies, the
// registry as data and the input document, sets restored. It returns the
// decision as JSON values, sets as sorted arrays.
func evalShipped(t *testing.T, compiler *ast.Compiler, reg *facts.Registry, in map[string]any) map[string]any {
	t.Helper()
	ctx := context.Background()
	store := inmem.NewWithOpts(inmem.OptRoundTripOnWrite(false), inmem.OptReturnASTValuesOnRead(true))
	data := ast.NewObject(ast.Item(ast.StringTerm("policycheck"),
		ast.ObjectTerm(ast.Item(ast.StringTerm("registry"), ast.NewTerm(registryValue(reg))))))
	if err := storage.WriteOne(ctx, store, storage.AddOp, storage.RootPath, data); err != nil {
		t.Fatal(err)
	}
	rs, err := rego.New(
		rego.Query("data.policycheck.availability.decision"),
		rego.Compiler(compiler),
		rego.Store(store),
		rego.ParsedInput(inputValue(t, in)),
		rego.StrictBuiltinErrors(true),
	).Eval(ctx)
	if err != nil {
		t.Fatalf("rego: %v", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		t.Fatalf("rego: decision undefined (%v)", rs)
	}
	// Sets come back as arrays; round-trip through JSON to compare with
	// eval's output (json.Number, sorted arrays).
	b, err := json.Marshal(rs[0].Expressions[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"available", "advertised", "dispatch_available"} {
		if arr, ok := out[k].([]any); ok {
			slices.SortFunc(arr, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
		}
	}
	return out
}

// partPos is a (message, part) position in a history.
type partPos struct{ msg, part int }

func (p partPos) String() string { return fmt.Sprintf("message %d, part %d", p.msg, p.part) }

// findParts returns the positions of the parts of a history for which keep
// is true.
func findParts(t *testing.T, path string, keep func(p map[string]any) bool) []partPos {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h []struct {
		Parts []map[string]any `json:"parts"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}
	var out []partPos
	for i, m := range h {
		for j, p := range m.Parts {
			if keep(p) {
				out = append(out, partPos{i, j})
			}
		}
	}
	return out
}

// TestExplainPointsAtTheHistory checks that explain names the message and
// part that revealed or loaded a tool and the compaction part that hid it,
// on examples/histories/after-compaction.json (a search and a load, then a
// compaction, then a call to the tool the load had made available).
func TestExplainPointsAtTheHistory(t *testing.T) {
	t.Parallel()
	reg := filepath.Join(examplesDir, "registry.yaml")
	h := filepath.Join(examplesDir, "histories", "after-compaction.json")
	is := func(kind, toolKind string) func(map[string]any) bool {
		return func(p map[string]any) bool { return p["part_kind"] == kind && p["tool_kind"] == toolKind }
	}
	one := func(what string, ps []partPos) partPos {
		t.Helper()
		if len(ps) != 1 {
			t.Fatalf("the example should hold one %s, has %v", what, ps)
		}
		return ps[0]
	}
	compaction := one("compaction part", findParts(t, h, func(p map[string]any) bool { return p["part_kind"] == "compaction" }))
	search := one("search return", findParts(t, h, is("tool-return", "tool-search")))
	loadCall := findParts(t, h, is("tool-call", "capability-load"))[0] // the second is the last response's
	loadReturn := one("load return", findParts(t, h, is("tool-return", "capability-load")))

	res := run(t, "", "explain", "--registry", reg, "--history", h)
	if res.code != cli.ExitOK || res.stderr != "" {
		t.Fatalf("explain: exit %d, stderr %q", res.code, res.stderr)
	}
	for _, want := range []string{
		// the window and the compaction part that opens it
		fmt.Sprintf("Window: from the compaction part at %s", compaction),
		// the load, and that the compaction hid it
		fmt.Sprintf("loaded by the call at %s answered at %s (split by or before the compaction boundary, so it no longer counts)", loadCall, loadReturn),
		// the reveal, and that the compaction hid it
		fmt.Sprintf("revealed by a search return at %s (before the compaction boundary, so hidden again)", search),
		"issue_refund: NOT available",
		"c6 issue_refund -> not_available_yet",
		"model is told: Tool 'issue_refund' is not available yet: it belongs to capability 'refunds'.",
		"l2 load_capability -> execute",
		"policies/availability/availability.rego (data.policycheck.availability): decision entrypoint",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("explain does not say %q:\n%s", want, res.stdout)
		}
	}

	// Same inputs, same decision: explain's fingerprint is eval's.
	ev := run(t, "", "eval", "--registry", reg, "--history", h)
	d := decodeJSON(t, "eval", ev.stdout)
	if want := fmt.Sprintf("Filter-cache fingerprint (active capabilities, context, policy and registry revisions; not the history): %s\n", d["fingerprint"]); !strings.HasPrefix(res.stdout, want) {
		t.Errorf("explain starts %q, want %q", strings.SplitN(res.stdout, "\n", 2)[0], want)
	}
	// explain --format json holds eval's decision.
	js := run(t, "", "explain", "--format", "json", "--registry", reg, "--history", h)
	x := decodeJSON(t, "explain --format json", js.stdout)
	if !reflect.DeepEqual(x["decision"], d) {
		t.Errorf("explain --format json: decision differs from eval's\n got: %s\nwant: %s", mustJSON(x["decision"]), mustJSON(d))
	}
	for _, cmd := range []string{"explain", "facts"} {
		bad := run(t, "", cmd, "--format", "yaml", "--registry", reg, "--history", h)
		if bad.code != cli.ExitBadUsage || bad.stdout != "" || !strings.Contains(bad.stderr, `--format must be`) {
			t.Errorf("%s --format yaml: exit %d, stdout %q, stderr %q; want 2, nothing and the formats", cmd, bad.code, bad.stdout, bad.stderr)
		}
	}
}

// TestConformanceCommand runs the conformance command on the shared corpus
// (all pass, exit 0) and on copies of a case: intact (1 passed) and
// deliberately broken (1 failed, exit 1).
func TestConformanceCommand(t *testing.T) {
	t.Parallel()
	t.Run("shared corpus", func(t *testing.T) {
		t.Parallel()
		shared, err := conformance.SharedDir()
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but %v", err)
			}
			t.Skipf("skipping: %v (under CI=true this fails)", err)
		}
		dir := filepath.Join(shared, "conformance", "cases")
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no cases in %s: %v", dir, err)
		}
		res := run(t, "", "conformance", dir)
		want := fmt.Sprintf("%d passed, 0 failed\n", len(files))
		if res.code != cli.ExitOK || res.stdout != want || res.stderr != "" {
			t.Errorf("conformance %s: exit %d, stdout %q, stderr %q; want 0 and %q", dir, res.code, trim(res.stdout), res.stderr, want)
		}
		t.Logf("%s", strings.TrimSpace(res.stdout))
	})

	const name = "anchored-capability-tool-foreign-provider.json"
	good, err := os.ReadFile(filepath.Join("testdata", "conformance", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("one intact case", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, dir, name, string(good))
		res := run(t, "", "conformance", "-v", dir)
		if want := "PASS " + name + "\n1 passed, 0 failed\n"; res.code != cli.ExitOK || res.stdout != want {
			t.Errorf("exit %d, stdout %q; want 0 and %q", res.code, res.stdout, want)
		}
	})
	t.Run("one broken case", func(t *testing.T) {
		t.Parallel()
		// The case expects guarded_tool to execute; claim it is refused.
		broken := strings.Replace(string(good), `"verdict": "execute"`, `"verdict": "not_available_yet"`, 1)
		if broken == string(good) {
			t.Fatal("the case no longer holds an execute verdict to break")
		}
		dir := t.TempDir()
		writeFile(t, dir, name, broken)
		res := run(t, "", "conformance", dir)
		if res.code != cli.ExitFailed {
			t.Errorf("exit %d, want %d", res.code, cli.ExitFailed)
		}
		for _, want := range []string{
			"FAIL " + name + "\n",
			"call 0: want g1 guarded_tool not_available_yet, got g1 guarded_tool execute",
		} {
			if !strings.Contains(res.stdout, want) {
				t.Errorf("stdout does not say %q:\n%s", want, res.stdout)
			}
		}
		if !strings.HasSuffix(res.stdout, "\n0 passed, 1 failed\n") {
			t.Errorf("stdout does not end with the tally 0 passed, 1 failed:\n%s", res.stdout)
		}
	})
	t.Run("--format json", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeFile(t, dir, name, string(good))
		writeFile(t, dir, "broken.json", strings.Replace(string(good), `"verdict": "execute"`, `"verdict": "not_available_yet"`, 1))
		res := run(t, "", "conformance", "-f", "json", dir)
		if res.code != cli.ExitFailed {
			t.Errorf("exit %d, want %d", res.code, cli.ExitFailed)
		}
		var doc struct {
			Passed, Failed int
			Cases          []struct {
				Case     string
				Passed   bool
				Failures []string
			}
		}
		if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil {
			t.Fatalf("not one JSON document: %v\n%s", err, res.stdout)
		}
		if doc.Passed != 1 || doc.Failed != 1 || len(doc.Cases) != 2 || doc.Cases[0].Case != name || !doc.Cases[0].Passed ||
			doc.Cases[1].Case != "broken.json" || doc.Cases[1].Passed || len(doc.Cases[1].Failures) == 0 ||
			!strings.Contains(doc.Cases[1].Failures[0], "want g1 guarded_tool not_available_yet") {
			t.Errorf("conformance -f json:\n%s", res.stdout)
		}
	})
	for _, tc := range []struct {
		note  string
		files map[string]string
		code  int
		want  string
	}{
		{note: "an empty directory", code: cli.ExitBadUsage, want: "no *.json cases"},
		{note: "a case that is not JSON", files: map[string]string{"bad.json": `{"name": `}, code: cli.ExitBadUsage,
			want: "bad.json: unexpected EOF"},
		// A case whose history does not load is a failed case, named with
		// the JSON pointer inside the case file.
		{note: "a case with a bad history", files: map[string]string{name: strings.Replace(string(good), `"kind": "request"`, `"kind": "question"`, 1)},
			code: cli.ExitFailed, want: name + "#/history: /1/kind: \"question\" is not one of"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for n, data := range tc.files {
				writeFile(t, dir, n, data)
			}
			res := run(t, "", "conformance", dir)
			if res.code != tc.code {
				t.Errorf("exit %d, want %d", res.code, tc.code)
			}
			if !strings.Contains(res.stdout+res.stderr, tc.want) {
				t.Errorf("output does not say %q:\nstdout: %s\nstderr: %s", tc.want, res.stdout, res.stderr)
			}
		})
	}
}

// TestHistoryFromStdin checks that --history - reads the history from
// standard input, gives the same output as the file, and names <stdin> in
// errors.
func TestHistoryFromStdin(t *testing.T) {
	t.Parallel()
	reg := filepath.Join(examplesDir, "registry.yaml")
	h := filepath.Join(examplesDir, "histories", "refund.json")
	data, err := os.ReadFile(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"eval"}, {"facts"}, {"facts", "--format", "input"}, {"explain"}} {
		fromFile := run(t, "", append(append([]string{}, cmd...), "--registry", reg, "--history", h)...)
		fromStdin := run(t, string(data), append(append([]string{}, cmd...), "--registry", reg, "--history", "-")...)
		if fromStdin.code != cli.ExitOK || fromStdin != fromFile {
			t.Errorf("%s --history -: exit %d, stderr %q; output differs from --history %s", strings.Join(cmd, " "), fromStdin.code, fromStdin.stderr, h)
		}
	}
	for _, tc := range []struct{ note, stdin, want string }{
		{"empty", "", "policycheck: <stdin>: (root): invalid JSON: unexpected end of input"},
		{"a message that is not an object", "[1]", "policycheck: <stdin>: /0: a message must be an object"},
	} {
		res := run(t, tc.stdin, "eval", "--registry", reg, "--history", "-")
		if res.code != cli.ExitBadUsage || res.stdout != "" || !strings.HasPrefix(res.stderr, tc.want) {
			t.Errorf("%s on stdin: exit %d, stdout %q, stderr %q; want 2, nothing, %q", tc.note, res.code, res.stdout, res.stderr, tc.want)
		}
	}
}

// TestRegistryCommand: `policycheck registry` prints the registry as the
// policies read it, byte for byte the registry/data.json the recorded-run
// fixtures commit for the same registry, and refuses a registry that
// breaks its rules with the file and the JSON pointer, exit 2.
// TestRegistryCommandLabels: labels reach data.policycheck.registry, a
// tool carrying its capability's as well as its own; a label of the wrong
// shape is refused with its pointer.
func TestRegistryCommandLabels(t *testing.T) {
	reg := writeFile(t, t.TempDir(), "labels.yaml", `capabilities:
  - id: vault
    labels: [secret]
  - id: plain
tools:
  - name: read_secret
    capability: vault
    labels: [internal, secret]
  - name: send_email
    labels: [external]
  - name: get_time
    capability: plain
`)
	res := run(t, "", "registry", "--registry", reg)
	if res.code != cli.ExitOK {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	var doc struct {
		Tools        map[string]struct{ Labels []string } `json:"tools"`
		Capabilities map[string]struct{ Labels []string } `json:"capabilities"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{"read_secret": {"internal", "secret"}, "send_email": {"external"}, "get_time": {}} {
		if got := doc.Tools[name].Labels; !reflect.DeepEqual(got, want) {
			t.Errorf("tools[%s].labels = %#v, want %#v", name, got, want)
		}
	}
	if got := doc.Capabilities["vault"].Labels; !reflect.DeepEqual(got, []string{"secret"}) {
		t.Errorf("capabilities[vault].labels = %#v", got)
	}
	for text, ptr := range map[string]string{
		"tools:\n  - name: a\n    labels: secret\n":                 "bad.yaml: /tools/0/labels",
		"tools:\n  - name: a\n    labels: [ok, 3]\n":                "bad.yaml: /tools/0/labels/1",
		"capabilities:\n  - id: c\n    labels: [\"\"]\ntools: []\n": "bad.yaml: /capabilities/0/labels/0",
	} {
		bad := writeFile(t, t.TempDir(), "bad.yaml", text)
		res = run(t, "", "registry", "--registry", bad)
		if res.code != cli.ExitBadUsage || !strings.Contains(res.stderr, ptr) || res.stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %s", text, res.code, res.stdout, res.stderr, ptr)
		}
	}
}

func TestRegistryCommand(t *testing.T) {
	res := run(t, "", "registry", "--registry", "../../examples/registry.yaml")
	if res.code != cli.ExitOK {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	want, err := os.ReadFile("../../policy_test/recorded/examples/refund/registry/data.json")
	if err != nil {
		t.Fatal(err)
	}
	if res.stdout != string(want) {
		t.Errorf("registry printed:\n%s\nthe committed fixture holds:\n%s", res.stdout, want)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	wantOwned := map[string]any{"docs": []any{"search_docs"}, "refunds": []any{"issue_refund"},
		"vault": []any{"rotate_key", "secret_op"}}
	if !reflect.DeepEqual(doc["owned_tools"], wantOwned) {
		t.Errorf("owned_tools = %v, want %v", doc["owned_tools"], wantOwned)
	}

	bad := writeFile(t, t.TempDir(), "bad.yaml", "tools:\n  - name: get_time\n  - name: load_capability\n")
	res = run(t, "", "registry", "--registry", bad)
	if res.code != cli.ExitBadUsage || !strings.Contains(res.stderr, "bad.yaml: /tools/1/name") || res.stdout != "" {
		t.Errorf("a reserved tool name: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}

	res = run(t, "", "registry")
	if res.code != cli.ExitBadUsage || !strings.Contains(res.stderr, "registry") {
		t.Errorf("no --registry: exit %d, stderr %q", res.code, res.stderr)
	}
}
