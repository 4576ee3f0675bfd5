package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/ground/regoutil"
)

// Explanation says, for a person, why each tool is or is not available
// and why each call got its verdict, pointing at the history.
type Explanation struct {
	Decision *Decision         `json:"decision"`
	Window   string            `json:"window"`
	Dispatch string            `json:"dispatch,omitempty"`
	Tools    []ToolExplained   `json:"tools"`
	Calls    []CallExplained   `json:"calls"`
	Policies []PolicyExplained `json:"policies"`
	// Compactions are the history's compaction parts, in order: the
	// boundaries a window can start at.
	Compactions []facts.Position `json:"compactions"`
	// NearMisses are the parts that look like a search return or a load
	// but reveal or load nothing (a framework tool's name without the
	// tool_kind that types it, a typed load that pairs with nothing), in
	// history order: why a tool can be "never revealed" after all.
	NearMisses []nearMiss `json:"near_misses"`
}

// nearMiss is one part that looks like a search or a load but does not
// count.
type nearMiss struct {
	At facts.Position `json:"at"`
	// Why says so in words: "message 2, part 0 is a `search_tools`
	// return without `tool_kind: tool-search`: not counted".
	Why string `json:"why"`
}

// ToolExplained is one tool's status and the reasons for it.
type ToolExplained struct {
	Name              string   `json:"name"`
	Available         bool     `json:"available"`
	Advertised        bool     `json:"advertised"`
	DispatchAvailable *bool    `json:"dispatch_available,omitempty"`
	Why               []string `json:"why"`
	// Reveals are the parts that revealed a search-gated tool, and Loads
	// the load pairs of a capability-gated tool's owner, in history order
	// (absent for the other gates): where the evidence of Why sits.
	Reveals []revealAt `json:"reveals,omitempty"`
	Loads   []loadAt   `json:"loads,omitempty"`
}

// revealAt is one part that revealed a tool.
type revealAt struct {
	At facts.Position `json:"at"`
	// Kind says what revealed it: "search return", "provider-side search
	// return", "legacy search metadata" or "tool-availability delta".
	Kind string `json:"kind"`
	// InWindow: the part lies inside the conservative window.
	InWindow bool `json:"in_window"`
	// InDispatchWindow: the part lies inside the window the dispatched
	// response's provider saw (absent without a dispatch).
	InDispatchWindow *bool `json:"in_dispatch_window,omitempty"`
}

// loadAt is one complete load pair of a capability: its call and the
// return that answered it.
type loadAt struct {
	Capability       string         `json:"capability"`
	Call             facts.Position `json:"call"`
	Return           facts.Position `json:"return"`
	InWindow         bool           `json:"in_window"`
	InDispatchWindow *bool          `json:"in_dispatch_window,omitempty"`
}

// CallExplained is one call's verdict with its reasons.
type CallExplained struct {
	CallVerdict
	Why []string `json:"why"`
	// DecidedBy is the policy rule whose answer is the verdict, with where
	// it is defined (absent when the engine itself decided: a failed-closed
	// decision).
	DecidedBy *ruleLocation `json:"decided_by,omitempty"`
	// Deciders are the operator's rules, filters, schema or approval that
	// gave the verdict (CallVerdict.DecidedByOperator), which DecidedBy,
	// the shipped rule applying them, only carries out.
	Deciders []Decider `json:"deciders,omitempty"`
	// Flows, on a refused call (any verdict but execute) when the
	// policies read flows, are the call's argument values that came from
	// earlier tool returns (input.call.flows), each with its source: where
	// the value the refusal may be about was returned.
	Flows []flowExplained `json:"flows,omitempty"`
	// ArgsIntegrity, on a refused call whose arguments validated (not
	// invalid_args) when the policies read input.call.args_integrity and
	// the registry sets flow labels, is each argument value's integrity
	// ("trusted", "declassified" or "untrusted"; labels.go), as the
	// decision's input held it.
	ArgsIntegrity map[string]string `json:"args_integrity,omitempty"`
	// Window, on a refused call when the policies read
	// input.call.window and the registry sets flow labels, is what the model's window held before the
	// call: whether anything untrusted, the highest confidentiality, and
	// the tools whose untrusted returns it held, one per tool (how many,
	// the latest, and whether through a compaction summary).
	Window *windowExplained `json:"window,omitempty"`
}

