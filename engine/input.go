package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/contract"
	"github.com/policycheck/policycheck/trust"
)

func strTerms(names []string) []*ast.Term {
	out := make([]*ast.Term, len(names))
	for i, n := range names {
		out[i] = ast.StringTerm(n)
	}
	return out
}

func setOf(names []string) *ast.Term { return ast.SetTerm(strTerms(names)...) }

func arrayOf(names []string) *ast.Term { return ast.ArrayTerm(strTerms(names)...) }

// keyTerms holds a term for each object key a decision writes into its
// input document or reads from the policy's result (every key of the
// documents internal/contract defines), built once, so that a decision
// allocates no term per key (docs/benchmarks-history/2026-12-03.md, "JSON input
// accepted").
// Terms are never modified once built: sharing them between decisions
// and goroutines is safe.
var keyTerms = func() map[string]*ast.Term {
	m := map[string]*ast.Term{}
	for _, k := range contract.Keys() {
		m[k] = ast.StringTerm(k)
	}
	return m
}()

// keyTerm is the term of the object key k: the shared one when keyTerms has
// it, else a new one.
func keyTerm(k string) *ast.Term {
	if t, ok := keyTerms[k]; ok {
		return t
	}
	return ast.StringTerm(k)
}

func item(k string, v *ast.Term) [2]*ast.Term { return ast.Item(keyTerm(k), v) }

func posTerm(p facts.Position) *ast.Term {
	return ast.ObjectTerm(item("message", ast.IntNumberTerm(p.Message)), item("part", ast.IntNumberTerm(p.Part)))
}

// registryData builds data.policycheck.registry: the registry as data,
// with the sets the default policy's set algebra reads, once per registry
// revision. It also returns the filter input's tools array and the
// registry revision.
func registryData(reg *facts.Registry) (ast.Value, *ast.Term, string) {
	tools := ast.NewObject()
	list := make([]*ast.Term, 0, len(reg.Tools()))
	for _, t := range reg.Tools() {
		gate, _ := reg.GateOf(t.Name)
		capTerm := ast.NullTerm()
		if t.Capability != "" {
			capTerm = ast.StringTerm(t.Capability)
		}
		obj := ast.ObjectTerm(
			item("name", ast.StringTerm(t.Name)),
			item("capability", capTerm),
			item("defer_loading", ast.BooleanTerm(t.DeferLoading)),
			item("gate", ast.StringTerm(gate.String())),
			item("description", ast.StringTerm(t.Description)),
			item("labels", arrayOf(t.Labels)),
		)
		if t.ParametersJSONSchema != nil {
			// NewRegistry compiled it, so it is JSON; with it in the data, a
			// change of schema is a new registry revision.
			if v, err := ast.ValueFromReader(bytes.NewReader(t.ParametersJSONSchema)); err == nil {
				obj.Value.(ast.Object).Insert(ast.StringTerm("parameters_json_schema"), ast.NewTerm(v))
			}
		}
		if reg.UsesFlowLabels() {
			// Only when the registry sets some: a registry without them
			// keeps its data, and so its revision.
			l := reg.LabelsOf(t.Name)
			o := obj.Value.(ast.Object)
			o.Insert(keyTerm("integrity"), ast.StringTerm(l.Integrity))
			o.Insert(keyTerm("confidentiality"), ast.StringTerm(l.Confidentiality))
			o.Insert(keyTerm("clearance"), ast.StringTerm(l.Clearance))
			o.Insert(keyTerm("consequential"), ast.BooleanTerm(l.Consequential))
		}
		tools.Insert(ast.StringTerm(t.Name), obj)
		// Filters see every registry tool, never the framework tools.
		list = append(list, ast.ObjectTerm(
			item("name", ast.StringTerm(t.Name)),
			item("capability", capTerm),
			item("defer_loading", ast.BooleanTerm(t.DeferLoading)),
		))
	}
	capTools := ast.NewObject()
	owned := ast.NewObject()
	caps := ast.NewObject()
	for _, c := range reg.Capabilities() {
		capObj := ast.NewObject(
			item("id", ast.StringTerm(c.ID)),
			item("defer_loading", ast.BooleanTerm(c.DeferLoading)),
			item("description", ast.StringTerm(c.Description)),
			item("labels", arrayOf(c.Labels)),
		)
		// A capability's own flow labels, those it sets (its tools
		// carry the effective ones).
		for k, v := range map[string]string{"integrity": c.Integrity, "confidentiality": c.Confidentiality, "clearance": c.Clearance} {
			if v != "" {
				capObj.Insert(keyTerm(k), ast.StringTerm(v))
			}
		}
		if c.Consequential {
			capObj.Insert(keyTerm("consequential"), ast.BooleanTerm(true))
		}
		caps.Insert(ast.StringTerm(c.ID), ast.NewTerm(capObj))
		owned.Insert(ast.StringTerm(c.ID), setOf(reg.OwnedTools(c.ID)))
		if c.DeferLoading {
			capTools.Insert(ast.StringTerm(c.ID), setOf(reg.CapabilityTools(c.ID)))
		}
	}
	data := ast.NewObject(
		item("tools", ast.NewTerm(tools)),
		item("capabilities", ast.NewTerm(caps)),
		item("names", setOf(reg.ToolNames())),
		item("always_available", setOf(reg.AlwaysAvailableTools())),
		item("search_gated", setOf(reg.SearchGatedTools())),
		item("deferred_capabilities", setOf(reg.DeferredCapabilities())),
		item("always_on_capabilities", setOf(reg.AlwaysOnCapabilities())),
		item("capability_tools", ast.NewTerm(capTools)),
		item("owned_tools", ast.NewTerm(owned)),
	)
	if cs := reg.ContextSchemaJSON(); cs != nil {
		// NewRegistry compiled it, so it is JSON; with it in the data, a
		// change of schema is a new registry revision.
		if v, err := ast.ValueFromReader(bytes.NewReader(cs)); err == nil {
			data.Insert(ast.StringTerm("context_schema"), ast.NewTerm(v))
		}
	}
	if names := reg.ApprovalTools(); len(names) > 0 {
		// Only when some tool needs approval: a registry without
		// requires_approval keeps its data, and so its revision.
		data.Insert(ast.StringTerm("requires_approval"), setOf(names))
	}
	sum := sha256.Sum256([]byte(data.String()))
	return data, ast.ArrayTerm(list...), hex.EncodeToString(sum[:])
}

