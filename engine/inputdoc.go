package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/contract"
	"github.com/policycheck/policycheck/loader"
)

// InputDocument returns the input document the decision query received,
// as JSON-compatible values (sets become sorted arrays): the same
// document Engine.Input returns for the request. The sidecar's decision
// log carries it, so that a logged decision can be decided again
// (FactsFromInput). Nil when the decision was not made by Decide.
func (d *Decision) InputDocument() (any, error) {
	if d.input == nil {
		return nil, nil
	}
	return ast.JSON(d.input)
}

// argsIntegrityRead is input.dispatch.calls[i].args_integrity of the
// decision's input, as the rules read it: pointer -> level; nil when the
// input holds none for the call (its arguments did not validate, or no
// rule reads it).
func (d *Decision) argsIntegrityRead(i int) map[string]string {
	if d.input == nil {
		return nil
	}
	v, err := d.input.Find(ast.Ref{ast.StringTerm("dispatch"), ast.StringTerm("calls"), ast.IntNumberTerm(i), ast.StringTerm("args_integrity")})
	obj, ok := v.(ast.Object)
	if err != nil || !ok {
		return nil
	}
	out := make(map[string]string, obj.Len())
	obj.Foreach(func(k, v *ast.Term) {
		ks, kok := k.Value.(ast.String)
		vs, vok := v.Value.(ast.String)
		if kok && vok {
			out[string(ks)] = string(vs)
		}
	})
	return out
}

// FactsFromInput rebuilds the facts, the context and the approvals of a
// decision from its input document (the JSON form Engine.Input and
// Decision.InputDocument return, decoded with encoding/json): the inverse
// of the input's construction, so that Decide on the result, with the
// approvals as Request.Approvals, evaluates an input document equal to
// doc's facts, calls and context, with the filters of the policy that
// decides it. The filter results in doc are not read: they belong to the
// policy that decided first. Nor are the labels (a call's window and
// args_integrity, a flow source's integrity and confidentiality): the
// engine writes them again from the facts and its registry; but a
// document without facts.tool_calls (written only for a policy that
// reads it) keeps its calls' window as it was logged
// (facts.Facts.ReturnsByTool and ReturnsLabel read back from it): the
// window's sources name one return per tool, not every call.
//
// The approvals are the ones bound to a call (its
// /dispatch/calls/N/approval, keyed by the call's tool_call_id); a call
// with an approval gets back its own arguments (approval.call_args), not
// the override_args it would execute with. An approval the request
// carried but that bound to no call is not in the input document and not
// returned. Approvals is nil when no call has one.
//
// Errors name the JSON pointer of the first field that is missing or of
// the wrong type.
func FactsFromInput(doc any) (*facts.Facts, any, facts.Approvals, error) {
	r := inputReader{}
	root := r.object(doc, "")
	f := &facts.Facts{}
	fo := r.object(r.field(root, "facts", ""), "/facts")
	readFields(&r, fo, "/facts", factsFields, f)
	if tc, ok := r.opt(fo, "tool_calls", "/facts"); ok {
		f.ToolCalls = r.toolCalls(tc, "/facts/tool_calls")
		// Written only when the history has provider-side returns, or
		// returns that answer no call: absent, there were none.
		f.BuiltinReturns = readList(&r, fo, "builtin_returns", builtinReturnFields)
		f.UnpairedReturns = readList(&r, fo, "unpaired_returns", unpairedReturnFields)
	} else if _, ok := r.opt(fo, "builtin_returns", "/facts"); ok {
		r.fail("/facts/builtin_returns", "absent without /facts/tool_calls")
	} else if _, ok := r.opt(fo, "unpaired_returns", "/facts"); ok {
		r.fail("/facts/unpaired_returns", "absent without /facts/tool_calls")
	}
	if tr, ok := r.opt(fo, "flow_index_truncated", "/facts"); ok {
		b, isBool := tr.(bool)
		if !isBool {
			r.fail("/facts/flow_index_truncated", "a boolean")
		}
		f.FlowIndexTruncated = b
	}
	readFields(&r, r.object(r.field(root, "outgoing", ""), "/outgoing"), "/outgoing", outgoingFields, &f.Outgoing)
	var ctxDoc any
	var approvals facts.Approvals
	if root != nil {
		ctxDoc, _ = r.opt(root, "context", "")
	}
	var window any // a call's window, and where
	windowAt := ""
	if raw, ok := r.opt(root, "dispatch", ""); ok && raw != nil {
		do := r.object(raw, "/dispatch")
		d := &facts.Dispatch{Calls: []facts.Call{}}
		readFields(&r, do, "/dispatch", dispatchFields, d)
		calls, ok := r.field(do, "calls", "/dispatch").([]any)
		if !ok && r.err == nil {
			r.fail("/dispatch/calls", "an array")
		}
		for i, c := range calls {
			ptr := fmt.Sprintf("/dispatch/calls/%d", i)
			co := r.object(c, ptr)
			var call facts.Call
			readFields(&r, co, ptr, callFields, &call)
			if co != nil {
				args, _ := r.opt(co, "args", ptr)
				call.Args = r.json(args, ptr+"/args")
			}
			if fv, ok := r.opt(co, "flows", ptr); ok {
				call.Flows = r.flows(fv, ptr+"/flows")
			}
			if av, ok := r.opt(co, "approval", ptr); ok {
				a, args := r.approval(av, ptr+"/approval")
				call.Args = args
				if call.ToolCallID == nil {
					r.fail(ptr+"/tool_call_id", "a string (the call carries an approval)")
				} else if prev, dup := approvals[*call.ToolCallID]; dup && !reflect.DeepEqual(prev, a) {
					r.fail(ptr+"/approval", fmt.Sprintf("the approval an earlier call with tool_call_id %q carries", *call.ToolCallID))
				} else if r.err == nil {
					if approvals == nil {
						approvals = facts.Approvals{}
					}
					approvals[*call.ToolCallID] = a
				}
			}
			if iv, ok := r.opt(co, "args_integrity", ptr); ok && f.ToolCalls == nil {
				// Without the calls, as logged (see window below).
				call.ArgsIntegrity = r.argsIntegrity(iv, ptr+"/args_integrity")
			}
			d.Calls = append(d.Calls, call)
			if wv, ok := r.opt(co, "window", ptr); ok {
				if window == nil {
					window, windowAt = wv, ptr
				} else if !reflect.DeepEqual(wv, window) {
					r.fail(ptr+"/window", "the window of "+windowAt+" (every call of a response has the same)")
				}
			}
		}
		f.Dispatch = d
		if window != nil && f.ToolCalls == nil {
			// Without the calls, the window as logged: the decision log
			// carries it, and not every call of the history.
			f.ReturnsByTool, f.ReturnsLabel = r.window(window, windowAt+"/window")
		}
	}
	if r.err != nil {
		return nil, nil, nil, r.err
	}
	return f, ctxDoc, approvals, nil
}