// windowExplained is input.call.window, explained.
type windowExplained struct {
	Untrusted       bool           `json:"untrusted"`
	Confidentiality string         `json:"confidentiality"`
	Sources         []windowSource `json:"sources"`
}

// flowExplained is one flow of a call's argument from a tool return.
type flowExplained struct {
	// Path is the JSON pointer of the value in the call's arguments.
	Path string `json:"path"`
	// Match is "exact", "contains" or "token".
	Match string `json:"match"`
	// Token is the token's class when Match is "token".
	Token string `json:"token,omitempty"`
	// Whole, when Match is "token", is whether the whole value is the
	// token (input.call.flows[].whole; an exact match always is, a
	// contains match never).
	Whole  *bool      `json:"whole,omitempty"`
	Source flowSource `json:"source"`
}

// flowSource is the return part a flowing value came from.
type flowSource struct {
	// Kind is the source part's kind (tool-return, builtin-tool-return,
	// user-prompt, system-prompt).
	Kind       string         `json:"kind"`
	ToolCallID *string        `json:"tool_call_id"`
	Tool       string         `json:"tool"`
	Labels     []string       `json:"labels"`
	At         facts.Position `json:"at"`
	// Beside names the tools whose returns share a prompt part's request
	// (facts.FlowSource.Beside).
	Beside []string `json:"beside,omitempty"`
	// Integrity and Confidentiality are the source's label, when the
	// registry sets flow labels (docs/registry.md).
	Integrity       string `json:"integrity,omitempty"`
	Confidentiality string `json:"confidentiality,omitempty"`
}

// ruleLocation names a Rego rule and where it is defined.
type ruleLocation struct {
	Package string `json:"package"`
	Rule    string `json:"rule"`
	// Location is FILE:ROW:COL of the rule's first definition ("" when
	// the module does not define it).
	Location string `json:"location"`
}

// PolicyExplained names a policy module that took part.
type PolicyExplained struct {
	File    string `json:"file"`
	Package string `json:"package"`
	Role    string `json:"role"`
}

func pos(p facts.Position) string { return fmt.Sprintf("message %d, part %d", p.Message, p.Part) }

