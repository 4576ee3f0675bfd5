package engine

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/facts"
)

// Labels (issue 47 items 3 and 4, docs/registry.md "Integrity and
// confidentiality", docs/input.md): a flow source's integrity and
// confidentiality, what the model's window held before a dispatched call
// (input.call.window), and whether each argument value is trusted,
// declassified or untrusted (input.call.args_integrity). The engine
// builds the last two only for a policy set that may read them.

// The argument integrity levels (input.call.args_integrity).
const (
	argTrusted      = "trusted"
	argDeclassified = "declassified"
	argUntrusted    = "untrusted"
)

// unpairedReturn is the window source kind of a return that answers no
// call (facts.UnpairedReturn).
const unpairedReturn = "unpaired-return"

// windowPaths and argsIntegrityPaths are the inputs the engine builds on
// demand for labels.
var (
	windowPaths        = []inputPath{{"call", "window"}, {"dispatch", "calls", "*", "window"}}
	argsIntegrityPaths = []inputPath{{"call", "args_integrity"}, {"dispatch", "calls", "*", "args_integrity"}}
)

// labelReads says which label fields of the calls the policies may read.
type labelReads struct {
	window, argsIntegrity bool
}

// labelOptions is what the compiled policies may read of the labels; it
// widens opts to the facts those are built from (the window from the
// returns per tool, the argument integrity from the flows, which say
// whether a return echoes what the agent sent, facts.Flow.EchoOfTheAgent).
// Neither needs the tool calls themselves, and input.facts.tool_calls,
// every call of the history with its arguments, is written only for a
// policy that may read it (facts.Options.ToolCalls; the lead's decision, issue
// 47 item 7: with it in every input, the stock library cost a
// 1,000-message step 27 times the CPU of flows off). A replay of a
// logged input without it reads the window and args_integrity back as
// logged (FactsFromInput).
func labelOptions(c *ast.Compiler, opts *facts.Options) labelReads {
	var lr labelReads
	for _, p := range windowPaths {
		lr.window = lr.window || mayRead(c, p)
	}
	for _, p := range argsIntegrityPaths {
		lr.argsIntegrity = lr.argsIntegrity || mayRead(c, p)
	}
	opts.ReturnsByTool = opts.ReturnsByTool || lr.window
	opts.Flows = opts.Flows || lr.argsIntegrity
	return lr
}

// sourceLabel is the label of a flow's source: a user or system prompt
// part is the user's or the operator's own words, trusted and internal;
// a return has its tool's returns' label (facts.Registry.ReturnLabel); a
// retry prompt its tool's confidentiality, and is never trusted (it
// quotes what the model sent: a validation error its arguments).
func sourceLabel(reg *facts.Registry, src *facts.FlowSource) facts.Label {
	if src.Kind == facts.RetryPrompt {
		return facts.Label{Integrity: facts.IntegrityUntrusted, Confidentiality: reg.ReturnLabel(src.Tool).Confidentiality}
	}
	if src.Kind == facts.UserPrompt || src.Kind == facts.SystemPrompt {
		l := facts.Label{Integrity: facts.IntegrityTrusted, Confidentiality: facts.DefaultConfidentiality}
		// A prompt part beside tool returns may hold what those tools
		// returned (pydantic-ai puts a tool's extra content and files
		// there): it carries their labels too.
		for _, t := range src.Beside {
			l = l.Join(reg.ReturnLabel(t))
		}
		return l
	}
	return reg.ReturnLabel(src.Tool)
}