// readList reads the optional array /facts/key of objects of fields;
// empty, never nil, when absent.
func readList[T any](r *inputReader, fo map[string]any, key string, fields []docField[T]) []T {
	out := []T{}
	v, ok := r.opt(fo, key, "/facts")
	if !ok {
		return out
	}
	entries, isArr := v.([]any)
	if !isArr {
		r.fail("/facts/"+key, "an array")
	}
	for i, e := range entries {
		eptr := fmt.Sprintf("/facts/%s/%d", key, i)
		var x T
		readFields(r, r.object(e, eptr), eptr, fields, &x)
		out = append(out, x)
	}
	return out
}

// argsIntegrity reads a call's args_integrity back: pointer -> level.
func (r *inputReader) argsIntegrity(v any, ptr string) map[string]string {
	m := r.object(v, ptr)
	out := make(map[string]string, len(m))
	for k, lv := range m {
		switch lv {
		case argTrusted, argDeclassified, argUntrusted:
			out[k] = lv.(string)
		default:
			r.fail(ptr+"/"+loader.PointerToken(k), `"trusted", "declassified" or "untrusted"`)
		}
	}
	return out
}

// window reads a call's window (callWindow.term) back as the returns
// per tool it was built from, with the labels it recorded: a source's
// earliest return is read as the start of the history when it was
// summarised (before any window start), else as its latest.
func (r *inputReader) window(v any, ptr string) ([]facts.ToolReturns, *facts.Label) {
	m := r.object(v, ptr)
	label := r.label(m, ptr, false)
	if untrusted, ok := r.field(m, "untrusted", ptr).(bool); !ok && m != nil {
		r.fail(ptr+"/untrusted", "a boolean")
	} else if untrusted {
		label.Integrity = facts.IntegrityUntrusted
	}
	list, ok := r.field(m, "sources", ptr).([]any)
	if !ok && m != nil {
		r.fail(ptr+"/sources", "an array")
	}
	out := []facts.ToolReturns{}
	for i, e := range list {
		eptr := fmt.Sprintf("%s/sources/%d", ptr, i)
		so := r.object(e, eptr)
		tr := facts.ToolReturns{
			Tool:       r.string(r.field(so, "tool", eptr), eptr+"/tool"),
			Count:      r.int(r.field(so, "count", eptr), eptr+"/count"),
			ToolCallID: r.nullableString(r.field(so, "tool_call_id", eptr), eptr+"/tool_call_id"),
			Message:    r.int(r.field(so, "message", eptr), eptr+"/message"),
			Part:       r.int(r.field(so, "part", eptr), eptr+"/part"),
		}
		switch kind := r.field(so, "kind", eptr); kind {
		case facts.ToolReturn.String():
			tr.Kind = facts.ToolReturn
		case facts.BuiltinToolReturn.String():
			tr.Kind = facts.BuiltinToolReturn
		case unpairedReturn:
			tr.Kind, tr.Unpaired = facts.ToolReturn, true
		default:
			r.fail(eptr+"/kind", fmt.Sprintf("%q, %q or %q", facts.ToolReturn, facts.BuiltinToolReturn, unpairedReturn))
		}
		tr.First = facts.Position{Message: tr.Message, Part: tr.Part}
		if sum, ok := r.field(so, "summarised", eptr).(bool); !ok && so != nil {
			r.fail(eptr+"/summarised", "a boolean")
		} else if sum {
			tr.First = facts.Position{}
		}
		l := r.label(so, eptr, true)
		tr.Label = &l
		out = append(out, tr)
	}
	return out, &label
}