// filterInput is the input document of a capability filter
// (contract.FilterInput), built here alone: the registry's tools as the
// filters see them (registryData), the request context and the active
// capability set.
func filterInput(tools, ctxTerm, active *ast.Term) ast.Object {
	return ast.NewObject(
		item("tools", tools),
		item("context", ctxTerm),
		item("active_capabilities", active),
	)
}

// FilterInput returns the input document a capability filter
// (prepare_tools) reads for reg, with an empty context and the
// capabilities active, in their order: the document the engine builds for
// a decision's filters, which policycheck check evaluates a filter with.
func FilterInput(reg *facts.Registry, active []string) ast.Value {
	_, tools, _ := registryData(reg)
	return filterInput(tools, ast.ObjectTerm(), arrayOf(active))
}

// RegistryDocument returns data.policycheck.registry as the policies see
// it for reg, as JSON-compatible values (sets become sorted arrays): what
// a fixture for stock `opa test` holds in place of the engine's data.
func RegistryDocument(reg *facts.Registry) (any, error) {
	data, _, _ := registryData(reg)
	return ast.JSON(data)
}

// contextEntry is a request context converted: its Rego value and digest.
type contextEntry struct {
	term   *ast.Term
	digest string
}

// maxCachedContext bounds the JSON size of a context the context cache
// keeps (larger ones are converted every time).
const maxCachedContext = 4096

// contextValue converts a request context to a Rego value and digests it
// canonically (object keys sorted, as encoding/json writes maps). Recent
// contexts are remembered by their JSON encoding: converting one costs
// several times what encoding it does, and a service's requests repeat a
// handful of contexts. The term is shared between decisions, which only
// read it.
func (s *snapshot) contextValue(ctxDoc any) (*ast.Term, string, error) {
	if ctxDoc == nil {
		return ast.ObjectTerm(), emptyContextDigest, nil
	}
	// A context given as its JSON bytes (as the sidecar passes it) is
	// read as is; the digest below is taken over a canonical encoding, so
	// its spacing and key order only cost a cache miss.
	raw, isRaw := ctxDoc.(json.RawMessage)
	if !isRaw {
		var err error
		if raw, err = json.Marshal(ctxDoc); err != nil {
			return nil, "", fmt.Errorf("context: %w", err)
		}
	}
	cacheable := len(raw) <= maxCachedContext
	if cacheable {
		if e, ok := s.contexts.Get(string(raw)); ok {
			return e.term, e.digest, nil
		}
	}
	if probs, omitted := s.reg.ValidateContext(raw); probs != nil {
		return nil, "", &ContextError{Problems: probs, Omitted: omitted}
	}
	term, digest, err := convertContext(raw)
	if err == nil && cacheable {
		s.contexts.Put(string(raw), contextEntry{term, digest})
	}
	return term, digest, err
}

