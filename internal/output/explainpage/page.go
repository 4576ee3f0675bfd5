// Package explainpage draws an explanation as one self-contained HTML
// page for people: the conversation as a timeline with the windows, the
// reveals and the loads marked where they happen, each registry tool's
// story, and each call of the dispatched response with its verdict.
//
// The page holds no script and loads nothing (its Content-Security-Policy
// forbids both): highlighting a tool's parts is done in CSS (:target and
// :has), collapsing with <details>. Every string read from the input goes
// through html/template's contextual escaping, after Visible has made its
// control and bidirectional-formatting characters visible, so that no
// input string is ever interpreted as markup or reorders the text around
// it.
package explainpage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/wire"
	"github.com/policycheck/policycheck/loader"
)

// CSP is the page's Content-Security-Policy: nothing is loaded and no
// script runs. The sidecar sends it as a header too.
const CSP = "default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; form-action 'none'"

// FoldAt is the shortest run of uneventful messages that is folded into
// one collapsed block.
const FoldAt = 8

// maxBody bounds the text shown for one part; the rest is counted.
const maxBody = 4000

// maxFirst bounds a part's first line in its summary.
const maxFirst = 160

// Write renders x, the explanation of the history t holds, as an HTML
// page: the explanation's form in internal/output/render's HTML renderer,
// through which explain --format html and the sidecar draw it. t must be
// the history x was decided from, as the loader read it
// (loader.DecodeTranscript): the page reads nothing of the history again.
func Write(w io.Writer, x *engine.Explanation, t *loader.Transcript) error {
	if t == nil || len(t.Messages) != len(t.History) {
		return fmt.Errorf("explain page: no transcript of the history")
	}
	p := build(x, t)
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, p); err != nil {
		return fmt.Errorf("explain page: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

type page struct {
	X          *engine.Explanation
	Messages   int
	Cons, Disp *window
	Items      []item
	Tools      []toolRow
	Calls      []callRow
	ToolIdx    []int // indices of the tools, for the highlight rules
	Folded     int   // messages folded
	Framework  []string
	Approvals  []engine.ApprovalOutcome
	WouldHide  []string
	Errors     []string
	Policies   []engine.PolicyExplained
}

type window struct {
	Name     string // conservative or dispatch
	At       facts.Position
	Provider string
	Whole    bool // no compaction bounds it
	Text     string
}

type item struct {
	Fold *fold
	Msg  *message
}

type fold struct {
	From, To, N int
	Msgs        []*message
}

type message struct {
	Index           int
	Kind            string
	Provider, Model string
	Parts           []*part
	Dispatch        bool // the dispatched response
}

type part struct {
	Message, Index int
	Kind           string
	Name, CallID   string
	First          string
	Body           string
	More           int
	Marks          []mark
	Boundaries     []*window
	InCons, InDisp bool
	HasDisp        bool
	Tools          []int // tools whose story this part is in
	Compaction     bool
	Verdict        string   // for a call of the dispatched response
	Added          []string // the tools an availability delta adds
}

type mark struct {
	Class      string // reveal, load-call, load-return, hides
	Tool       string // the tool's name
	Name       string // the tool or capability
	Kind       string // what revealed
	Text       string
	InWindow   bool
	InDispatch *bool
	Call       facts.Position // for a load
}

type toolRow struct {
	Index       int
	T           engine.ToolExplained
	Marks       []markLink
	WouldHide   bool
	HasDispatch bool
}

type markLink struct {
	Anchor, Text string
}

type callRow struct {
	C      engine.CallExplained
	ID     string
	HasID  bool
	Anchor string
	Args   string
	Remedy string
	// Asked: the message is the approver's (approval_required), not the
	// model's.
	Asked bool
}

func partAnchor(p facts.Position) string { return fmt.Sprintf("m%dp%d", p.Message, p.Part) }

func build(x *engine.Explanation, t *loader.Transcript) *page {
	d := x.Decision
	msgs := t.History
	p := &page{X: x, Messages: len(msgs), Framework: FrameworkTools(d.Available), Approvals: d.Approvals,
		WouldHide: d.WouldHide, Errors: d.Errors, Policies: x.Policies}
	p.Cons = &window{Name: "conservative", At: d.Window, Whole: len(x.Compactions) == 0 && d.Window == (facts.Position{}), Text: x.Window}
	if d.Dispatch != nil {
		p.Disp = &window{Name: "dispatch", At: d.Dispatch.Window, Text: x.Dispatch,
			Whole: d.Dispatch.Window == (facts.Position{}) && !slices.Contains(x.Compactions, facts.Position{})}
		if d.Dispatch.Provider != nil {
			p.Disp.Provider = *d.Dispatch.Provider
		}
	}
	// The parts, with the text the transcript keeps of each.
	var all [][]*part
	views := make([]*message, len(msgs))
	for i, m := range msgs {
		tm := t.Messages[i]
		mv := &message{Index: i, Kind: m.Kind.String(), Provider: tm.Provider, Model: tm.Model}
		mv.Dispatch = p.Disp != nil && i == len(msgs)-1
		for j, rp := range m.Parts {
			pos := facts.Position{Message: i, Part: j}
			pv := &part{Message: i, Index: j, Kind: rp.Kind.String(), Name: rp.ToolName, CallID: rp.ToolCallID,
				InCons: !pos.Before(p.Cons.At), HasDisp: p.Disp != nil}
			if p.Disp != nil {
				pv.InDisp = !pos.Before(p.Disp.At)
			}
			pv.Compaction = rp.Kind == facts.Compaction
			if rp.Kind == facts.ToolAvailabilityDelta {
				pv.Added = added(rp.Reveals)
			}
			var text []byte
			if j < len(tm.Texts) {
				text = tm.Texts[j]
			}
			pv.First, pv.Body, pv.More = content(text)
			if pos == p.Cons.At {
				pv.Boundaries = append(pv.Boundaries, p.Cons)
			}
			if p.Disp != nil && pos == p.Disp.At {
				pv.Boundaries = append(pv.Boundaries, p.Disp)
			}
			mv.Parts = append(mv.Parts, pv)
		}
		views[i] = mv
		all = append(all, mv.Parts)
	}
	at := func(pos facts.Position) *part {
		if pos.Message < 0 || pos.Message >= len(all) || pos.Part < 0 || pos.Part >= len(all[pos.Message]) {
			return nil
		}
		return all[pos.Message][pos.Part]
	}
	addTool := func(pv *part, i int) {
		if pv != nil && !slices.Contains(pv.Tools, i) {
			pv.Tools = append(pv.Tools, i)
		}
	}
	// Every availability delta, with the tools it adds.
	toolIndex := map[string]int{}
	for i, t := range x.Tools {
		toolIndex[t.Name] = i
	}
	for _, parts := range all {
		for _, pv := range parts {
			if pv.Kind != "tool-availability-delta" {
				continue
			}
			pv.Marks = append(pv.Marks, mark{Class: "delta", InWindow: pv.InCons, Text: "adds " + strings.Join(pv.Added, ", ")})
			for _, n := range pv.Added {
				if i, ok := toolIndex[n]; ok {
					addTool(pv, i)
				}
			}
		}
	}
	// The tools' evidence, marked where it sits.
	for i, t := range x.Tools {
		row := toolRow{Index: i, T: t, WouldHide: slices.Contains(d.WouldHide, t.Name), HasDispatch: t.DispatchAvailable != nil}
		p.ToolIdx = append(p.ToolIdx, i)
		hidden := false
		for _, r := range t.Reveals {
			mk := mark{Class: "reveal", Tool: t.Name, Name: t.Name, Kind: r.Kind, InWindow: r.InWindow, InDispatch: r.InDispatchWindow,
				Text: "reveals " + t.Name + " (" + r.Kind + ")"}
			if pv := at(r.At); pv != nil {
				pv.Marks = append(pv.Marks, mk)
				addTool(pv, i)
			}
			row.Marks = append(row.Marks, markLink{partAnchor(r.At), fmt.Sprintf("revealed at message %d, part %d%s", r.At.Message, r.At.Part, outside(r.InWindow))})
			hidden = hidden || !r.InWindow
		}
		for _, l := range t.Loads {
			if pv := at(l.Call); pv != nil {
				pv.Marks = append(pv.Marks, mark{Class: "load-call", Tool: t.Name, Name: l.Capability, InWindow: l.InWindow, InDispatch: l.InDispatchWindow,
					Call: l.Call, Text: "loads " + l.Capability + " (owner of " + t.Name + ")"})
				addTool(pv, i)
			}
			if pv := at(l.Return); pv != nil {
				pv.Marks = append(pv.Marks, mark{Class: "load-return", Tool: t.Name, Name: l.Capability, InWindow: l.InWindow, InDispatch: l.InDispatchWindow,
					Call: l.Call, Text: fmt.Sprintf("answers the load of %s (call at message %d, part %d)", l.Capability, l.Call.Message, l.Call.Part)})
				addTool(pv, i)
			}
			row.Marks = append(row.Marks, markLink{partAnchor(l.Call), fmt.Sprintf("%s loaded at message %d, part %d%s", l.Capability, l.Call.Message, l.Call.Part, outside(l.InWindow))})
			hidden = hidden || !l.InWindow
		}
		if hidden {
			if pv := at(p.Cons.At); pv != nil && pv.Compaction {
				pv.Marks = append(pv.Marks, mark{Class: "hides", Tool: t.Name, Name: t.Name, InWindow: true, Text: "hides the earlier evidence of " + t.Name})
				addTool(pv, i)
				row.Marks = append(row.Marks, markLink{partAnchor(p.Cons.At), fmt.Sprintf("hidden by the compaction at message %d, part %d", p.Cons.At.Message, p.Cons.At.Part)})
			}
		}
		p.Tools = append(p.Tools, row)
	}
	// The near misses, marked where they sit.
	for _, nm := range x.NearMisses {
		if pv := at(nm.At); pv != nil {
			pv.Marks = append(pv.Marks, mark{Class: "near-miss", InWindow: true, Text: "near miss: not counted"})
		}
	}
	// The calls of the dispatched response.
	last := len(msgs) - 1
	for _, c := range x.Calls {
		cr := callRow{C: c, Anchor: partAnchor(facts.Position{Message: last, Part: c.Part}), Asked: c.Verdict == engine.ApprovalRequired}
		if c.ToolCallID != nil {
			cr.ID, cr.HasID = *c.ToolCallID, true
		}
		if c.Args != nil {
			b, _ := json.Marshal(c.Args)
			cr.Args = string(b)
		}
		cr.Remedy = remedy(c, x.Tools)
		if pv := at(facts.Position{Message: last, Part: c.Part}); pv != nil && last >= 0 {
			pv.Verdict = c.Verdict
			for i, t := range x.Tools {
				if t.Name == c.Tool {
					addTool(pv, i)
				}
			}
		}
		p.Calls = append(p.Calls, cr)
	}
	// Fold long runs of uneventful messages.
	eventful := func(m *message) bool {
		if m.Dispatch || m.Index == 0 {
			return true
		}
		for _, pv := range m.Parts {
			if len(pv.Marks) > 0 || len(pv.Boundaries) > 0 || pv.Compaction || pv.Kind == "tool-availability-delta" {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(views); {
		if eventful(views[i]) {
			p.Items = append(p.Items, item{Msg: views[i]})
			i++
			continue
		}
		j := i
		for j < len(views) && !eventful(views[j]) {
			j++
		}
		if j-i >= FoldAt {
			p.Items = append(p.Items, item{Fold: &fold{From: i, To: j - 1, N: j - i, Msgs: views[i:j]}})
			p.Folded += j - i
		} else {
			for _, m := range views[i:j] {
				p.Items = append(p.Items, item{Msg: m})
			}
		}
		i = j
	}
	return p
}

func outside(in bool) string {
	if in {
		return ""
	}
	return " (before the window: no longer counts)"
}

// remedy says what would have made a refused call callable.
func remedy(c engine.CallExplained, tools []engine.ToolExplained) string {
	switch c.Verdict {
	case engine.Execute:
		return ""
	case engine.UnknownTool:
		for _, t := range tools {
			if t.Name == c.Tool {
				return "the tool is in the registry but was removed for this request: the filter or rule named above would have to keep it"
			}
		}
		return "a tool of this name in the registry (the model called a name the registry does not have)"
	case engine.NotAvailableYet:
		for _, t := range tools {
			if t.Name != c.Tool {
				continue
			}
			if len(t.Loads) > 0 || strings.Contains(strings.Join(t.Why, " "), "owned by deferred capability") {
				return "a complete load of its capability (load_capability call and its return) in an earlier message, inside the window the serving provider sees"
			}
			return "a reveal of the tool (a search_tools return naming it, or a tool-availability delta) in an earlier message, inside the window the serving provider sees"
		}
		return "the tool's gate satisfied inside the window the serving provider sees"
	case engine.Denied:
		if c.FailClosed {
			return "a decision that does not fail closed (see the errors above)"
		}
		return "no deny rule holding for this call (the reasons above name the rule and its file)"
	case engine.InvalidArgs:
		return "arguments that validate against the tool's parameters_json_schema (the message above says what failed)"
	}
	return "an approver's approval of this call, passed back with its digest"
}

// FrameworkTools returns the framework tools (facts.LoadCapabilityTool,
// facts.SearchTool) among names, in their order.
func FrameworkTools(names []string) []string {
	var out []string
	for _, n := range names {
		if n == facts.LoadCapabilityTool || n == facts.SearchTool {
			out = append(out, n)
		}
	}
	return out
}

// added is the tools an availability delta adds (its tools_added, or its
// input alias added when tools_added is absent: the loader's
// facts.Part.Reveals).
func added(names []string) []string {
	if len(names) == 0 {
		return []string{"no tool"}
	}
	return names
}

// content returns a part's first line, its body (bounded) and how many
// bytes of the body were left out, from raw, the JSON of what the part
// says (loader.TranscriptMessage.Texts).
func content(raw []byte) (first, body string, more int) {
	if raw == nil {
		return "", "", 0
	}
	compact := ""
	if raw[0] == '"' {
		body = wire.Unescape(raw)
	} else {
		var c bytes.Buffer
		if json.Compact(&c, raw) == nil {
			compact = c.String()
		}
		var buf bytes.Buffer
		if json.Indent(&buf, raw, "", "  ") == nil {
			body = buf.String()
		} else {
			body = string(raw)
		}
	}
	first = strings.TrimSpace(body)
	if compact != "" {
		first = compact
	}
	if i := strings.IndexByte(first, '\n'); i >= 0 {
		first = strings.TrimSpace(first[:i]) + " …"
	}
	first = truncate(first, maxFirst)
	if first == strings.TrimSpace(body) || (compact != "" && first == compact) {
		return first, "", 0 // the first line shows it all
	}
	if len(body) > maxBody {
		cut := truncate(body, maxBody)
		more = len(body) - len(cut)
		body = cut
	}
	return first, body, more
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Visible returns s with every character that would not show as itself
// written as a \u escape: C0 and C1 controls and DEL (tab and newline too
// unless keepLines), the line and paragraph separators, the
// bidirectional-formatting characters, and invalid UTF-8 (as \ufffd).
// The page is for reading: the exact strings are in explain --format
// json.
func Visible(s string, keepLines bool) string {
	clean := true
	for _, r := range s {
		if needsEscape(r, keepLines) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !validAt(s, i):
			b.WriteString(`\ufffd`)
		case needsEscape(r, keepLines):
			b.WriteString(`\u`)
			h := strconv.FormatInt(int64(r), 16)
			b.WriteString(strings.Repeat("0", max(0, 4-len(h))))
			b.WriteString(h)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func validAt(s string, i int) bool {
	r, n := utf8.DecodeRuneInString(s[i:])
	return !(r == utf8.RuneError && n <= 1)
}

func needsEscape(r rune, keepLines bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return !keepLines
	case r < 0x20, r >= 0x7f && r < 0xa0:
		return true
	case r == 0x2028, r == 0x2029, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == utf8.RuneError:
		return true
	}
	return false
}