// label reads the integrity (when present) and the confidentiality of
// a window or of one of its sources; a window's integrity is its
// untrusted flag.
func (r *inputReader) label(m map[string]any, ptr string, withIntegrity bool) facts.Label {
	l := facts.Bottom
	if withIntegrity {
		switch v := r.field(m, "integrity", ptr); v {
		case facts.IntegrityTrusted, facts.IntegrityUntrusted:
			l.Integrity = v.(string)
		default:
			r.fail(ptr+"/integrity", fmt.Sprintf("%q or %q", facts.IntegrityTrusted, facts.IntegrityUntrusted))
		}
	}
	l.Confidentiality = r.string(r.field(m, "confidentiality", ptr), ptr+"/confidentiality")
	if facts.ConfidentialityRank(l.Confidentiality) < 0 {
		r.fail(ptr+"/confidentiality", "a confidentiality level ("+strings.Join(facts.ConfidentialityLevels, ", ")+")")
	}
	return l
}

// toolCalls reads facts.tool_calls back into history order.
func (r *inputReader) toolCalls(v any, ptr string) []facts.ToolCallRecord {
	m := r.object(v, ptr)
	out := []facts.ToolCallRecord{}
	for tool, list := range m {
		lptr := ptr + "/" + loader.PointerToken(tool)
		entries, ok := list.([]any)
		if !ok {
			r.fail(lptr, "an array")
			continue
		}
		for i, e := range entries {
			eptr := fmt.Sprintf("%s/%d", lptr, i)
			rec := facts.ToolCallRecord{Tool: tool}
			readFields(r, r.object(e, eptr), eptr, toolCallFields, &rec)
			out = append(out, rec)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Message != out[j].Message {
			return out[i].Message < out[j].Message
		}
		return out[i].Part < out[j].Part
	})
	return out
}

// flows reads a call's flows (flowsTerm's array).
func (r *inputReader) flows(v any, ptr string) []facts.Flow {
	list, ok := v.([]any)
	if !ok {
		r.fail(ptr, "an array")
		return nil
	}
	out := []facts.Flow{}
	for i, e := range list {
		eptr := fmt.Sprintf("%s/%d", ptr, i)
		var fl facts.Flow
		readFields(r, r.object(e, eptr), eptr, flowFields, &fl)
		out = append(out, fl)
	}
	return out
}

// approval reads a call's approval (approvalTerm's object): the approval
// and the call's own arguments, call_args.
func (r *inputReader) approval(v any, ptr string) (facts.Approval, json.RawMessage) {
	m := r.object(v, ptr)
	a := facts.Approval{
		Kind:   r.string(r.field(m, "kind", ptr), ptr+"/kind"),
		Digest: r.string(r.field(m, "digest", ptr), ptr+"/digest"),
	}
	if a.Kind != facts.ToolApproved && a.Kind != facts.ToolDenied && m != nil {
		r.fail(ptr+"/kind", fmt.Sprintf("%q or %q", facts.ToolApproved, facts.ToolDenied))
	}
	// The approvers keep the order the harness gave them in.
	list, ok := r.field(m, "approvers", ptr).([]any)
	if !ok && m != nil {
		r.fail(ptr+"/approvers", "an array of strings")
	}
	for i, e := range list {
		a.Approvers = append(a.Approvers, r.string(e, fmt.Sprintf("%s/approvers/%d", ptr, i)))
	}
	args := r.json(r.field(m, "call_args", ptr), ptr+"/call_args")
	if o, ok := r.opt(m, "override_args", ptr); ok {
		r.object(o, ptr+"/override_args")
		a.OverrideArgs = r.json(o, ptr+"/override_args")
	}
	if msg, ok := r.opt(m, "message", ptr); ok || a.Kind == facts.ToolDenied {
		a.Message = r.string(msg, ptr+"/message")
	}
	return a, args
}

