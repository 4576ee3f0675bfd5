package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/output/explainpage"
	"github.com/policycheck/policycheck/internal/testkit/gen"
	"github.com/policycheck/policycheck/internal/testkit/racetest"
)

// explainCheck is appended to a copy of explain's page: it reads, from
// the rendered DOM, where the windows start, every reveal and load mark
// with the part it sits in, every call row, and, for each tool, which
// parts its selection highlights (CSS :target, no script of the page's
// own); then writes it as JSON into the DOM for --dump-dom.
const explainCheck = `<script>
(() => {
  const pos = el => { const p = el.closest(".part"); return p ? {message: +p.dataset.message, part: +p.dataset.part} : null; };
  const seen = el => el.getBoundingClientRect().height > 0;
  const before = (a, b) => a.message < b.message || (a.message === b.message && a.part < b.part);
  const out = {windows: {}, reveals: [], loadCalls: [], loadReturns: [], calls: [], partVerdicts: [], deltas: [], regionErrors: [], highlighted: {}, hidden: [], scripts: document.scripts.length, scrolled: 0};
  for (const b of document.querySelectorAll(".boundary")) {
    const next = b.nextElementSibling;
    out.windows[b.id] = {at: {message: +next.dataset.message, part: +next.dataset.part}, provider: b.dataset.provider, seen: seen(b)};
  }
  const parts = document.querySelectorAll(".part");
  for (const [name, cls] of [["window-conservative", "in-cons"], ["window-dispatch", "in-disp"]]) {
    const w = out.windows[name];
    if (!w) continue;
    for (const p of parts) {
      const at = {message: +p.dataset.message, part: +p.dataset.part};
      if (p.classList.contains(cls) === before(at, w.at)) out.regionErrors.push(name + " " + JSON.stringify(at));
    }
  }
  for (const m of document.querySelectorAll(".mark")) {
    if (!seen(m)) out.hidden.push(m.textContent);
    const d = m.dataset;
    const v = {tool: d.tool, at: pos(m), in_window: d.inWindow === "true", in_dispatch_window: d.inDispatchWindow};
    if (m.classList.contains("reveal")) out.reveals.push(Object.assign(v, {kind: d.kind}));
    if (m.classList.contains("delta")) out.deltas.push(pos(m));
    if (m.classList.contains("load-call")) out.loadCalls.push(Object.assign(v, {capability: d.name}));
    if (m.classList.contains("load-return")) out.loadReturns.push(Object.assign(v, {capability: d.name, call: {message: +d.callMessage, part: +d.callPart}}));
  }
  for (const tr of document.querySelectorAll("tr.call")) {
    const a = tr.querySelector(".call-id a");
    const target = document.getElementById(decodeURIComponent(a.getAttribute("href").slice(1)));
    out.calls.push({id: a.textContent, tool: tr.querySelector(".call-tool").textContent,
      verdict: tr.querySelector(".call-verdict").textContent, message: (tr.querySelector(".call-message .msg-text") || {textContent: ""}).textContent,
      rule: tr.querySelector(".call-rule").textContent,
      target: target ? {message: +target.dataset.message, part: +target.dataset.part, id: (target.querySelector(".cid") || {textContent: ""}).textContent, seen: seen(target)} : null});
  }
  for (const v of document.querySelectorAll(".part-verdict")) out.partVerdicts.push({at: pos(v), verdict: v.textContent});
  for (const link of document.querySelectorAll("a.tool-link")) {
    location.hash = link.getAttribute("href");
    const lit = [];
    for (const p of parts) if (getComputedStyle(p).outlineStyle === "solid") lit.push({message: +p.dataset.message, part: +p.dataset.part});
    out.highlighted[link.textContent] = lit;
  }
  location.hash = "";
  window.scrollTo(0, document.documentElement.scrollHeight);
  out.scrolled = window.scrollY;
  const pre = document.createElement("pre");
  pre.id = "page-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>`

type domMark struct {
	Tool             string
	At               *facts.Position
	Kind             string
	Capability       string
	Call             facts.Position
	InWindow         bool   `json:"in_window"`
	InDispatchWindow string `json:"in_dispatch_window"`
}