// ContextError is a request context that fails the registry's
// context_schema: bad input, which Decide and Explain refuse before any
// policy is evaluated.
type ContextError struct {
	// Problems are what is wrong, each with the JSON pointer inside the
	// context (at most facts.MaxArgsProblems); Omitted counts the rest.
	Problems []facts.ArgsProblem
	Omitted  int
}

// Pointer is the JSON pointer, inside the context, of the first problem.
func (e *ContextError) Pointer() string { return e.Problems[0].Pointer }

func (e *ContextError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "the context fails the registry's context_schema: " + strings.Join(parts, "; ") + e.more()
}

func (e *ContextError) more() string {
	if e.Omitted > 0 {
		return fmt.Sprintf(" (and %d more)", e.Omitted)
	}
	return ""
}

// Detail says what is wrong without the first problem's pointer, for an
// error that names it apart ("the context fails the registry's
// context_schema: REASON; POINTER: REASON ...").
func (e *ContextError) Detail() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	parts[0] = e.Problems[0].Reason
	return "the context fails the registry's context_schema: " + strings.Join(parts, "; ") + e.more()
}

// convertContext converts a context's JSON encoding. The digest is taken
// over the re-encoded document, whose object keys encoding/json writes
// sorted: a context sent with its keys in another order (a
// json.RawMessage, say) is the same key. Two spellings of one number only
// cost a cache miss, never a stale hit.
func convertContext(raw []byte) (*ast.Term, string, error) {
	var norm any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&norm); err != nil {
		return nil, "", fmt.Errorf("context: %w", err)
	}
	v, err := ast.InterfaceToValue(norm)
	if err != nil {
		return nil, "", fmt.Errorf("context: %w", err)
	}
	digest, err := trust.ContextDigest(norm)
	if err != nil {
		return nil, "", fmt.Errorf("context: %w", err)
	}
	return ast.NewTerm(v), digest, nil
}

// emptyContextDigest is the digest of the context {}.
var emptyContextDigest, _ = trust.ContextDigest(map[string]any{})

// argsTerm turns a call's raw args into a Rego value, as
// normalizeArgs reads them.
func argsTerm(raw []byte) *ast.Term {
	val, err := ast.InterfaceToValue(normalizeArgs(raw))
	if err != nil {
		return ast.NullTerm()
	}
	return ast.NewTerm(val)
}

func nullableString(s *string) *ast.Term {
	if s == nil {
		return ast.NullTerm()
	}
	return ast.StringTerm(*s)
}

// filterResult is what the filters of one active set did.
type filterResult struct {
	dropped []string // sorted registry tools some active filter dropped
	errors  []filterError
	keys    []string // cache keys used, for the fingerprint
	// fingerprint is the decision's fingerprint when this result is the
	// one it reports (docs/decision.md, "fingerprint"): a digest of the revisions, the
	// context, the active set and keys, computed once per composition.
	fingerprint string
	// droppedBy maps a dropped tool to the filters that dropped it.
	droppedBy map[string][]string
	// termv is the result as the policy's input reads it, built once for
	// a composed result that the cache shares between decisions (which
	// only read it).
	termv *ast.Term
}

type filterError struct {
	Capability string `json:"capability"`
	File       string `json:"file"`
	Message    string `json:"message"`
}

func (fr *filterResult) term(sets *setTerms) *ast.Term {
	if fr.termv != nil {
		return fr.termv
	}
	errs := make([]*ast.Term, len(fr.errors))
	for i, e := range fr.errors {
		errs[i] = ast.ObjectTerm(item("capability", ast.StringTerm(e.Capability)), item("message", ast.StringTerm(e.Message)))
	}
	return ast.ObjectTerm(item("dropped", sets.of(fr.dropped)), item("errors", ast.ArrayTerm(errs...)))
}

// nameTerms are the names a decision's sets usually hold (the registry's
// tools, the framework tools and the capability ids), sorted, with their
// terms built once per snapshot: the input's sets take these terms
// instead of allocating one per name per decision. Terms are never
// modified once built, so sharing them between decisions is safe.
type nameTerms struct {
	names []string
	terms []*ast.Term
}

func newNameTerms(sorted []string) nameTerms {
	return nameTerms{names: sorted, terms: strTerms(sorted)}
}

// term is the term of one name: the shared one when the name is known,
// else one of its own.
func (nt *nameTerms) term(name string) *ast.Term {
	if j, ok := slices.BinarySearch(nt.names, name); ok {
		return nt.terms[j]
	}
	return ast.StringTerm(name)
}