// Explain decides req and explains the decision. It reads provenance from
// req.History, which it therefore requires (Facts alone do not say where
// the evidence sits).
//
// opts are Decide's; with VerifiedEvidence the evidence not vouched for
// is left out of the provenance as it is of the facts.
func (e *Engine) Explain(ctx context.Context, req Request, opts ...DecideOption) (*Explanation, error) {
	s := e.snap.Load()
	if req.History == nil && req.Facts != nil {
		return nil, errors.New("engine: Explain needs Request.History: provenance is read from the history, not from facts")
	}
	dc := s.config(opts)
	d, p, err := s.decide(ctx, req, &dc)
	if err != nil {
		return nil, err
	}
	f := p.facts
	tr := facts.TraceHistory(p.traced)
	x := &Explanation{Decision: d, Compactions: tr.Compactions}
	if x.Compactions == nil {
		x.Compactions = []facts.Position{}
	}
	x.NearMisses = []nearMiss{}
	var searchMisses, loadMisses int
	for _, nm := range tr.NearMisses {
		x.NearMisses = append(x.NearMisses, nearMiss{At: nm.At, Why: fmt.Sprintf("%s is %s: not counted", pos(nm.At), nm.Why)})
		if nm.Load {
			loadMisses++
		} else {
			searchMisses++
		}
	}
	inDispatch := func(p facts.Position) *bool {
		if f.Dispatch == nil {
			return nil
		}
		v := !p.Before(f.Dispatch.Window)
		return &v
	}
	x.Window = "the whole history (no compaction part)"
	if len(tr.Compactions) > 0 || f.Window != (facts.Position{}) {
		x.Window = fmt.Sprintf("from the compaction part at %s: evidence before it no longer counts for the next request", pos(f.Window))
	}
	if fd := f.Dispatch; fd != nil {
		prov := "no provider_name, so the conservative window"
		if fd.Provider != nil {
			prov = fmt.Sprintf("served by %q: anchored window from %s", *fd.Provider, pos(fd.Window))
		}
		x.Dispatch = fmt.Sprintf("the last message (%d) is a response %s; %s",
			len(req.History)-1, prov, anchoredEvidence(fd.Evidence.Discovered, fd.Evidence.Loaded))
	}
	inWindow := func(p, w facts.Position) bool { return !p.Before(w) }
	for _, name := range s.reg.ToolNames() {
		t, _ := s.reg.Tool(name)
		gate, _ := s.reg.GateOf(name)
		te := ToolExplained{Name: name, Available: contains(d.Available, name), Advertised: contains(d.Advertised, name)}
		if d.Dispatch != nil {
			v := contains(d.Dispatch.Available, name)
			te.DispatchAvailable = &v
		}
		switch gate {
		case facts.GateNone:
			te.Why = append(te.Why, "always-on: not deferred and no deferred owner")
		case facts.GateSearch:
			te.Why = append(te.Why, "search-gated: callable once revealed in the window")
			for _, r := range tr.Reveals[name] {
				where := "inside the window"
				if !inWindow(r.At, f.Window) {
					where = "before the compaction boundary, so hidden again"
				}
				te.Why = append(te.Why, fmt.Sprintf("revealed by a %s at %s (%s)", r.Kind, pos(r.At), where))
				te.Reveals = append(te.Reveals, revealAt{At: r.At, Kind: r.Kind, InWindow: inWindow(r.At, f.Window), InDispatchWindow: inDispatch(r.At)})
			}
			if len(tr.Reveals[name]) == 0 {
				te.Why = append(te.Why, "never revealed in this history")
				if searchMisses > 0 {
					te.Why = append(te.Why, nearMisses(searchMisses, "search"))
				}
			}
		case facts.GateCapability:
			te.Why = append(te.Why, fmt.Sprintf("owned by deferred capability %q: callable once it is loaded (the load is the reveal)", t.Capability))
			for _, l := range tr.Loads[t.Capability] {
				where := "inside the window"
				if !inWindow(l.Call, f.Window) {
					where = "split by or before the compaction boundary, so it no longer counts"
				}
				te.Why = append(te.Why, fmt.Sprintf("loaded by the call at %s answered at %s (%s)", pos(l.Call), pos(l.Return), where))
				te.Loads = append(te.Loads, loadAt{Capability: t.Capability, Call: l.Call, Return: l.Return,
					InWindow: inWindow(l.Call, f.Window), InDispatchWindow: inDispatch(l.Call)})
			}
			if len(tr.Loads[t.Capability]) == 0 {
				te.Why = append(te.Why, fmt.Sprintf("capability %q is never loaded in this history", t.Capability))
				if loadMisses > 0 {
					te.Why = append(te.Why, nearMisses(loadMisses, "load"))
				}
			}
		}
		te.Why = append(te.Why, d.Removed(name)...)
		x.Tools = append(x.Tools, te)
	}
	entry := s.moduleName(s.fileOf("data.policycheck.availability"))
	gateFile := s.moduleName(s.fileOf("data.policycheck.lib.gate"))
	for i, c := range d.Calls {
		ce := CallExplained{CallVerdict: c, Deciders: c.DecidedByOperator()}
		ce.Why = append(ce.Why, c.Reasons...)
		switch {
		case c.FailClosed:
			ce.Why = append(ce.Why, "decided by the engine: the decision failed closed")
		case c.Rule == rulePolicyError:
			ce.Why = append(ce.Why, "decided by the engine: a rule about this call raised an error, so this call fails closed and the others are decided as usual")
		case c.Verdict == InvalidArgs && at(d.argsProblems, i) != nil && at(d.argsProblems, i).unreadable:
			ce.Why = append(ce.Why, "decided by the engine, which reads every call's arguments once, strictly, after the availability gate and before any operator rule, and refuses arguments it cannot read exactly one way")
		case c.Verdict == InvalidArgs:
			ce.Why = append(ce.Why, "decided by the engine, which validates every call's arguments against its tool's parameters_json_schema after the availability gate and before any operator rule")
		case c.Rule == "deny":
			ce.Why = append(ce.Why, fmt.Sprintf("decided by the deny rules above, applied by %s (%s)", "policycheck.availability.decision", entry))
		case c.Rule == ruleRequireApproval && slices.ContainsFunc(c.Reasons, isRegistryApproval):
			ce.Why = append(ce.Why, fmt.Sprintf("decided by the registry's requires_approval (and any require_approval rules above), applied by %s (%s): pass the approver's answer back with the digest %s", "policycheck.lib.gate.registry_approvals", gateFile, c.Digest))
		case c.Rule == ruleRequireApproval:
			ce.Why = append(ce.Why, fmt.Sprintf("decided by the require_approval rules above, applied by %s (%s): pass the approver's answer back with the digest %s", "policycheck.availability.decision", entry, c.Digest))
		case c.Rule != "" && gateFile != "":
			ce.Why = append(ce.Why, fmt.Sprintf("decided by rule %q of policycheck.lib.gate.verdict (%s), through policycheck.availability.decision (%s)", c.Rule, gateFile, entry))
		case c.Rule != "":
			ce.Why = append(ce.Why, fmt.Sprintf("decided by rule %q of policycheck.availability.decision (%s)", c.Rule, entry))
		}
		if !c.FailClosed && c.Rule != "" {
			ce.DecidedBy = s.ruleRef("data.policycheck.availability", "decision")
			if gateFile != "" && c.Rule != "deny" && c.Rule != ruleRequireApproval {
				ce.DecidedBy = s.ruleRef("data.policycheck.lib.gate", "verdict")
			}
			if gateFile != "" && c.Rule == ruleRequireApproval && !slices.ContainsFunc(c.Reasons, isRuleApproval) {
				// Only the registry asks: its requires_approval decided.
				ce.DecidedBy = s.ruleRef("data.policycheck.lib.gate", "registry_approvals")
			}
		}
		if c.Verdict == Execute {
			ce.Why = append(ce.Why, fmt.Sprintf("%q is in the dispatch-available set", c.Tool))
		} else {
			ce.Flows = explainFlows(s.reg, d.FactsUsed(), c.Part)
			for _, fl := range ce.Flows {
				ce.Why = append(ce.Why, flowWhy(fl))
			}
			s.explainLabels(&ce, d, c.Part)
		}
		x.Calls = append(x.Calls, ce)
	}
	for _, file := range s.modules {
		m := s.compiler.Modules[file]
		if m == nil {
			continue
		}
		role := "library"
		switch {
		case regoutil.CapabilityOf(m.Package.Path) != "":
			role = "capability filter (prepare_tools)"
		case m.Package.Path.String() == "data.policycheck.availability":
			role = "decision entrypoint"
		case len(m.Package.Path) > 2 && m.Package.Path[:3].String() == "data.policycheck.rules":
			role = "operator rules (hide, deny, require_approval)"
		}
		x.Policies = append(x.Policies, PolicyExplained{File: file, Package: m.Package.Path.String(), Role: role})
	}
	sort.Slice(x.Policies, func(i, j int) bool { return x.Policies[i].File < x.Policies[j].File })
	return x, nil
}