type explainDOM struct {
	Windows map[string]struct {
		At       facts.Position
		Provider string
		Seen     bool
	}
	Reveals, LoadCalls, LoadReturns []domMark
	Calls                           []struct {
		ID, Tool, Verdict, Message, Rule string
		Target                           *struct {
			Message, Part int
			ID            string
			Seen          bool
		}
	}
	PartVerdicts []struct {
		At      facts.Position
		Verdict string
	}
	Deltas       []facts.Position
	RegionErrors []string
	Highlighted  map[string][]facts.Position
	Hidden       []string
	Scripts      int
	Scrolled     float64
}

func boolStr(b *bool) string {
	if b == nil {
		return ""
	}
	return fmt.Sprint(*b)
}

func markKey(m domMark) string {
	return fmt.Sprintf("%s|%v|%s|%s|%v|%v|%s", m.Tool, m.At, m.Kind, m.Capability, m.Call, m.InWindow, m.InDispatchWindow)
}

func sortedMarkKeys(ms []domMark) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = markKey(m)
	}
	slices.Sort(out)
	return out
}

// explainBoth runs explain with args as --format json and --format html.
func explainBoth(t *testing.T, args ...string) (*engine.Explanation, string) {
	t.Helper()
	code, out, errs := runCLI(append(append([]string{"explain"}, args...), "--format", "json")...)
	if code != 0 {
		t.Fatalf("explain --format json: exit %d: %s", code, errs)
	}
	var x engine.Explanation
	if err := json.Unmarshal([]byte(out), &x); err != nil {
		t.Fatal(err)
	}
	code, page, errs := runCLI(append(append([]string{"explain"}, args...), "--format", "html")...)
	if code != 0 {
		t.Fatalf("explain --format html: exit %d: %s", code, errs)
	}
	return &x, page
}

// TestExplainHTMLInChromium opens explain's page for every shipped
// history in headless Chromium and checks, from the rendered DOM, that
// the windows, the reveal and load marks (and the parts they sit in), and
// every call's verdict and message equal explain --format json; that
// selecting a tool highlights the parts of its story; and that the page
// loads nothing and runs no script of its own.
func TestExplainHTMLInChromium(t *testing.T) {
	t.Parallel() // in-process and in Chromium; slow, and independent of the other tests
	browser := headlessChromium(t)
	histories, err := filepath.Glob(filepath.Join(examplesDir, "histories", "*.json"))
	if err != nil || len(histories) == 0 {
		t.Fatalf("no shipped histories: %v", err)
	}
	for _, h := range histories {
		t.Run(filepath.Base(h), func(t *testing.T) {
			x, page := explainBoth(t, "--registry", filepath.Join(examplesDir, "registry.yaml"), "--history", h)
			selfContained(t, page)
			var got explainDOM
			checkInChromium(t, browser, page, explainCheck, &got)
			compareExplainDOM(t, x, &got)
			if want := deltaParts(t, h); !slices.Equal(got.Deltas, want) {
				t.Errorf("availability delta marks at %v, the history's deltas are at %v", got.Deltas, want)
			}
		})
	}
}

// deltaParts returns where the history file's availability deltas are.
func deltaParts(t *testing.T, file string) []facts.Position {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var h []struct {
		Parts []struct {
			PartKind string `json:"part_kind"`
		}
	}
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	var out []facts.Position
	for i, m := range h {
		for j, p := range m.Parts {
			if p.PartKind == "tool-availability-delta" {
				out = append(out, facts.Position{Message: i, Part: j})
			}
		}
	}
	return out
}

// selfContained fails when page holds a script or an external resource,
// or lacks the Content-Security-Policy that forbids both.
func selfContained(t *testing.T, page string) {
	t.Helper()
	if strings.Contains(strings.ToLower(page), "<script") || regexp.MustCompile(`(?i)<[a-z][^>]*\s(src|href)\s*=\s*["']?(https?:)?//`).MatchString(page) {
		t.Fatal("the page is not self-contained: it holds a script or an external resource")
	}
	if !strings.Contains(page, `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; `+cspScriptNone+`;`) {
		t.Fatal("the page has no Content-Security-Policy forbidding loads and scripts")
	}
}