// setOf builds the set of names (sorted, as every list of the facts is):
// a merge walk against the known names for a long list, a binary search
// per name (term) for a short one; a name the registry does not know (a
// reveal of an unregistered tool) gets a term of its own.
func (nt *nameTerms) setOf(names []string) *ast.Term {
	terms := make([]*ast.Term, len(names))
	merge := len(names)*16 >= len(nt.names)
	j := 0
	for i, n := range names {
		if !merge {
			terms[i] = nt.term(n)
			continue
		}
		for j < len(nt.names) && nt.names[j] < n {
			j++
		}
		if j < len(nt.names) && nt.names[j] == n {
			terms[i] = nt.terms[j]
		} else {
			terms[i] = ast.StringTerm(n)
		}
	}
	return ast.SetTerm(terms...)
}

// setTerms builds the set terms of one input document, handing out the
// term already built for an equal list: the lists of one decision often
// repeat (the outgoing loaded set is the loaded set, the dispatch sets
// usually equal the next request's, many are empty), and a term is never
// modified once built, so sharing it is safe.
type setTerms struct {
	known *nameTerms
	built []struct {
		names []string
		term  *ast.Term
	}
}

func (s *setTerms) of(names []string) *ast.Term {
	for _, e := range s.built {
		if equalStrings(e.names, names) {
			return e.term
		}
	}
	t := s.known.setOf(names)
	s.built = append(s.built, struct {
		names []string
		term  *ast.Term
	}{names, t})
	return t
}

// buildInput builds the input document of the decision query: the facts
// as sets, the filter results and the context. It is built once per
// decision as an ast.Value: no JSON round trip; the fields that come
// from the facts are written by their one definition (docField below),
// which FactsFromInput reads back.
// A call's args are its arguments as readCalls read them (reads, parallel
// to the calls). A call with a bound approval (binds, parallel to the
// calls) carries it as approval, and its args are the ones it would
// execute with. A call whose arguments fail its tool's schema or cannot be
// read exactly one way (invalid, parallel to the calls) carries
// invalid_args: true and args null: no rule reads arguments that did not
// validate. The optional facts are in it when opts asks for them
// (the policies may read them) and the facts carry them: facts.tool_calls,
// facts.builtin_returns and facts.unpaired_returns (when the history
// has any),
// facts.flow_index_truncated and each call's flows.
//
// The label fields (labels.go) are written as the registry and the
// policies ask: a flow source's integrity and confidentiality when the
// registry sets flow labels, a call's window and args_integrity when
// the policies may read them (lab.reads).
func buildInput(f *facts.Facts, next, dispatch *filterResult, ctxTerm *ast.Term, known *nameTerms, binds []*binding, reads []callArgs, invalid []*argsInvalid, opts facts.Options, lab labelInput) ast.Value {
	w := &docWriter{sets: setTerms{known: known}, known: known}
	if lab.reg != nil && lab.reg.UsesFlowLabels() {
		w.labels = lab.reg
	}
	factsObj := objectOf(w, factsFields, f)
	// The calls (and the returns beside them): for a policy that reads
	// them (the labels need none of them).
	writeCalls := opts.ToolCalls
	if writeCalls && f.ToolCalls != nil {
		factsObj.Insert(keyTerm("tool_calls"), toolCallsTerm(w, f.ToolCalls))
	}
	if writeCalls && len(f.BuiltinReturns) > 0 {
		brs := make([]*ast.Term, len(f.BuiltinReturns))
		for i := range f.BuiltinReturns {
			brs[i] = ast.NewTerm(objectOf(w, builtinReturnFields, &f.BuiltinReturns[i]))
		}
		factsObj.Insert(keyTerm("builtin_returns"), ast.ArrayTerm(brs...))
	}
	if writeCalls && len(f.UnpairedReturns) > 0 {
		urs := make([]*ast.Term, len(f.UnpairedReturns))
		for i := range f.UnpairedReturns {
			urs[i] = ast.NewTerm(objectOf(w, unpairedReturnFields, &f.UnpairedReturns[i]))
		}
		factsObj.Insert(keyTerm("unpaired_returns"), ast.ArrayTerm(urs...))
	}
	if opts.Flows {
		factsObj.Insert(keyTerm("flow_index_truncated"), ast.BooleanTerm(f.FlowIndexTruncated))
	}
	allErrs := append(append([]filterError{}, next.errors...), dispatch.errors...)
	errTerms := make([]*ast.Term, len(allErrs))
	for i, e := range allErrs {
		errTerms[i] = ast.ObjectTerm(item("capability", ast.StringTerm(e.Capability)), item("message", ast.StringTerm(e.Message)))
	}
	nextTerm := next.term(&w.sets)
	dispatchTerm := nextTerm
	if dispatch != next {
		dispatchTerm = dispatch.term(&w.sets)
	}
	filters := ast.ObjectTerm(
		item("next", nextTerm),
		item("dispatch", dispatchTerm),
		item("errors", ast.ArrayTerm(errTerms...)),
	)
	in := ast.NewObject(
		item("facts", ast.NewTerm(factsObj)),
		item("outgoing", ast.NewTerm(objectOf(w, outgoingFields, &f.Outgoing))),
		item("filters", filters),
		item("context", ctxTerm),
	)
	if d := f.Dispatch; d != nil {
		var window *ast.Term
		if lab.reads.window {
			cw := windowOf(lab.reg, f)
			window = cw.term(lab.window)
		}
		// What the calls sent, when the facts list them: a return
		// vouches for no value a call before it sent (echoedByTheAgent).
		var sent *facts.SentValues
		if lab.reads.argsIntegrity && f.ToolCalls != nil {
			sent = facts.NewSentValues(f.ToolCalls)
		}
		calls := make([]*ast.Term, len(d.Calls))
		for i := range d.Calls {
			c := &d.Calls[i]
			args := reads[i].own
			if args == nil {
				args = ast.NullTerm() // unreadable: invalid_args below
			}
			var approval *ast.Term
			if binds != nil && binds[i] != nil && binds[i].bound && (invalid == nil || invalid[i] == nil) {
				approval, args = approvalTerm(binds[i].approval, args, reads[i].override)
			}
			call := objectOf(w, callFields, c, item("index", ast.IntNumberTerm(i)), item("args", args))
			if opts.Flows && c.Flows != nil {
				call.Insert(keyTerm("flows"), flowsTerm(w, c.Flows))
			}
			if window != nil {
				call.Insert(keyTerm("window"), window)
			}
			if lab.reads.argsIntegrity && (invalid == nil || invalid[i] == nil) {
				if sent != nil {
					sent.StartCall()
				}
				call.Insert(keyTerm("args_integrity"), argsIntegrityTerm(argsIntegrityOf(lab.reg, c, reads[i].value, sent)))
			}
			switch {
			case invalid != nil && invalid[i] != nil:
				// Neither the arguments nor an approval of them.
				call.Insert(keyTerm("args"), ast.NullTerm())
				call.Insert(keyTerm("invalid_args"), ast.BooleanTerm(true))
			case approval != nil:
				call.Insert(keyTerm("approval"), approval)
			}
			calls[i] = ast.NewTerm(call)
		}
		in.Insert(keyTerm("dispatch"), ast.NewTerm(objectOf(w, dispatchFields, d, item("calls", ast.ArrayTerm(calls...)))))
	}
	return in
}