// nearMisses points a tool's story at the near misses of its kind.
func nearMisses(n int, kind string) string {
	if n == 1 {
		return fmt.Sprintf("1 part looks like a %s but does not count: see the near misses", kind)
	}
	return fmt.Sprintf("%d parts look like a %s but do not count: see the near misses", n, kind)
}

// explainFlows returns the flows of the dispatched call at part, when
// the facts carry them.
func explainFlows(reg *facts.Registry, f *facts.Facts, part int) []flowExplained {
	if f == nil || f.Dispatch == nil {
		return nil
	}
	for _, c := range f.Dispatch.Calls {
		if c.Part != part {
			continue
		}
		var out []flowExplained
		for _, fl := range c.Flows {
			src := flowSource{Kind: fl.Source.Kind.String(), ToolCallID: fl.Source.ToolCallID, Tool: fl.Source.Tool, Labels: fl.Source.Labels, At: fl.Source.At, Beside: fl.Source.Beside}
			if reg.UsesFlowLabels() {
				l := sourceLabel(reg, &fl.Source)
				src.Integrity, src.Confidentiality = l.Integrity, l.Confidentiality
			}
			fe := flowExplained{Path: fl.Path, Match: fl.Match.String(), Token: fl.Token.String(), Source: src}
			if fl.Match == facts.FlowToken {
				fe.Whole = &fl.Whole
			}
			out = append(out, fe)
		}
		return out
	}
	return nil
}