func compareExplainDOM(t *testing.T, x *engine.Explanation, got *explainDOM) {
	t.Helper()
	d := x.Decision
	if w, ok := got.Windows["window-conservative"]; !ok || w.At != d.Window || !w.Seen {
		t.Errorf("conservative window on the page: %+v (present %v), explain says %+v", w, ok, d.Window)
	}
	w, ok := got.Windows["window-dispatch"]
	switch {
	case d.Dispatch == nil && ok:
		t.Errorf("the page draws a dispatch window, explain has no dispatch")
	case d.Dispatch != nil:
		prov := ""
		if d.Dispatch.Provider != nil {
			prov = *d.Dispatch.Provider
		}
		if !ok || w.At != d.Dispatch.Window || w.Provider != prov || !w.Seen {
			t.Errorf("dispatch window on the page: %+v (present %v), explain says %+v of %q", w, ok, d.Dispatch.Window, prov)
		}
	}
	if len(got.RegionErrors) > 0 {
		t.Errorf("parts drawn on the wrong side of a window's start: %v", got.RegionErrors)
	}
	var reveals, calls, returns []domMark
	for _, tool := range x.Tools {
		for _, r := range tool.Reveals {
			at := r.At
			reveals = append(reveals, domMark{Tool: tool.Name, At: &at, Kind: r.Kind, InWindow: r.InWindow, InDispatchWindow: boolStr(r.InDispatchWindow)})
		}
		for _, l := range tool.Loads {
			c, r := l.Call, l.Return
			calls = append(calls, domMark{Tool: tool.Name, At: &c, Capability: l.Capability, InWindow: l.InWindow, InDispatchWindow: boolStr(l.InDispatchWindow)})
			returns = append(returns, domMark{Tool: tool.Name, At: &r, Capability: l.Capability, Call: l.Call, InWindow: l.InWindow, InDispatchWindow: boolStr(l.InDispatchWindow)})
		}
		lit := got.Highlighted[tool.Name]
		for _, r := range tool.Reveals {
			if !slices.Contains(lit, r.At) {
				t.Errorf("selecting %s does not highlight its reveal at %+v (highlights %v)", tool.Name, r.At, lit)
			}
		}
		for _, l := range tool.Loads {
			if !slices.Contains(lit, l.Call) || !slices.Contains(lit, l.Return) {
				t.Errorf("selecting %s does not highlight its load at %+v/%+v (highlights %v)", tool.Name, l.Call, l.Return, lit)
			}
		}
	}
	for _, pair := range []struct {
		what      string
		got, want []domMark
	}{{"reveal", got.Reveals, reveals}, {"load call", got.LoadCalls, calls}, {"load return", got.LoadReturns, returns}} {
		if g, w := sortedMarkKeys(pair.got), sortedMarkKeys(pair.want); !slices.Equal(g, w) {
			t.Errorf("%s marks on the page:\n  %v\nexplain --format json:\n  %v", pair.what, g, w)
		}
	}
	if len(got.Hidden) > 0 {
		t.Errorf("marks that are not shown: %v", got.Hidden)
	}
	if len(got.Calls) != len(x.Calls) {
		t.Fatalf("%d call rows on the page, explain has %d calls", len(got.Calls), len(x.Calls))
	}
	if len(got.PartVerdicts) != len(x.Calls) {
		t.Errorf("%d verdicts in the timeline, explain has %d calls", len(got.PartVerdicts), len(x.Calls))
	}
	for i, c := range x.Calls {
		g := got.Calls[i]
		id := "(no id)"
		if c.ToolCallID != nil {
			id = *c.ToolCallID
		}
		if g.ID != id || g.Tool != c.Tool || g.Verdict != c.Verdict || g.Message != c.Message {
			t.Errorf("call %d on the page: %q %q -> %q told %q; explain: %q %q -> %q told %q", i, g.ID, g.Tool, g.Verdict, g.Message, id, c.Tool, c.Verdict, c.Message)
		}
		if c.DecidedBy != nil && !strings.Contains(g.Rule, c.DecidedBy.Location) {
			t.Errorf("call %d: the page names the rule %q, explain says %+v", i, g.Rule, c.DecidedBy)
		}
		if g.Target == nil || !g.Target.Seen || (c.ToolCallID != nil && g.Target.ID != "id "+*c.ToolCallID) {
			t.Errorf("call %d's link does not lead to its part in the timeline: %+v", i, g.Target)
		}
		if i < len(got.PartVerdicts) && g.Target != nil {
			pv := got.PartVerdicts[i]
			if pv.Verdict != "→ "+c.Verdict || pv.At != (facts.Position{Message: g.Target.Message, Part: g.Target.Part}) {
				t.Errorf("call %d's verdict in the timeline: %+v, want %q at its part %+v", i, pv, c.Verdict, g.Target)
			}
		}
	}
	if got.Scripts != 1 {
		t.Errorf("%d scripts in the page, want only the check", got.Scripts)
	}
}

