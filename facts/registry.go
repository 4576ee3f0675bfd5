package facts

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/policycheck/policycheck/facts/internal/jsonvalue"
)

// Reserved framework tool names (spec X9, S2): a registry tool may not use them.
const (
	LoadCapabilityTool = "load_capability"
	SearchTool         = "search_tools"
)

// Capability is a registered capability (spec 0.3).
type Capability struct {
	ID           string `json:"id"`
	DeferLoading bool   `json:"defer_loading"`
	Description  string `json:"description,omitempty"`
	// Labels are the operator's names for what the capability's tools
	// touch ("secret", "external"): its tools inherit them.
	Labels []string `json:"labels,omitempty"`
	// RequiresApproval: every call of every tool of the capability needs
	// a person's approval (Registry.ApprovalTools).
	RequiresApproval bool `json:"requires_approval,omitempty"`
	// Flow labels its tools inherit (Tool's).
	FlowLabels
}

// Tool is a registered tool.
type Tool struct {
	Name string `json:"name"`
	// Capability is the id of the owning capability, "" for none.
	Capability   string `json:"capability"`
	DeferLoading bool   `json:"defer_loading"`
	Description  string `json:"description,omitempty"`
	// MaxRetries is the tool's retry budget; nil means the default of 1.
	MaxRetries *int `json:"max_retries,omitempty"`
	// ParametersJSONSchema is the JSON of the JSON Schema of the tool's
	// arguments (pydantic-ai's ToolDefinition.parameters_json_schema), or
	// nil for none. NewRegistry compiles it with the registry's
	// SchemaCompiler (WithSchemaCompiler); a call whose arguments fail it
	// gets the verdict invalid_args before any rule sees it.
	ParametersJSONSchema []byte `json:"parameters_json_schema,omitempty"`
	// Labels are the tool's labels. Registry.Tools and Registry.Tool
	// return the effective ones: the tool's own and its capability's,
	// sorted, without duplicates, never nil.
	Labels []string `json:"labels,omitempty"`
	// RequiresApproval: every call of the tool needs a person's approval
	// (Registry.ApprovalTools).
	RequiresApproval bool `json:"requires_approval,omitempty"`
	// Upstream names the MCP server that serves the tool behind
	// `policycheck gateway` (docs/gateway.md); "" for none. No decision
	// reads it.
	Upstream string `json:"upstream,omitempty"`
	// FlowLabels are the tool's integrity, confidentiality, clearance
	// and consequential mark (labels.go). Registry.Tools and
	// Registry.Tool return the effective ones: the tool's own joined
	// with its capability's, "" where neither sets one (the defaults
	// apply: Registry.LabelsOf).
	FlowLabels
}

// Gate says what makes a registry tool callable (conformance README).
type Gate uint8

// Gates.
const (
	// GateNone: always available.
	GateNone Gate = iota
	// GateSearch: deferred and not owned by a deferred capability; callable
	// once revealed.
	GateSearch
	// GateCapability: owned by a deferred capability; callable once that
	// capability is loaded (the load is the reveal).
	GateCapability
)

func (g Gate) String() string {
	switch g {
	case GateSearch:
		return "search"
	case GateCapability:
		return "capability"
	}
	return "none"
}

// RegistryError is a registry that breaks a rule. Pointer is the JSON
// pointer of the offending value inside the registry document.
type RegistryError struct {
	Pointer string
	Msg     string
}

func (e *RegistryError) Error() string { return e.Pointer + ": " + e.Msg }

// Registry is the shared tool configuration. Build it with NewRegistry; it
// is immutable afterwards and safe for concurrent use. Methods returning
// slices return shared slices that callers must not modify.
type Registry struct {
	caps  []Capability
	tools []Tool

	capIndex  map[string]int
	toolIndex map[string]int

	deferred    []string // sorted ids of configured-deferred capabilities
	always      []string // sorted ids of always-on capabilities
	deferredSet map[string]struct{}
	gates       []Gate
	searchGated []string            // sorted
	alwaysTools []string            // sorted
	capTools    map[string][]string // deferred capability -> its sorted tools
	ownedTools  map[string][]string // every capability -> its sorted tools
	toolNames   []string            // sorted
	rank        map[string]int      // tool name -> index in toolNames
	schemas     []*ArgsSchema       // per tool (registry order); nil for none
	approval    []string            // sorted tools needing approval, own or their capability's
	ctxSchema   *ArgsSchema         // the compiled context_schema; nil for none
	ctxRaw      []byte              // its JSON
	compile     SchemaCompiler      // WithSchemaCompiler's; nil for none
	// usesFlowLabels: some tool or capability sets a flow label
	// (UsesFlowLabels).
	usesFlowLabels bool
}