// toolCallsTerm is input.facts.tool_calls: tool name -> its calls, in
// history order.
func toolCallsTerm(w *docWriter, calls []facts.ToolCallRecord) *ast.Term {
	byTool := map[string][]*ast.Term{}
	var order []string
	for i := range calls {
		c := &calls[i]
		if _, ok := byTool[c.Tool]; !ok {
			order = append(order, c.Tool)
		}
		byTool[c.Tool] = append(byTool[c.Tool], ast.NewTerm(objectOf(w, toolCallFields, c)))
	}
	obj := ast.NewObject()
	for _, tool := range order {
		obj.Insert(w.known.term(tool), ast.ArrayTerm(byTool[tool]...))
	}
	return ast.NewTerm(obj)
}

// flowsTerm is a call's flows (input.call.flows).
func flowsTerm(w *docWriter, flows []facts.Flow) *ast.Term {
	out := make([]*ast.Term, len(flows))
	for i := range flows {
		obj := objectOf(w, flowFields, &flows[i])
		if w.labels != nil {
			l := sourceLabel(w.labels, &flows[i].Source)
			src := obj.Get(keyTerm("source")).Value.(ast.Object)
			src.Insert(keyTerm("integrity"), ast.StringTerm(l.Integrity))
			src.Insert(keyTerm("confidentiality"), ast.StringTerm(l.Confidentiality))
		}
		out[i] = ast.NewTerm(obj)
	}
	return ast.ArrayTerm(out...)
}

// The input document, defined once for both directions: each field of an
// object that comes from the facts is one docField, its key with how the
// engine writes it from the facts (buildInput) and how FactsFromInput
// reads the facts back from a document (inputdoc.go). The filter results
// and a call's index and invalid_args are the engine's own, written only;
// internal/contract declares every key and its type.

// docWriter is what writing a field needs: the decision's set terms and
// the snapshot's name terms.
type docWriter struct {
	sets  setTerms
	known *nameTerms
	// labels is the registry when it sets flow labels: a flow source
	// then carries its integrity and confidentiality (flowsTerm).
	labels *facts.Registry
}