// flowWhy says where a flowing value came from, in words.
func flowWhy(fl flowExplained) string {
	arg := "argument " + strconv.Quote(fl.Path)
	if fl.Path == "" {
		arg = "the arguments"
	}
	how := "holds a value"
	switch fl.Match {
	case facts.FlowContains.String():
		how = "contains a string"
	case facts.FlowToken.String():
		how = "holds a token (" + fl.Token + ") of a string"
		if fl.Whole != nil && *fl.Whole {
			how = "is, as a whole, a token (" + fl.Token + ") of a string"
		}
	}
	switch fl.Source.Kind {
	case facts.UserPrompt.String(), facts.SystemPrompt.String():
		if len(fl.Source.Beside) > 0 {
			// It may hold what those tools returned, and carries
			// their labels.
			labels := ""
			if fl.Source.Integrity != "" {
				labels = " (" + fl.Source.Integrity + ", " + fl.Source.Confidentiality + ")"
			}
			return fmt.Sprintf("%s %s of the %s beside the returns of %s%s at %s", arg, how, fl.Source.Kind,
				quoteList(fl.Source.Beside), labels, pos(fl.Source.At))
		}
		return fmt.Sprintf("%s %s of the %s at %s", arg, how, fl.Source.Kind, pos(fl.Source.At))
	}
	id := "no tool_call_id"
	if fl.Source.ToolCallID != nil {
		id = "tool_call_id " + strconv.Quote(*fl.Source.ToolCallID)
	}
	labels := "no labels"
	if len(fl.Source.Labels) > 0 {
		labels = "labels " + quoteList(fl.Source.Labels)
	}
	if fl.Source.Integrity != "" {
		labels += ", " + fl.Source.Integrity + ", " + fl.Source.Confidentiality
	}
	by := "returned by"
	if fl.Source.Kind == facts.RetryPrompt.String() {
		by = "of the retry prompt of"
	}
	return fmt.Sprintf("%s %s %s %q (%s, %s) at %s", arg, how, by, fl.Source.Tool, id, labels, pos(fl.Source.At))
}