// hostileCheck reports, from the rendered page, every element and
// attribute that no template of the page writes (an input string
// interpreted as markup would add some), and the text the page shows for
// the tools, ids and contents.
const hostileCheck = `<script>
(() => {
  const allowed = new Set(["HTML","HEAD","META","TITLE","STYLE","BODY","H1","H2","H3","P","A","SECTION","TABLE","TBODY","TR","TH","TD","UL","LI","CODE","SPAN","DETAILS","SUMMARY","PRE","DIV","BR","SCRIPT"]);
  const attrs = new Set(["class","id","href","style","lang","charset","http-equiv","content","name"]);
  const out = {elements: [], attributes: [], scripts: document.scripts.length, title: document.title, tools: [], callTools: [], callIDs: [], partTools: [], cids: [], bodies: [], marks: []};
  for (const el of document.querySelectorAll("*")) {
    if (!allowed.has(el.tagName)) out.elements.push(el.tagName);
    for (const a of el.attributes) if (!attrs.has(a.name) && !a.name.startsWith("data-")) out.attributes.push(el.tagName + " " + a.name);
  }
  for (const a of document.querySelectorAll("a.tool-link")) out.tools.push(a.textContent);
  for (const c of document.querySelectorAll(".call-tool")) out.callTools.push(c.textContent);
  for (const c of document.querySelectorAll(".call-id")) out.callIDs.push(c.textContent);
  for (const c of document.querySelectorAll(".part-tool")) out.partTools.push(c.textContent);
  for (const c of document.querySelectorAll(".cid")) out.cids.push(c.textContent);
  for (const c of document.querySelectorAll(".part pre")) out.bodies.push(c.textContent);
  for (const m of document.querySelectorAll(".mark")) out.marks.push(m.dataset.tool);
  const pre = document.createElement("pre");
  pre.id = "page-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>`