// docField is one field of an object of the input document whose Go value
// is a T.
type docField[T any] struct {
	key string
	// put writes the field's value; nil leaves the key out.
	put func(w *docWriter, x *T) *ast.Term
	// get reads the field's value v (at pointer ptr) into x; nil for a
	// field the reader does not read back.
	get func(r *inputReader, v any, ptr string, x *T)
	// optional marks a field added to the document after decision logs
	// were first written; get reads absent when it is missing: what the
	// field means in a log written before it. Every other field is
	// required.
	optional bool
	absent   any
}

// objectOf is the object of fields of x and the extra items, built in
// one piece (ast.NewObject keeps its members in one allocation).
func objectOf[T any](w *docWriter, fields []docField[T], x *T, extra ...[2]*ast.Term) ast.Object {
	var buf [10][2]*ast.Term
	items := buf[:0]
	for i := range fields {
		if t := fields[i].put(w, x); t != nil {
			items = append(items, item(fields[i].key, t))
		}
	}
	return ast.NewObject(append(items, extra...)...)
}

// setField is a list of names the policy reads as a set.
func setField[T any](key string, of func(*T) *[]string) docField[T] {
	return docField[T]{key: key,
		put: func(w *docWriter, x *T) *ast.Term { return w.sets.of(*of(x)) },
		get: func(r *inputReader, v any, ptr string, x *T) { *of(x) = r.names(v, ptr) }}
}

// posField is a position (message and part).
func posField[T any](key string, of func(*T) *facts.Position) docField[T] {
	return docField[T]{key: key,
		put: func(_ *docWriter, x *T) *ast.Term { return posTerm(*of(x)) },
		get: func(r *inputReader, v any, ptr string, x *T) { *of(x) = r.position(v, ptr) }}
}

// intField is a whole number.
func intField[T any](key string, of func(*T) *int) docField[T] {
	return docField[T]{key: key,
		put: func(_ *docWriter, x *T) *ast.Term { return ast.IntNumberTerm(*of(x)) },
		get: func(r *inputReader, v any, ptr string, x *T) { *of(x) = r.int(v, ptr) }}
}

// idField is a string or null (a tool_call_id, a provider).
func idField[T any](key string, of func(*T) **string) docField[T] {
	return docField[T]{key: key,
		put: func(_ *docWriter, x *T) *ast.Term { return nullableString(*of(x)) },
		get: func(r *inputReader, v any, ptr string, x *T) { *of(x) = r.nullableString(v, ptr) }}
}

// toolField is a tool name.
func toolField[T any](key string, of func(*T) *string) docField[T] {
	return docField[T]{key: key,
		put: func(w *docWriter, x *T) *ast.Term { return w.known.term(*of(x)) },
		get: func(r *inputReader, v any, ptr string, x *T) { *of(x) = r.string(v, ptr) }}
}

// objField is an object of fields of its own.
func objField[T, U any](key string, fields []docField[U], of func(*T) *U) docField[T] {
	return docField[T]{key: key,
		put: func(w *docWriter, x *T) *ast.Term { return ast.NewTerm(objectOf(w, fields, of(x))) },
		get: func(r *inputReader, v any, ptr string, x *T) { readFields(r, r.object(v, ptr), ptr, fields, of(x)) }}
}

// input.facts (tool_calls and flow_index_truncated, which the policies
// may not read, are written on demand: buildInput).
var factsFields = []docField[facts.Facts]{
	posField("window", func(f *facts.Facts) *facts.Position { return &f.Window }),
	setField("discovered", func(f *facts.Facts) *[]string { return &f.Discovered }),
	setField("loaded", func(f *facts.Facts) *[]string { return &f.Loaded }),
	setField("returned", func(f *facts.Facts) *[]string { return &f.Returned }),
	setField("active_capabilities", func(f *facts.Facts) *[]string { return &f.ActiveCapabilities }),
}

// input.outgoing.
var outgoingFields = []docField[facts.Outgoing]{
	setField("discovered", func(o *facts.Outgoing) *[]string { return &o.Discovered }),
	setField("loaded", func(o *facts.Outgoing) *[]string { return &o.Loaded }),
}