// windowSource is one tool whose returns the model saw before the
// dispatched response, in its window or through a compaction summary
// written after them: the latest of them, and how many there were. One
// per tool, not per call (the lead's decision, issue 47 item 7): the
// window of a long session stays as small as its tools, and a rule
// asking whether the window held a tool's return keeps working; which
// exact calls it was is summarised by count.
type windowSource struct {
	// Kind is the returns' part kind: a tool-return, or a
	// builtin-tool-return (a provider-side tool's); unpairedReturn for
	// the tool's returns that answer no call.
	Kind string `json:"kind"`
	Tool string `json:"tool"`
	// Count is the number of the tool's returns the model saw.
	Count      int     `json:"count"`
	ToolCallID *string `json:"tool_call_id"`
	// Message and Part locate the call the latest return answered; for a
	// provider-side (builtin) return or one that answers no call, that
	// return itself.
	Message int `json:"message"`
	Part    int `json:"part"`
	// Summarised: some of those returns (the earliest call at least)
	// lie before the window's start, so the model saw them through a
	// compaction summary, which carries their label.
	Summarised      bool   `json:"summarised"`
	Integrity       string `json:"integrity"`
	Confidentiality string `json:"confidentiality"`
}

// sameBut reports whether s and o are equal but for their ToolCallID
// pointers.
func (s windowSource) sameBut(o windowSource) bool {
	s.ToolCallID, o.ToolCallID = nil, nil
	return s == o
}

// callWindow is what the model saw before the dispatched response: the
// join of the labels of every return it was shown (directly, or through
// a compaction summary), and the tools whose returns are untrusted.
type callWindow struct {
	Label   facts.Label
	Sources []windowSource // the untrusted tools, in history order of their latest return
}

// windowOf is the window of the dispatched response, from the returns
// the model was shown per tool (facts.Facts.ReturnsByTool): every tool
// call of the history with an outcome (its return, or the retry prompt
// that answered it, was shown to the model) counts with its tool's
// label. A compaction hides nothing: a summary written after an
// untrusted or confidential return carries that label (taint survives
// compaction), and the tool is listed as summarised. Provider-side
// (builtin) tool returns count too, with the label of their tool's name
// (untrusted unless the registry labels it), those inside the
// dispatched response included wherever they stand in it: the
// provider's own web search or fetch is content the model was shown.
// So does a return that answers no call (its call cut from the history,
// its id rewritten), with the label of the tool it names, listed as an
// unpaired-return located at the return itself. A window read back from an input document (FactsFromInput) keeps the
// labels it recorded. It costs the tools, not the calls.
func windowOf(reg *facts.Registry, f *facts.Facts) callWindow {
	w := callWindow{Label: facts.Bottom, Sources: make([]windowSource, 0, len(f.ReturnsByTool))}
	start := f.Window
	if f.Dispatch != nil {
		start = f.Dispatch.Window
	}
	for i := range f.ReturnsByTool {
		r := &f.ReturnsByTool[i]
		l := reg.ReturnLabel(r.Tool)
		if r.Label != nil {
			l = *r.Label
		}
		w.Label = w.Label.Join(l)
		if l.Integrity == facts.IntegrityUntrusted {
			kind := r.Kind.String()
			if r.Unpaired {
				kind = unpairedReturn
			}
			w.Sources = append(w.Sources, windowSource{Kind: kind, Tool: r.Tool, Count: r.Count, ToolCallID: r.ToolCallID,
				Message: r.Message, Part: r.Part, Summarised: r.First.Before(start), Integrity: l.Integrity, Confidentiality: l.Confidentiality})
		}
	}
	if f.ReturnsLabel != nil {
		w.Label = *f.ReturnsLabel
	}
	return w
}

// sourceTerms keeps the terms of a Run's window sources from one step to
// the next: a step changes the sources of the tools whose returns it
// added, and the others' terms (most of them in a long session with many
// tools) are the previous step's. Each term is a function of its source
// alone; the map holds one per tool. Not safe for concurrent use (nor is
// a Run).
type sourceTerms map[windowSourceKey]sourceTerm

type windowSourceKey struct{ kind, tool string }

type sourceTerm struct {
	src  windowSource
	id   string // *src.ToolCallID, which src shares with the facts
	term *ast.Term
}