// RegistryOption sets a part of a registry beyond its capabilities and
// tools (NewRegistry).
type RegistryOption func(*Registry) error

// WithContextSchema gives the registry a JSON Schema of the request
// context (input.context; the registry's context_schema), as JSON.
// NewRegistry compiles it with the registry's SchemaCompiler, as a
// tool's parameters_json_schema; nil means none.
func WithContextSchema(raw []byte) RegistryOption {
	return func(r *Registry) error {
		r.ctxRaw = slices.Clone(raw)
		return nil
	}
}

// WithSchemaCompiler gives NewRegistry what compiles the registry's JSON
// Schemas (each tool's parameters_json_schema, the context_schema):
// loader.CompileSchema, with which package loader builds the registries
// it reads. A registry with a schema and no compiler is refused.
func WithSchemaCompiler(c SchemaCompiler) RegistryOption {
	return func(r *Registry) error {
		r.compile = c
		return nil
	}
}

// compileSchema compiles one of the registry's schemas (SchemaCompiler),
// at ptr in the registry document.
func (r *Registry) compileSchema(ptr, field string, tool int, raw []byte) (*ArgsSchema, error) {
	if r.compile == nil {
		return nil, &RegistryError{ptr, field + " needs a schema compiler: read the registry with package loader, " +
			"or build it with facts.WithSchemaCompiler(loader.CompileSchema)"}
	}
	sch, sptr, err := r.compile(field, tool, raw)
	switch {
	case err != nil:
		return nil, &RegistryError{ptr + sptr, err.Error()}
	case sch == nil:
		return nil, &RegistryError{ptr, field + ": the schema compiler returned no schema"}
	}
	return &ArgsSchema{sch}, nil
}