// input.dispatch (its calls: dispatchCalls).
var dispatchFields = []docField[facts.Dispatch]{
	idField("provider", func(d *facts.Dispatch) **string { return &d.Provider }),
	posField("window", func(d *facts.Dispatch) *facts.Position { return &d.Window }),
	setField("loaded", func(d *facts.Dispatch) *[]string { return &d.Loaded }),
	objField("evidence", []docField[facts.Evidence]{
		setField("discovered", func(e *facts.Evidence) *[]string { return &e.Discovered }),
		setField("loaded", func(e *facts.Evidence) *[]string { return &e.Loaded }),
	}, func(d *facts.Dispatch) *facts.Evidence { return &d.Evidence }),
	setField("active_capabilities", func(d *facts.Dispatch) *[]string { return &d.ActiveCapabilities }),
	objField("same_response", []docField[facts.SameResponse]{
		setField("revealed", func(s *facts.SameResponse) *[]string { return &s.Revealed }),
		setField("pending_loads", func(s *facts.SameResponse) *[]string { return &s.PendingLoads }),
	}, func(d *facts.Dispatch) *facts.SameResponse { return &d.SameResponse }),
}

// A call of input.dispatch.calls, but its index, args, approval, flows
// and invalid_args (buildInput, FactsFromInput).
var callFields = []docField[facts.Call]{
	intField("part", func(c *facts.Call) *int { return &c.Part }),
	toolField("tool", func(c *facts.Call) *string { return &c.Tool }),
	idField("tool_call_id", func(c *facts.Call) **string { return &c.ToolCallID }),
	{key: "tool_kind",
		put: func(_ *docWriter, c *facts.Call) *ast.Term { return toolKindTerm(c.ToolKind) },
		get: func(r *inputReader, v any, ptr string, c *facts.Call) {
			switch v {
			case nil:
			case facts.ToolKindSearch.String():
				c.ToolKind = facts.ToolKindSearch
			case facts.ToolKindLoad.String():
				c.ToolKind = facts.ToolKindLoad
			default:
				if r.err == nil {
					r.fail(ptr, `null, "tool-search" or "capability-load"`)
				}
			}
		}},
}

// A call of input.facts.tool_calls (the key above it is its Tool).
var toolCallFields = []docField[facts.ToolCallRecord]{
	idField("tool_call_id", func(c *facts.ToolCallRecord) **string { return &c.ToolCallID }),
	intField("message", func(c *facts.ToolCallRecord) *int { return &c.Message }),
	intField("part", func(c *facts.ToolCallRecord) *int { return &c.Part }),
	{key: "timestamp",
		put: func(_ *docWriter, c *facts.ToolCallRecord) *ast.Term { return timestampTerm(c.Timestamp) },
		get: func(r *inputReader, v any, ptr string, c *facts.ToolCallRecord) {
			switch v.(type) {
			case nil:
			case string, float64, json.Number:
				c.Timestamp = r.json(v, ptr)
			default:
				r.fail(ptr, "a string, a number or null")
			}
		}},
	{key: "outcome",
		put: func(_ *docWriter, c *facts.ToolCallRecord) *ast.Term { return ast.StringTerm(c.Outcome.String()) },
		get: func(r *inputReader, v any, ptr string, c *facts.ToolCallRecord) {
			switch v {
			case facts.CallPending.String():
			case facts.CallReturned.String():
				c.Outcome = facts.CallReturned
			case facts.CallRetried.String():
				c.Outcome = facts.CallRetried
			default:
				if r.err == nil {
					r.fail(ptr, `"returned", "retried" or "pending"`)
				}
			}
		}},
	{key: "args",
		put: func(_ *docWriter, c *facts.ToolCallRecord) *ast.Term { return argsTerm(c.Args) },
		get: func(r *inputReader, v any, ptr string, c *facts.ToolCallRecord) { c.Args = r.json(v, ptr) }},
}

// An entry of a call's flows.
// A provider-side return of input.facts.builtin_returns.
var builtinReturnFields = []docField[facts.BuiltinReturn]{
	toolField("tool", func(b *facts.BuiltinReturn) *string { return &b.Tool }),
	idField("tool_call_id", func(b *facts.BuiltinReturn) **string { return &b.ToolCallID }),
	intField("message", func(b *facts.BuiltinReturn) *int { return &b.Message }),
	intField("part", func(b *facts.BuiltinReturn) *int { return &b.Part }),
}

// A return of input.facts.unpaired_returns.
var unpairedReturnFields = []docField[facts.UnpairedReturn]{
	toolField("tool", func(u *facts.UnpairedReturn) *string { return &u.Tool }),
	idField("tool_call_id", func(u *facts.UnpairedReturn) **string { return &u.ToolCallID }),
	intField("message", func(u *facts.UnpairedReturn) *int { return &u.Message }),
	intField("part", func(u *facts.UnpairedReturn) *int { return &u.Part }),
}