// term is input.call.window; cache, when not nil, holds and keeps the
// terms of the sources (a Run's).
func (w *callWindow) term(cache sourceTerms) *ast.Term {
	srcs := make([]*ast.Term, len(w.Sources))
	for i, s := range w.Sources {
		key := windowSourceKey{s.Kind, s.Tool}
		id := ""
		if s.ToolCallID != nil {
			id = *s.ToolCallID
		}
		if c, ok := cache[key]; ok && c.id == id && (c.src.ToolCallID == nil) == (s.ToolCallID == nil) && c.src.sameBut(s) {
			srcs[i] = c.term
			continue
		}
		srcs[i] = ast.ObjectTerm(
			item("kind", ast.StringTerm(s.Kind)),
			item("tool", ast.StringTerm(s.Tool)),
			item("count", ast.IntNumberTerm(s.Count)),
			item("tool_call_id", nullableString(s.ToolCallID)),
			item("message", ast.IntNumberTerm(s.Message)),
			item("part", ast.IntNumberTerm(s.Part)),
			item("summarised", ast.BooleanTerm(s.Summarised)),
			item("integrity", ast.StringTerm(s.Integrity)),
			item("confidentiality", ast.StringTerm(s.Confidentiality)),
		)
		if cache != nil {
			cache[key] = sourceTerm{src: s, id: id, term: srcs[i]}
		}
	}
	return ast.ObjectTerm(
		item("untrusted", ast.BooleanTerm(w.Label.Integrity == facts.IntegrityUntrusted)),
		item("confidentiality", ast.StringTerm(w.Label.Confidentiality)),
		item("sources", ast.ArrayTerm(srcs...)),
	)
}

// argIntegrity is one argument value's integrity.
type argIntegrity struct {
	Path  string
	Level string
}

// argsIntegrityOf is the integrity of each leaf of a call's own
// arguments args, as facts.ReadArgs read c.Args (string, number,
// boolean, null; in the order of the
// arguments, object keys sorted): "trusted" when it equals a string or
// number of a trusted source (a flow "exact" from it: what the user, the
// system prompt or a trusted tool wrote, wherever else it also
// appears), else "declassified" when the tool's schema constrains it to
// few values (facts.Schema.Declassifies) or it is a boolean or null
// (one bit), else "untrusted": from an untrusted source, contained in a
// longer string, or from nowhere the flows see (the model wrote it).
//
// An object key is text too: one the tool's schema does not name in
// "properties" (facts.Schema.Names: a dict's key, a free object's, any
// key of a tool without a schema) is the model's choice, so every leaf
// under it is "untrusted" whatever its value, and an empty object or
// array under it is listed, "untrusted", as a leaf: else an injected
// IBAN written as the key of a boolean, or of {}, would be no untrusted
// value at all. An array's element at a pointer the schema names as an
// object's property (a property "0") is untrusted too: "properties" does
// not apply to an array, and would declassify it by a schema that does
// not constrain it.
//
// A trusted tool's return vouches only for what the agent did not send
// it: a value the return holds that the arguments of a call before it
// hold too (a lookup answering with the IBAN it was asked about, a
// search echoing its query, a note the model wrote and a trusted tool
// reads back) is the model's (echoedByTheAgent), and so is every value
// of a return whose call calls does not show.
func argsIntegrityOf(reg *facts.Registry, c *facts.Call, args any, sent *facts.SentValues) []argIntegrity {
	if c.ArgsIntegrity != nil {
		// Read back from a logged input without the calls: as logged.
		out := make([]argIntegrity, 0, len(c.ArgsIntegrity))
		for p, l := range c.ArgsIntegrity {
			out = append(out, argIntegrity{p, l})
		}
		slices.SortFunc(out, func(a, b argIntegrity) int { return strings.Compare(a.Path, b.Path) })
		return out
	}
	sch := reg.ArgsSchema(c.Tool)
	var out []argIntegrity
	var walk func(v any, ptr string, chosen bool)
	walk = func(v any, ptr string, chosen bool) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 && chosen {
				out = append(out, argIntegrity{ptr, argUntrusted})
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := ptr + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
				walk(x[k], p, chosen || sch == nil || !sch.Names(p))
			}
			return
		case []any:
			if len(x) == 0 && chosen {
				out = append(out, argIntegrity{ptr, argUntrusted})
			}
			for i, e := range x {
				// An element at a pointer the schema names as a property
				// (of an object: "properties" does not apply to an
				// array) is constrained by nothing read there.
				p := ptr + "/" + strconv.Itoa(i)
				walk(e, p, chosen || sch != nil && sch.Names(p))
			}
			return
		}
		level := argUntrusted
		switch {
		case chosen:
		case trustedFlow(reg, c.Flows, ptr, v, sent):
			level = argTrusted
		case sch != nil && sch.Declassifies(ptr):
			level = argDeclassified
		case isBoolOrNull(v):
			level = argDeclassified
		}
		out = append(out, argIntegrity{ptr, level})
	}
	if args != nil {
		walk(args, "", false)
	}
	return out
}