// explainLabels adds to a refused call what the policies read of its
// labels: each argument's integrity (as the decision's input held it)
// and the window's, in words too. Only for a registry that sets flow
// labels: without any, every tool has the defaults and the labels say
// nothing about the refusal.
func (s *snapshot) explainLabels(ce *CallExplained, d *Decision, part int) {
	f := d.FactsUsed()
	if f == nil || f.Dispatch == nil || !s.reg.UsesFlowLabels() {
		return
	}
	i := slices.IndexFunc(f.Dispatch.Calls, func(c facts.Call) bool { return c.Part == part })
	if i < 0 {
		return
	}
	// A call whose arguments did not validate has no args_integrity in
	// its input: no rule judged them.
	if logged := d.argsIntegrityRead(i); logged != nil {
		// The pointers in the order of the arguments, the levels as the
		// rules read them.
		paths := argsIntegrityOf(s.reg, &f.Dispatch.Calls[i], facts.ArgsValue(f.Dispatch.Calls[i].Args), nil)
		if len(paths) > 0 {
			ce.ArgsIntegrity = map[string]string{}
		}
		for _, a := range paths {
			level, ok := logged[a.Path]
			if !ok {
				continue
			}
			a.Level = level
			ce.ArgsIntegrity[a.Path] = a.Level
			arg := "argument " + strconv.Quote(a.Path)
			if a.Path == "" {
				arg = "the arguments"
			}
			ce.Why = append(ce.Why, fmt.Sprintf("%s is %s", arg, a.Level))
		}
	}
	if s.labels.window {
		w := windowOf(s.reg, f)
		ce.Window = &windowExplained{Untrusted: w.Label.Integrity == facts.IntegrityUntrusted, Confidentiality: w.Label.Confidentiality,
			Sources: w.Sources}
		if ce.Window.Sources == nil {
			ce.Window.Sources = []windowSource{}
		}
		if !ce.Window.Untrusted {
			ce.Why = append(ce.Why, "the window the model saw before the call held nothing untrusted (highest confidentiality "+
				w.Label.Confidentiality+")")
			return
		}
		var srcs []string
		for _, src := range w.Sources {
			at := pos(facts.Position{Message: src.Message, Part: src.Part})
			switch {
			case src.Count > 1 && src.Summarised:
				srcs = append(srcs, fmt.Sprintf("%q's %d returns (latest call at %s, some through a compaction summary)", src.Tool, src.Count, at))
			case src.Count > 1:
				srcs = append(srcs, fmt.Sprintf("%q's %d returns (latest call at %s)", src.Tool, src.Count, at))
			case src.Summarised:
				srcs = append(srcs, fmt.Sprintf("%q's return (call at %s, through a compaction summary)", src.Tool, at))
			default:
				srcs = append(srcs, fmt.Sprintf("%q's return (call at %s)", src.Tool, at))
			}
		}
		ce.Why = append(ce.Why, fmt.Sprintf("the window the model saw before the call held untrusted content (highest confidentiality %s): %s",
			w.Label.Confidentiality, strings.Join(srcs, "; ")))
	}
}

// anchoredEvidence says what the serving provider still sees beyond the
// conservative window, in words.
func anchoredEvidence(discovered, loaded []string) string {
	if len(discovered) == 0 && len(loaded) == 0 {
		return "it sees no reveal or load beyond the conservative window"
	}
	var seen []string
	if len(discovered) > 0 {
		seen = append(seen, "tools revealed "+quoteList(discovered))
	}
	if len(loaded) > 0 {
		seen = append(seen, "capabilities loaded "+quoteList(loaded))
	}
	return "beyond the conservative window, that provider still sees " + strings.Join(seen, " and ")
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// ruleRef locates rule name of the module defining package path.
func (s *snapshot) ruleRef(path, name string) *ruleLocation {
	ref := &ruleLocation{Package: strings.TrimPrefix(path, "data."), Rule: name}
	file := s.fileOf(path)
	m := s.compiler.Modules[file]
	if m == nil {
		return ref
	}
	ref.Location = file
	for _, r := range m.Rules {
		if r.Head.Name.String() == name && r.Location != nil {
			ref.Location = fmt.Sprintf("%s:%d:%d", file, r.Location.Row, r.Location.Col)
			break
		}
	}
	return ref
}

// moduleName is how an explanation names a module file: a module of the
// shipped defaults as "shipped FILE", which no file of the operator's
// (their own policies/ directory, say) is called.
func (s *snapshot) moduleName(file string) string {
	if s.shipped[file] {
		return "shipped " + file
	}
	return file
}

// fileOf returns the file of the module defining package path, or "".
func (s *snapshot) fileOf(path string) string {
	for _, file := range s.modules {
		if m := s.compiler.Modules[file]; m != nil && m.Package.Path.String() == path {
			return file
		}
	}
	return ""
}

// isRegistryApproval reports whether a call's reason is an approval the
// registry asks for.
func isRegistryApproval(reason string) bool { return strings.HasPrefix(reason, registryApprovalPrefix) }

// isRuleApproval reports whether a call's reason is an approval an
// operator's require_approval rule asks for.
func isRuleApproval(reason string) bool {
	return strings.HasPrefix(reason, "approval required by policycheck.rules.")
}