// NewRegistry validates and indexes a registry, with its options. It
// copies its arguments. Errors are *RegistryError values joined with
// errors.Join, each naming the JSON pointer of the offending entry.
func NewRegistry(caps []Capability, tools []Tool, opts ...RegistryOption) (*Registry, error) {
	r := &Registry{
		caps:        slices.Clone(caps),
		tools:       slices.Clone(tools),
		capIndex:    make(map[string]int, len(caps)),
		toolIndex:   make(map[string]int, len(tools)),
		deferredSet: map[string]struct{}{},
		capTools:    map[string][]string{},
		ownedTools:  map[string][]string{},
	}
	var errs []error
	for _, o := range opts {
		if err := o(r); err != nil {
			errs = append(errs, err)
		}
	}
	for i, c := range r.caps {
		r.caps[i].Labels = normLabels(c.Labels)
		errs = append(errs, labelErrors(fmt.Sprintf("/capabilities/%d/labels", i), c.Labels)...)
		errs = append(errs, c.FlowLabels.errors(fmt.Sprintf("/capabilities/%d", i))...)
		r.usesFlowLabels = r.usesFlowLabels || c.FlowLabels != FlowLabels{}
		ptr := fmt.Sprintf("/capabilities/%d/id", i)
		if c.ID == "" {
			msg := "capability id must be a non-empty string"
			if c.DeferLoading {
				msg = "a deferred capability must have an explicit, non-empty id"
			}
			errs = append(errs, &RegistryError{ptr, msg})
			continue
		}
		if j, dup := r.capIndex[c.ID]; dup {
			errs = append(errs, &RegistryError{ptr, fmt.Sprintf("duplicate capability id %q (first at /capabilities/%d)", c.ID, j)})
			continue
		}
		r.capIndex[c.ID] = i
		if c.DeferLoading {
			r.deferred = append(r.deferred, c.ID)
			r.deferredSet[c.ID] = struct{}{}
		} else {
			r.always = append(r.always, c.ID)
		}
	}
	r.gates = make([]Gate, len(r.tools))
	for i, t := range r.tools {
		ptr := fmt.Sprintf("/tools/%d", i)
		errs = append(errs, labelErrors(ptr+"/labels", t.Labels)...)
		labels := slices.Clone(t.Labels)
		errs = append(errs, t.FlowLabels.errors(ptr)...)
		r.usesFlowLabels = r.usesFlowLabels || t.FlowLabels != FlowLabels{}
		if j, ok := r.capIndex[t.Capability]; ok && t.Capability != "" {
			labels = append(labels, r.caps[j].Labels...)
			r.tools[i].FlowLabels = t.FlowLabels.inherit(r.caps[j].FlowLabels)
		}
		r.tools[i].Labels = normLabels(labels)
		switch {
		case t.Name == "":
			errs = append(errs, &RegistryError{ptr + "/name", "tool name must be a non-empty string"})
			continue
		case t.Name == LoadCapabilityTool:
			errs = append(errs, &RegistryError{ptr + "/name", "tool name 'load_capability' is reserved for deferred capability loading"})
			continue
		case t.Name == SearchTool:
			errs = append(errs, &RegistryError{ptr + "/name", "tool name 'search_tools' is reserved for tool search"})
			continue
		}
		if j, dup := r.toolIndex[t.Name]; dup {
			errs = append(errs, &RegistryError{ptr + "/name", fmt.Sprintf("duplicate tool name %q (first at /tools/%d)", t.Name, j)})
			continue
		}
		if t.ParametersJSONSchema != nil {
			if r.schemas == nil {
				r.schemas = make([]*ArgsSchema, len(r.tools))
			}
			sch, err := r.compileSchema(ptr+"/parameters_json_schema", "parameters_json_schema", i, t.ParametersJSONSchema)
			if err != nil {
				errs = append(errs, err)
			}
			r.schemas[i] = sch
		}
		if t.MaxRetries != nil && *t.MaxRetries < 0 {
			errs = append(errs, &RegistryError{ptr + "/max_retries", "max_retries must be >= 0"})
		}
		if t.Capability != "" {
			if _, ok := r.capIndex[t.Capability]; !ok {
				errs = append(errs, &RegistryError{ptr + "/capability", fmt.Sprintf("tool %q names unknown capability %q", t.Name, t.Capability)})
				continue
			}
		}
		r.toolIndex[t.Name] = i
		if t.Capability != "" {
			r.ownedTools[t.Capability] = append(r.ownedTools[t.Capability], t.Name)
		}
		_, capDeferred := r.deferredSet[t.Capability]
		switch {
		case t.Capability != "" && capDeferred:
			// CapabilityOwnedToolset forces defer_loading on.
			r.tools[i].DeferLoading = true
			r.gates[i] = GateCapability
			r.capTools[t.Capability] = append(r.capTools[t.Capability], t.Name)
		case t.DeferLoading:
			r.gates[i] = GateSearch
			r.searchGated = append(r.searchGated, t.Name)
		default:
			r.gates[i] = GateNone
			r.alwaysTools = append(r.alwaysTools, t.Name)
		}
		r.toolNames = append(r.toolNames, t.Name)
		if t.RequiresApproval || t.Capability != "" && r.caps[r.capIndex[t.Capability]].RequiresApproval {
			r.approval = append(r.approval, t.Name)
		}
	}
	if r.ctxRaw != nil {
		sch, err := r.compileSchema("/context_schema", "context_schema", -1, r.ctxRaw)
		if err != nil {
			errs = append(errs, err)
		}
		r.ctxSchema = sch
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Strings(r.deferred)
	sort.Strings(r.always)
	sort.Strings(r.searchGated)
	sort.Strings(r.alwaysTools)
	sort.Strings(r.toolNames)
	sort.Strings(r.approval)
	r.rank = make(map[string]int, len(r.toolNames))
	for i, n := range r.toolNames {
		r.rank[n] = i
	}
	for _, names := range r.capTools {
		sort.Strings(names)
	}
	for _, names := range r.ownedTools {
		sort.Strings(names)
	}
	return r, nil
}

// labelErrors refuses an empty label: it would match nothing a policy
// names and hide a typo.
func labelErrors(ptr string, labels []string) []error {
	var errs []error
	for j, l := range labels {
		if l == "" {
			errs = append(errs, &RegistryError{fmt.Sprintf("%s/%d", ptr, j), "a label must be a non-empty string"})
		}
	}
	return errs
}

// normLabels returns labels sorted, without duplicates, never nil.
func normLabels(labels []string) []string {
	out := slices.Clone(labels)
	if out == nil {
		out = []string{}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// Capabilities returns the registered capabilities in registry order,
// their labels sorted.
func (r *Registry) Capabilities() []Capability { return r.caps }

// Tools returns the registered tools in registry order, with their effective
// labels (their own and their capability's, sorted) and with DeferLoading
// forced on for tools of deferred capabilities.
func (r *Registry) Tools() []Tool { return r.tools }

// Tool looks a tool up by name.
func (r *Registry) Tool(name string) (Tool, bool) {
	i, ok := r.toolIndex[name]
	if !ok {
		return Tool{}, false
	}
	return r.tools[i], true
}

// ArgsSchema returns the compiled parameters_json_schema of the named
// tool, or nil when the tool has none (or is not a registry tool).
func (r *Registry) ArgsSchema(name string) *ArgsSchema {
	i, ok := r.toolIndex[name]
	if !ok || r.schemas == nil {
		return nil
	}
	return r.schemas[i]
}

// HasArgsSchemas reports whether any registry tool has a
// parameters_json_schema.
func (r *Registry) HasArgsSchemas() bool { return r.schemas != nil }

// Capability looks a capability up by id.
func (r *Registry) Capability(id string) (Capability, bool) {
	i, ok := r.capIndex[id]
	if !ok {
		return Capability{}, false
	}
	return r.caps[i], true
}

// GateOf returns what gates the named tool; ok is false for an unknown name.
func (r *Registry) GateOf(name string) (g Gate, ok bool) {
	i, ok := r.toolIndex[name]
	if !ok {
		return GateNone, false
	}
	return r.gates[i], true
}

// ApprovalTools returns the tools whose every call needs a person's
// approval: those marked requires_approval and those of a capability
// marked so, sorted (nil when none is).
func (r *Registry) ApprovalTools() []string { return r.approval }

// ApprovalWhy says why the registry asks approval for the named tool: its
// own requires_approval or its capability's ("" when it does not).
func (r *Registry) ApprovalWhy(name string) string {
	i, ok := r.toolIndex[name]
	if !ok {
		return ""
	}
	t := r.tools[i]
	switch {
	case t.RequiresApproval:
		return fmt.Sprintf("tool %q is marked requires_approval", name)
	case t.Capability != "" && r.caps[r.capIndex[t.Capability]].RequiresApproval:
		return fmt.Sprintf("tool %q belongs to capability %q, which is marked requires_approval", name, t.Capability)
	}
	return ""
}

// ContextSchema returns the registry's compiled context_schema, or nil
// for none.
func (r *Registry) ContextSchema() *ArgsSchema { return r.ctxSchema }

// ContextSchemaJSON returns the registry's context_schema as JSON, or nil
// for none.
func (r *Registry) ContextSchemaJSON() []byte { return r.ctxRaw }

// ValidateContext validates a request context's JSON (input.context)
// against the registry's context_schema: nil when it validates or there
// is none, else the problems, each with the JSON pointer inside the
// context, at most MaxArgsProblems, and how many more there were.
func (r *Registry) ValidateContext(raw []byte) (probs []ArgsProblem, omitted int) {
	if r.ctxSchema == nil {
		return nil, 0
	}
	v, p := jsonvalue.Decode(raw)
	if p != nil {
		return []ArgsProblem{*problemOf(p)}, 0
	}
	return r.ctxSchema.validate(v)
}

// ToolNames returns every registry tool name, sorted.
func (r *Registry) ToolNames() []string { return r.toolNames }

// DeferredCapabilities returns the ids of configured-deferred capabilities, sorted.
func (r *Registry) DeferredCapabilities() []string { return r.deferred }

// AlwaysOnCapabilities returns the ids of always-on capabilities, sorted.
func (r *Registry) AlwaysOnCapabilities() []string { return r.always }

// IsDeferred reports whether id is a configured-deferred capability.
func (r *Registry) IsDeferred(id string) bool {
	_, ok := r.deferredSet[id]
	return ok
}

// IsRegistered reports whether id is a registered capability.
func (r *Registry) IsRegistered(id string) bool {
	_, ok := r.capIndex[id]
	return ok
}

// SearchGatedTools returns the search corpus (spec S1), sorted.
func (r *Registry) SearchGatedTools() []string { return r.searchGated }

// AlwaysAvailableTools returns the tools that need no reveal, sorted.
func (r *Registry) AlwaysAvailableTools() []string { return r.alwaysTools }

// CapabilityTools returns the sorted tools owned by a deferred capability.
func (r *Registry) CapabilityTools(id string) []string { return r.capTools[id] }

// OwnedTools returns the sorted tools owned by a capability, deferred or
// always-on (none for an id the registry does not have).
func (r *Registry) OwnedTools(id string) []string { return r.ownedTools[id] }

// HasLoadCapability reports whether the framework tool load_capability is
// present: some capability is configured-deferred.
func (r *Registry) HasLoadCapability() bool { return len(r.deferred) > 0 }

// activeFor returns always ∪ (loaded ∩ deferred) ∪ extra, sorted. loaded
// and extra are sets of ids.
func (r *Registry) activeFor(loaded, extra []string) []string {
	out := make([]string, 0, len(r.always)+len(loaded)+len(extra))
	out = append(out, r.always...)
	for _, id := range loaded {
		if r.IsDeferred(id) {
			out = append(out, id)
		}
	}
	out = append(out, extra...)
	sort.Strings(out)
	return slices.Compact(out)
}