// trustedFlow reports whether the value v at ptr equals a string or
// number of a trusted source, or is as a whole an identifier of one (a
// whole token flow of an identifier class), that the source's own call
// did not send (echoedByTheAgent). A whole line, pair value or run does
// not count: those classes are free text, and text a trusted source
// holds may quote what an untrusted one wrote (docs/flows.md).
func trustedFlow(reg *facts.Registry, flows []facts.Flow, ptr string, v any, sent *facts.SentValues) bool {
	return slices.ContainsFunc(flows, func(fl facts.Flow) bool {
		if fl.Path != ptr || !fl.Trusting() || sourceLabel(reg, &fl.Source).Integrity != facts.IntegrityTrusted {
			return false
		}
		// Derived flows say whether their return echoes its call; flows
		// read back from a logged input with the calls are judged by them.
		echo := fl.EchoOfTheAgent
		if sent != nil {
			echo = echoedByTheAgent(&fl.Source, v, sent)
		}
		return !echo
	})
}

// echoedByTheAgent reports whether a tool-return source may hold v only
// because the model sent it: a tool call before it, of any tool and any
// tool_call_id, has v in its arguments (facts.Echoes: a string of them
// holds it, letters and digits compared lower-cased, or a number of
// equal value: a lookup echoing what it was asked, a note the model
// wrote and a trusted tool reads back, a twin call with the return's
// id), or no call of its tool with its tool_call_id lies before it (an
// unpaired return, a return without an id: what it was sent is not
// known). A prompt part beside tool returns (it may hold what they
// returned) is judged as a return is, though it answers no call; other
// prompts, and a provider-side return, have no call of the agent's.
// The calls are looked up under the flows' comparison budgets
// (facts.SentValues): past them the value counts as sent.
func echoedByTheAgent(src *facts.FlowSource, v any, sent *facts.SentValues) bool {
	beside := (src.Kind == facts.UserPrompt || src.Kind == facts.SystemPrompt) && len(src.Beside) > 0
	if src.Kind != facts.ToolReturn && !beside {
		return false
	}
	if !beside && src.ToolCallID == nil {
		return true
	}
	if sent.SentBefore(v, src.At) {
		return true
	}
	return !beside && !sent.CalledBefore(src.Tool, *src.ToolCallID, src.At)
}

func isBoolOrNull(v any) bool {
	_, isBool := v.(bool)
	return isBool || v == nil
}

// argsIntegrityTerm is input.call.args_integrity: pointer -> level.
func argsIntegrityTerm(levels []argIntegrity) *ast.Term {
	obj := ast.NewObject()
	for _, a := range levels {
		obj.Insert(ast.StringTerm(a.Path), keyTerm(a.Level))
	}
	return ast.NewTerm(obj)
}

// labelInput is what buildInput needs to write the label fields.
type labelInput struct {
	reg   *facts.Registry
	reads labelReads
	// window keeps a Run's window source terms across its steps (nil
	// for a one-shot decision).
	window sourceTerms
}

// windowTerms is the Run's window source terms, nil for a decision of no
// Run.
func (dc *decideConfig) windowTerms() sourceTerms {
	if dc.run == nil {
		return nil
	}
	if dc.run.window == nil {
		dc.run.window = sourceTerms{}
	}
	return dc.run.window
}