// TestExplainHTMLHostileStrings explains a history and registry full of
// markup, scripts and control characters (in tool names, a capability
// id, tool_call_ids, a provider name and contents): the page holds none
// of it as markup, and, in Chromium, shows each string as text, its
// control and bidirectional characters made visible.
func TestExplainHTMLHostileStrings(t *testing.T) {
	const (
		tool    = "<b>x</b>\x1b[31m\u202egnp.exe"
		unknown = "<img src=x onerror=alert(1)>\x00\x07"
		capID   = "cap\"><script>alert(2)</script>"
		capTool = "<svg/onload=alert(3)>"
		callID  = "\"><script>alert(4)</script>\u2028"
		content = "</pre></details><script>alert(5)</script><iframe src=//evil.example></iframe>\x1b[0m\nsecond line\u2066"
		prov    = "<i>prov</i>"
	)
	dir := t.TempDir()
	reg := fmt.Sprintf("capabilities:\n  - id: %s\n    defer_loading: true\ntools:\n  - name: %s\n    defer_loading: true\n  - name: %s\n    capability: %s\n",
		mustJSON(capID), mustJSON(tool), mustJSON(capTool), mustJSON(capID))
	history := []map[string]any{
		{"kind": "request", "parts": []any{map[string]any{"part_kind": "user-prompt", "content": content}}},
		{"kind": "response", "provider_name": prov, "model_name": prov, "parts": []any{
			map[string]any{"part_kind": "text", "content": content},
			map[string]any{"part_kind": "tool-call", "tool_name": "search_tools", "tool_kind": "tool-search", "tool_call_id": callID + "s", "args": map[string]any{"queries": []string{content}}},
			map[string]any{"part_kind": "tool-call", "tool_name": "load_capability", "tool_kind": "capability-load", "tool_call_id": callID + "l", "args": map[string]any{"id": capID}},
		}},
		{"kind": "request", "parts": []any{
			map[string]any{"part_kind": "tool-return", "tool_name": "search_tools", "tool_kind": "tool-search", "tool_call_id": callID + "s",
				"content": map[string]any{"discovered_tools": []any{map[string]any{"name": tool}}}},
			map[string]any{"part_kind": "tool-return", "tool_name": "load_capability", "tool_kind": "capability-load", "tool_call_id": callID + "l", "content": map[string]any{"instructions": content}},
		}},
		{"kind": "response", "provider_name": prov, "parts": []any{
			map[string]any{"part_kind": "tool-call", "tool_name": tool, "tool_call_id": callID, "args": map[string]any{"q": content}},
			map[string]any{"part_kind": "tool-call", "tool_name": unknown, "tool_call_id": callID + "u", "args": content},
			map[string]any{"part_kind": "tool-call", "tool_name": capTool, "tool_call_id": callID + "c", "args": map[string]any{}},
		}},
	}
	regFile, histFile := filepath.Join(dir, "registry.yaml"), filepath.Join(dir, "history.json")
	if err := os.WriteFile(regFile, []byte(reg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(histFile, []byte(mustJSON(history)), 0o644); err != nil {
		t.Fatal(err)
	}
	x, page := explainBoth(t, "--registry", regFile, "--history", histFile)
	selfContained(t, page)
	for _, raw := range []string{"<b>", "<i>", "<img", "<svg", "<iframe", "\x1b", "\x00", "\x07", "\u202e", "\u2028", "\u2066"} {
		if strings.Contains(page, raw) {
			t.Errorf("the page holds %q as written in the input", raw)
		}
	}
	if len(x.Calls) != 3 || x.Calls[0].Verdict != engine.Execute || x.Calls[1].Verdict != engine.UnknownTool || x.Calls[2].Verdict != engine.Execute {
		t.Fatalf("the hostile history should execute the revealed and the loaded tool and refuse the unknown one: %+v", x.Calls)
	}

	browser := headlessChromium(t)
	var got struct {
		Elements, Attributes                 []string
		Scripts                              int
		Title                                string
		Tools, CallTools, CallIDs, PartTools []string
		Cids, Bodies, Marks                  []string
	}
	checkInChromium(t, browser, page, hostileCheck, &got)
	if len(got.Elements) > 0 || len(got.Attributes) > 0 || got.Scripts != 1 {
		t.Errorf("input interpreted as markup: elements %v, attributes %v, %d scripts", got.Elements, got.Attributes, got.Scripts)
	}
	vis := func(s string) string { return explainpage.Visible(s, false) }
	for _, want := range []string{tool, capTool} {
		if !slices.Contains(got.Tools, vis(want)) {
			t.Errorf("the tools table does not show %q as text: %q", vis(want), got.Tools)
		}
	}
	if want := []string{vis(tool), vis(unknown), vis(capTool)}; !slices.Equal(got.CallTools, want) {
		t.Errorf("call tools shown %q, want %q", got.CallTools, want)
	}
	if want := []string{vis(callID), vis(callID + "u"), vis(callID + "c")}; !slices.Equal(got.CallIDs, want) {
		t.Errorf("call ids shown %q, want %q", got.CallIDs, want)
	}
	for _, want := range []string{vis(tool), vis(unknown), vis(capTool)} {
		if !slices.Contains(got.PartTools, want) {
			t.Errorf("the timeline does not show the tool %q of a call: %q", want, got.PartTools)
		}
	}
	if !slices.Contains(got.Cids, "id "+vis(callID)) {
		t.Errorf("the timeline does not show the id %q: %q", vis(callID), got.Cids)
	}
	if !slices.Contains(got.Bodies, explainpage.Visible(content, true)) {
		t.Errorf("the timeline does not show the content %q as text: %q", explainpage.Visible(content, true), got.Bodies)
	}
	if !slices.Contains(got.Marks, vis(tool)) || !slices.Contains(got.Marks, vis(capTool)) {
		t.Errorf("reveal and load marks name %q, want %q and %q", got.Marks, vis(tool), vis(capTool))
	}
	if got.Title != fmt.Sprintf("policycheck explain: %d messages, %d calls", len(history), len(x.Calls)) {
		t.Errorf("title %q", got.Title)
	}
}

// largeCheck reads, from the rendered page of a long history, how many
// messages and folds it shows, and scrolls to the last message.
const largeCheck = `<script>
(() => {
  const parsed = performance.now();
  void document.documentElement.scrollHeight; // lays the page out
  const laidOut = performance.now();
  const out = {parsedMs: parsed, layoutMs: laidOut - parsed, messages: document.querySelectorAll("section.msg").length, folds: document.querySelectorAll("details.fold").length,
    openFolds: document.querySelectorAll("details.fold[open]").length, calls: document.querySelectorAll("tr.call").length};
  const last = document.querySelectorAll("section.msg");
  last[last.length - 1].scrollIntoView();
  out.scrolled = window.scrollY;
  out.height = document.documentElement.scrollHeight;
  const pre = document.createElement("pre");
  pre.id = "page-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>`

// TestExplainHTMLLargeHistory explains a generated history of 10,000
// messages as a page: long runs of uneventful messages are folded, and,
// in Chromium, the page opens with every message and scrolls to the last.
// Its size and Chromium's time are logged (BENCHMARKS.md), not asserted.
// Under -race it explains 2,000 (one goroutine: scripts/test.sh runs the
// 10,000 without -race).
func TestExplainHTMLLargeHistory(t *testing.T) {
	t.Parallel() // in-process and in Chromium; slow, and independent of the other tests
	if testing.Short() {
		t.Skip("-short: a 10,000-message page")
	}
	n := racetest.Size(10_000, 2_000)
	o := gen.Default(n)
	dir := t.TempDir()
	regFile, histFile := filepath.Join(dir, "registry.json"), filepath.Join(dir, "history.json")
	hist := gen.History(1, o)
	if err := os.WriteFile(regFile, gen.Registry(1, o), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(histFile, hist, 0o644); err != nil {
		t.Fatal(err)
	}
	code, page, errs := runCLI("explain", "--registry", regFile, "--history", histFile, "--format", "html")
	if code != 0 {
		t.Fatalf("explain --format html: exit %d: %s", code, errs)
	}
	selfContained(t, page)
	folded := regexp.MustCompile(`<td id="folded">(\d+) messages`).FindStringSubmatch(page)
	if folded == nil || strings.Count(page, `<details class="fold"`) == 0 {
		t.Fatal("no run of uneventful messages is folded")
	}
	browser := headlessChromium(t)
	var got struct {
		Messages, Folds, OpenFolds, Calls int
		Scrolled, Height                  float64
		ParsedMs, LayoutMs                float64
	}
	took := checkInChromium(t, browser, page, largeCheck, &got)
	if got.Messages != n || got.Folds == 0 || got.OpenFolds != 0 || got.Scrolled <= 0 {
		t.Errorf("the page of %d messages shows %d messages, %d folds (%d open), scrolled to %v of %v", n, got.Messages, got.Folds, got.OpenFolds, got.Scrolled, got.Height)
	}
	t.Logf("%d messages (history %d bytes): page %d bytes, %s messages folded in %d folds; in Chromium, parsed (from navigation start) in %.0f ms, laid out in %.0f ms more; the whole Chromium run took %s",
		n, len(hist), len(page), folded[1], got.Folds, got.ParsedMs, got.LayoutMs, took.Round(time.Millisecond))
}