// json re-encodes a JSON value of the document (numbers as written).
func (r *inputReader) json(v any, ptr string) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("input document %s: %w", ptr, err)
	}
	return raw
}

// inputReader reads an input document, keeping the first error.
type inputReader struct{ err error }

func (r *inputReader) fail(ptr, want string) {
	if r.err == nil {
		if ptr == "" {
			ptr = "/"
		}
		r.err = fmt.Errorf("input document %s: want %s", ptr, want)
	}
}

func (r *inputReader) object(v any, ptr string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		r.fail(ptr, "an object")
	}
	return m
}

func (r *inputReader) field(m map[string]any, key, ptr string) any {
	v, ok := r.opt(m, key, ptr)
	if !ok && m != nil {
		r.fail(ptr+"/"+key, "a value (the field is missing)")
	}
	return v
}

// opt reads key of m (at pointer ptr), which may be missing. Every key
// FactsFromInput reads goes through it, and one that contract.Input does
// not define panics: the reader cannot read a field the document lacks
// (TestFactsFromInputReadsTheContract reads every one).
func (r *inputReader) opt(m map[string]any, key, ptr string) (any, bool) {
	if path := contractPath(ptr, key); !inputContractPaths[path] {
		panic("engine: FactsFromInput reads " + path + ", which contract.Input does not define")
	}
	v, ok := m[key]
	return v, ok
}

// inputContractPaths are the paths of contract.Input.
var inputContractPaths = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range contract.InputPaths() {
		m[p.Path] = true
	}
	return m
}()

// contractPath is the contract path of key below the JSON pointer ptr:
// "/dispatch/calls/0", "tool" is "dispatch.calls[].tool", and
// "/facts/tool_calls/t/0", "args" is "facts.tool_calls.*[].args".
func contractPath(ptr, key string) string {
	var b strings.Builder
	tokens := strings.Split(ptr, "/")[1:]
	for i, tok := range tokens {
		switch {
		case i > 0 && tokens[i-1] == "tool_calls":
			b.WriteString(".*")
		case tok != "" && strings.Trim(tok, "0123456789") == "":
			b.WriteString("[]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
		}
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(key)
	return b.String()
}

// names reads a list of names (at pointer ptr), sorted.
func (r *inputReader) names(v any, ptr string) []string {
	list, ok := v.([]any)
	if !ok {
		r.fail(ptr, "an array of strings")
		return []string{}
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			r.fail(fmt.Sprintf("%s/%d", ptr, i), "a string")
			continue
		}
		out = append(out, s)
	}
	if !sort.StringsAreSorted(out) {
		sort.Strings(out)
	}
	return out
}

func (r *inputReader) string(v any, ptr string) string {
	s, ok := v.(string)
	if !ok {
		r.fail(ptr, "a string")
	}
	return s
}

func (r *inputReader) nullableString(v any, ptr string) *string {
	if v == nil {
		return nil
	}
	s := r.string(v, ptr)
	return &s
}

func (r *inputReader) int(v any, ptr string) int {
	switch n := v.(type) {
	case float64:
		if n == float64(int(n)) && n >= 0 {
			return int(n)
		}
	case json.Number:
		if i, err := n.Int64(); err == nil && i >= 0 {
			return int(i)
		}
	}
	r.fail(ptr, "a whole number")
	return 0
}

func (r *inputReader) position(v any, ptr string) facts.Position {
	m := r.object(v, ptr)
	return facts.Position{Message: r.int(r.field(m, "message", ptr), ptr+"/message"), Part: r.int(r.field(m, "part", ptr), ptr+"/part")}
}

// readFields reads the fields of m (at pointer ptr) that the document's
// definition (docField) reads back into x, each of them required but
// the optional ones added after decision logs were first written, which
// read as they meant before (docField.absent).
func readFields[T any](r *inputReader, m map[string]any, ptr string, fields []docField[T], x *T) {
	for i := range fields {
		f := &fields[i]
		if f.get == nil {
			continue
		}
		if f.optional {
			if v, ok := r.opt(m, f.key, ptr); ok || m == nil {
				f.get(r, v, ptr+"/"+f.key, x)
			} else {
				f.get(r, f.absent, ptr+"/"+f.key, x)
			}
			continue
		}
		f.get(r, r.field(m, f.key, ptr), ptr+"/"+f.key, x)
	}
}