var flowFields = []docField[facts.Flow]{
	{key: "path",
		put: func(_ *docWriter, fl *facts.Flow) *ast.Term { return ast.StringTerm(fl.Path) },
		get: func(r *inputReader, v any, ptr string, fl *facts.Flow) { fl.Path = r.string(v, ptr) }},
	{key: "match",
		put: func(_ *docWriter, fl *facts.Flow) *ast.Term { return keyTerm(fl.Match.String()) },
		get: func(r *inputReader, v any, ptr string, fl *facts.Flow) {
			switch v {
			case facts.FlowExact.String():
				fl.Match = facts.FlowExact
			case facts.FlowContains.String():
				fl.Match = facts.FlowContains
			case facts.FlowToken.String():
				fl.Match = facts.FlowToken
			default:
				if r.err == nil {
					r.fail(ptr, `"exact", "contains" or "token"`)
				}
			}
		}},
	{key: "token", optional: true, absent: nil, // null unless match is "token"
		put: func(_ *docWriter, fl *facts.Flow) *ast.Term {
			if fl.Token == 0 {
				return ast.NullTerm()
			}
			return keyTerm(fl.Token.String())
		},
		get: func(r *inputReader, v any, ptr string, fl *facts.Flow) {
			if v == nil {
				return
			}
			s, _ := v.(string)
			c, ok := facts.ParseTokenClass(s)
			if !ok {
				if r.err == nil {
					r.fail(ptr, "null or a token class")
				}
				return
			}
			fl.Token = c
		}},
	{key: "whole", optional: true, absent: false, // logs before it: no token flows
		put: func(_ *docWriter, fl *facts.Flow) *ast.Term { return ast.BooleanTerm(fl.Whole) },
		get: func(r *inputReader, v any, ptr string, fl *facts.Flow) {
			b, ok := v.(bool)
			if !ok {
				if r.err == nil {
					r.fail(ptr, "a boolean")
				}
				return
			}
			fl.Whole = b
		}},
	objField("source", []docField[facts.FlowSource]{
		{key: "kind", optional: true, absent: facts.ToolReturn.String(), // logs before it: returns were the only sources
			put: func(_ *docWriter, s *facts.FlowSource) *ast.Term { return keyTerm(s.Kind.String()) },
			get: func(r *inputReader, v any, ptr string, s *facts.FlowSource) {
				str, _ := v.(string)
				k, ok := facts.ParsePartKind(str)
				switch k {
				case facts.ToolReturn, facts.BuiltinToolReturn, facts.UserPrompt, facts.SystemPrompt, facts.RetryPrompt:
				default:
					ok = false
				}
				if !ok {
					if r.err == nil {
						r.fail(ptr, `"tool-return", "builtin-tool-return", "user-prompt", "system-prompt" or "retry-prompt"`)
					}
					return
				}
				s.Kind = k
			}},
		idField("tool_call_id", func(s *facts.FlowSource) **string { return &s.ToolCallID }),
		{key: "tool", // null for a prompt
			put: func(w *docWriter, s *facts.FlowSource) *ast.Term {
				if s.Kind == facts.UserPrompt || s.Kind == facts.SystemPrompt {
					return ast.NullTerm()
				}
				return w.known.term(s.Tool)
			},
			get: func(r *inputReader, v any, ptr string, s *facts.FlowSource) {
				if v != nil {
					s.Tool = r.string(v, ptr)
				}
			}},
		{key: "labels", // a list, not a set
			put: func(_ *docWriter, s *facts.FlowSource) *ast.Term { return arrayOf(s.Labels) },
			get: func(r *inputReader, v any, ptr string, s *facts.FlowSource) { s.Labels = r.names(v, ptr) }},
		intField("message", func(s *facts.FlowSource) *int { return &s.At.Message }),
		intField("part", func(s *facts.FlowSource) *int { return &s.At.Part }),
		{key: "beside", optional: true, // written only for a prompt beside tool returns
			put: func(_ *docWriter, s *facts.FlowSource) *ast.Term {
				if len(s.Beside) == 0 {
					return nil
				}
				return arrayOf(s.Beside)
			},
			get: func(r *inputReader, v any, ptr string, s *facts.FlowSource) {
				if v != nil {
					s.Beside = r.names(v, ptr)
				}
			}},
	}, func(fl *facts.Flow) *facts.FlowSource { return &fl.Source }),
}

// timestampTerm is a message timestamp as the history wrote it: a
// string, a number, or null.
func timestampTerm(raw []byte) *ast.Term {
	if raw == nil {
		return ast.NullTerm()
	}
	v, err := ast.ValueFromReader(bytes.NewReader(raw))
	if err != nil {
		return ast.NullTerm()
	}
	return ast.NewTerm(v)
}

func toolKindTerm(k facts.ToolKind) *ast.Term {
	if k == facts.ToolKindNone {
		return ast.NullTerm()
	}
	return ast.StringTerm(k.String())
}
