package contract

import "encoding/json"

// The documents the engine and a policy exchange, defined once. Input is
// the input document of the decision query and of the operator rules,
// FilterInput that of a capability filter, Result the object the decision
// query answers. Each field's json tag is its key, its doc comment its
// meaning (docs/input.md's tables are generated from these comments), and
// its Go type its JSON type, with these tags:
//
//   - rego:"set": a list of names the engine hands as a Rego set (JSON
//     shows a sorted array); the shipped gate converts a JSON document's
//     array there into a set (policycheck.lib.gate._input_set_paths is
//     generated from these tags), and the policy answers one there.
//   - jsontype:"...": the type the docs show, where the Go type (any,
//     json.RawMessage: the operator's or the model's value) says less.
//   - values:"...": for a map keyed by names, the meaning of each value.
//   - names:"tool" or names:"capability": the field holds registry tool
//     names or capability ids (a string: one; a list: each element; a
//     map: each key). policycheck check compares the string literals a
//     rule compares with such a field against the registries given.
//   - omitempty in the json tag: the key is optional (present only when
//     its comment says).
//
// The operator contract's path tables (which input fields a rule may
// read, which keys a decision may hold) are derived from these types, and
// the engine's builder (buildInput), reader (FactsFromInput) and decoder
// (decodeResult) are held to them by tests in both directions.

// Input is the input document of the decision query
// (data.policycheck.availability.decision) and of every rule in
// policycheck.rules.*; deny and require_approval additionally see the
// call being judged as input.call, one element of Dispatch.Calls.
type Input struct {
	// What the model was shown, over the conservative post-compaction window of the whole history.
	Facts InputFacts `json:"facts"`
	// The same facts over the history the next request sends, after the reference's cleaning.
	Outgoing InputOutgoing `json:"outgoing"`
	// What the capability filters did; the policy never runs a filter itself.
	Filters InputFilters `json:"filters"`
	// The request context (`--context`, the API's `context`): whatever the operator sends, valid under the registry's `context_schema` when it has one; `{}` when none.
	Context any `json:"context" jsontype:"object"`
	// Present only when the history ends with a model response: the response being dispatched.
	Dispatch *InputDispatch `json:"dispatch,omitempty"`
}

// InputFacts is input.facts.
type InputFacts struct {
	// Start of the post-compaction window: the first message and part the facts read.
	Window Position `json:"window"`
	// Tool names revealed in the window: by searches (typed, native or legacy search returns) and by `tool-availability-delta` parts, such as the delta a capability load writes with the tools it adds (raw: may name tools that do not exist).
	Discovered []string `json:"discovered" rego:"set" names:"tool"`
	// Capability ids loaded in the window (raw: may name unregistered ids).
	Loaded []string `json:"loaded" rego:"set" names:"capability"`
	// Tools with a successful `tool-return` in the window: the input of sequence rules.
	Returned []string `json:"returned" rego:"set" names:"tool"`
	// Always-on capabilities plus the loaded deferred ones: the next request's active set.
	ActiveCapabilities []string `json:"active_capabilities" rego:"set" names:"capability"`
	// Present only when a loaded policy reads it (the engine builds it on demand). Tool name -> its calls in the whole history (before a compaction too), in history order, the dispatched response's included: `lib.call_count`, `lib.call_count_within` and `lib.arg_sum` read it (see "Counting calls").
	ToolCalls map[string][]InputToolCall `json:"tool_calls,omitempty" names:"tool" values:"The calls of one tool (the key is the tool name, as the model wrote it; framework tools included, provider-side builtin tools not)."`
	// Present only when `tool_calls` is and the history holds a provider-side (builtin) tool return: each `builtin-tool-return` part without a `tool_kind` of the whole history (a provider's native tool search names the agent's own tools: not listed), the dispatched response's included, in history order. Content the provider's own tools (a web search, a fetch) showed the model: a call's `window` counts it (and is built without this list: the engine writes it, with `tool_calls`, only for a policy that reads `tool_calls`).
	BuiltinReturns []InputBuiltinReturn `json:"builtin_returns,omitempty"`
	// Present only when `tool_calls` is and the history holds a return that answers no call: each `tool-return` part (and each `retry-prompt` naming a tool) of the whole history that no earlier `tool-call` carries the `tool_call_id` of, or that has none (a history processor cut its call; a provider rewrote the id), in history order. The model was shown it: a call's `window` counts it.
	UnpairedReturns []InputUnpairedReturn `json:"unpaired_returns,omitempty"`
	// Present only when a loaded policy reads the flows. True when the index of return strings the flows were found in reached its cap (`--flow-index-cap`, 8 MiB by default) and left the later returns out, or when the matching of a call's arguments stopped at one of its bounds (bytes compared; 4,096 flows a call, 16,384 a response: docs/flows.md): a flow from them is not reported, so a rule that lets a call through for want of a flow should fail closed (`lib.flows_complete`).
	FlowIndexTruncated bool `json:"flow_index_truncated,omitempty"`
}

// Position is a message and part index.
type Position struct {
	// Message index.
	Message int `json:"message"`
	// Part index within that message.
	Part int `json:"part"`
}

// InputBuiltinReturn is one return of input.facts.builtin_returns.
type InputBuiltinReturn struct {
	// The builtin tool's name, as the provider wrote it (not a registry tool unless the registry has that name).
	Tool string `json:"tool"`
	// The return's id.
	ToolCallID *string `json:"tool_call_id"`
	// Index of the message holding the return.
	Message int `json:"message"`
	// Part index within that message.
	Part int `json:"part"`
}

// InputUnpairedReturn is one return of input.facts.unpaired_returns.
type InputUnpairedReturn struct {
	// The tool the return names (its `tool_name`).
	Tool string `json:"tool"`
	// The return's id.
	ToolCallID *string `json:"tool_call_id"`
	// Index of the message holding the return.
	Message int `json:"message"`
	// Part index within that message.
	Part int `json:"part"`
}

// InputToolCall is one call of input.facts.tool_calls.
type InputToolCall struct {
	// The call's id.
	ToolCallID *string `json:"tool_call_id"`
	// Index of the message holding the call.
	Message int `json:"message"`
	// Part index within that message.
	Part int `json:"part"`
	// That message's `timestamp`, as the history wrote it (RFC 3339 string, Unix seconds, or null).
	Timestamp json.RawMessage `json:"timestamp" jsontype:"string, number or null"`
	// `returned` (the first outcome after the call with its id is a `tool-return`, whatever that return's own outcome), `retried` (a `retry-prompt`: the call did not execute) or `pending` (none yet, or the call has no id; the dispatched response's calls).
	Outcome string `json:"outcome"`
	// The call's arguments, as `dispatch.calls[].args` reads them.
	Args any `json:"args"`
}

// InputOutgoing is input.outgoing.
type InputOutgoing struct {
	// Tool names revealed (searches and availability deltas) in the outgoing history.
	Discovered []string `json:"discovered" rego:"set" names:"tool"`
	// Capability ids loaded in the outgoing history.
	Loaded []string `json:"loaded" rego:"set" names:"capability"`
}

// InputFilters is input.filters.
type InputFilters struct {
	// Filters of the next request's active capabilities.
	Next InputFilterResult `json:"next"`
	// Filters of the capabilities active at dispatch (anchored evidence included).
	Dispatch InputFilterResult `json:"dispatch"`
	// Every filter failure of either set: non-empty means the decision fails closed.
	Errors []InputFilterError `json:"errors"`
}

// InputFilterResult is what the filters of one active set did.
type InputFilterResult struct {
	// Registry tools some filter of this set dropped.
	Dropped []string `json:"dropped" rego:"set" names:"tool"`
	// The filters of this set that failed (error, timeout, not a set of tool names).
	Errors []InputFilterError `json:"errors"`
}

// InputFilterError is one failed filter.
type InputFilterError struct {
	// The capability whose filter failed.
	Capability string `json:"capability" names:"capability"`
	// Why it failed.
	Message string `json:"message"`
}

// InputDispatch is input.dispatch.
type InputDispatch struct {
	// The response's `provider_name`.
	Provider *string `json:"provider"`
	// Start of the provider-anchored window of the response.
	Window Position `json:"window"`
	// Capability ids loaded before the response (a load in the response does not count).
	Loaded []string `json:"loaded" rego:"set" names:"capability"`
	// What the serving provider still sees beyond the conservative window.
	Evidence InputEvidence `json:"evidence"`
	// Capabilities active at dispatch: their filters ran for `filters.dispatch`.
	ActiveCapabilities []string `json:"active_capabilities" rego:"set" names:"capability"`
	// Reveals and loads inside the dispatched response itself.
	SameResponse InputSameResponse `json:"same_response"`
	// The response's tool calls, in order; `deny` rules see one of them as `input.call`.
	Calls []InputCall `json:"calls"`
}

// InputEvidence is input.dispatch.evidence.
type InputEvidence struct {
	// Tool names revealed only in the anchored window.
	Discovered []string `json:"discovered" rego:"set" names:"tool"`
	// Deferred capabilities loaded only in the anchored window.
	Loaded []string `json:"loaded" rego:"set" names:"capability"`
}

// InputSameResponse is input.dispatch.same_response.
type InputSameResponse struct {
	// Tool names a provider-side search in the response revealed (these count).
	Revealed []string `json:"revealed" rego:"set" names:"tool"`
	// Capabilities the response asks to load (these do not count yet).
	PendingLoads []string `json:"pending_loads" rego:"set" names:"capability"`
}

// InputCall is one call of input.dispatch.calls, and input.call.
type InputCall struct {
	// Position among the calls (0-based).
	Index int `json:"index"`
	// Part index in the response.
	Part int `json:"part"`
	// The tool name the model called.
	Tool string `json:"tool" names:"tool"`
	// The call's id, as in the history.
	ToolCallID *string `json:"tool_call_id"`
	// `tool-search`, `capability-load` or null for an ordinary tool.
	ToolKind *string `json:"tool_kind"`
	// The arguments the call would execute with: the model's (an object; a string holding a JSON object is parsed; else as sent), or the `override_args` of the approval bound to the call.
	Args any `json:"args"`
	// Present only when an approval is bound to the call: its `tool_call_id`, tool and arguments are what the approver was shown (the digest matches). `require_approval` and `deny` rules read it as `input.call.approval`.
	Approval *InputApproval `json:"approval,omitempty"`
	// Present (true) only when the call's arguments fail its tool's `parameters_json_schema`, or cannot be read exactly one way whatever the schema (a key twice, data after string arguments' JSON, a number past 400 digits or an exponent past ±400; docs/input.md): its `args` are then null and it carries no `approval`; its verdict is `invalid_args`, and no `deny` or `require_approval` rule is evaluated on it.
	InvalidArgs bool `json:"invalid_args,omitempty"`
	// Present only when a loaded policy reads it (the engine builds it on demand; `input.call.flows` in a rule). One entry per argument value that came from an earlier source, and per source it came from: a string of the arguments that equals or contains a string of at least `--flow-min-length` bytes (8 by default) of a `tool-return`, `builtin-tool-return`, `user-prompt` or `system-prompt` part's content, or of a `retry-prompt` part that names a tool, or (with `--flow-tokens`) holds a token of one, or a number equal to a number of five or more significant digits there (see docs/flows.md). In the order of the arguments (keys sorted), then of the sources.
	Flows []InputFlow `json:"flows,omitempty"`
	// Present only when a loaded policy reads it (`input.call.window`; the stock `lib.trusted_action` does). What the model's window held before the dispatched response: every tool call of the history whose return (or retry prompt) the model was shown counts with its tool's registry label, a return before a compaction too (the summary carries its label: taint survives compaction). Provider-side (builtin) returns count too (those `facts.builtin_returns` lists), the dispatched response's own included wherever they stand in it, with the label of their tool's name (untrusted unless the registry labels that name); a native tool search's return does not (it names the agent's own tools). So does a return that answers no call (those `facts.unpaired_returns` lists), with the label of the tool it names. Its `sources` are one per tool, not per call, so that the window of a long session stays as small as its tools; `input.facts.tool_calls` is not written for it (only for a policy that reads that). A decision log's input carries the window, and a replay of that input without `tool_calls` decides on the window as logged. See docs/registry.md, "Integrity and confidentiality".
	Window *InputWindow `json:"window,omitempty"`
	// Present only when a loaded policy reads it (`input.call.args_integrity`; the stock `lib.trusted_action` does), and not on a call with `invalid_args`. JSON pointer of each string, number, boolean or null of the call's own arguments (keys sorted) → `trusted` (it equals a string or number of a trusted source, or is as a whole an identifier of one: an `exact` flow, or a `whole` `token` flow of class `email`, `url`, `iban` or `digits`, from the user, the system prompt or a trusted tool, unless that tool's return (or a prompt part beside tool returns) repeats what the agent sent: the arguments of a tool call before it, of any tool and `tool_call_id`, hold the value, a string compared by its letters and digits lower-cased, a number by its value (or as a plain decimal inside a string); or no call of its tool with its `tool_call_id` is in the history), `declassified` (the tool's `parameters_json_schema` constrains it to an enum or const, a boolean, or an integer bounded on both sides; or it is a boolean or null), or `untrusted` (anything else: from an untrusted source, contained in a longer string, or from no source the flows see). A value under an object key the schema does not name in `properties` (a key of `additionalProperties` or `patternProperties`, any key of a tool without a schema: the model chose it) is `untrusted` whatever it is, and an empty object or array under such a key is listed too, `untrusted`.
	ArgsIntegrity any `json:"args_integrity,omitempty" jsontype:"object"`
}

// InputWindow is input.call.window.
type InputWindow struct {
	// Some return the model was shown is untrusted.
	Untrusted bool `json:"untrusted"`
	// The highest confidentiality of those returns (`public` when none).
	Confidentiality string `json:"confidentiality"`
	// The tools whose returns the model was shown are untrusted, one entry per tool (however many of its calls returned), in history order of each tool's latest return.
	Sources []InputWindowSource `json:"sources"`
}

// InputWindowSource is one element of input.call.window.sources: one tool whose returns the window held, with its latest.
type InputWindowSource struct {
	// `tool-return` (the returns of the agent's own tool calls), `builtin-tool-return` (a provider-side tool's returns: a web search or fetch the provider ran itself) or `unpaired-return` (the tool's returns that answer no call of the history, those `facts.unpaired_returns` lists). A tool's returns of two kinds are two sources.
	Kind string `json:"kind"`
	// The tool whose returns they are.
	Tool string `json:"tool" names:"tool"`
	// How many of the tool's returns the model was shown (calls with an outcome; for a `builtin-tool-return`, returns).
	Count int `json:"count"`
	// The `tool_call_id` of the latest of them.
	ToolCallID *string `json:"tool_call_id"`
	// Index of the message holding the call the latest return answered; for a `builtin-tool-return` or an `unpaired-return`, of the message holding the latest return itself.
	Message int `json:"message"`
	// Part index of that call (of that return, for a `builtin-tool-return` or a return that answers no call).
	Part int `json:"part"`
	// Some of those calls (returns) lie before the window's start: the model saw their returns through a compaction summary, which carries their label.
	Summarised bool `json:"summarised"`
	// The returns' integrity (`untrusted`).
	Integrity string `json:"integrity"`
	// The returns' confidentiality.
	Confidentiality string `json:"confidentiality"`
}

// InputFlow is one entry of input.call.flows.
type InputFlow struct {
	// JSON pointer of the value in the call's own arguments (`""` for arguments that are themselves the value); an approval's `override_args` are not searched.
	Path string `json:"path"`
	// `exact` (the value equals a string or number of the source), `contains` (the value contains a string of the source) or, only with `--flow-tokens`, `token` (neither, but the value holds a token of a string of the source: `token` names its class).
	Match string `json:"match"`
	// Null unless `match` is `token`: the token's class, `email`, `url`, `iban`, `digits` (identifiers, compared normalised), `pair_value`, `line` or `run` (compared as they are); the first of them in that order when the value held tokens of several (docs/flows.md).
	Token *string `json:"token"`
	// Whether the value as a whole equals the source's string or token: `true` for `exact`, `false` for `contains`, and for `token` `true` when the whole value is one token of the class (an identifier from its first byte to its last, equal once normalised; a `pair_value`, `line` or `run` equal as it is) rather than holds it among other text.
	Whole bool `json:"whole"`
	// The part the value came from, anywhere in the history (before a compaction too; in the dispatched response itself, a provider-side return before the call).
	Source InputFlowSource `json:"source"`
}

// InputFlowSource is input.call.flows[].source.
type InputFlowSource struct {
	// The source part's `part_kind`: `tool-return`, `builtin-tool-return` (a provider-side return, kept distinct), `user-prompt`, `system-prompt` or `retry-prompt` (a tool's ModelRetry message or its arguments' validation error, put before the model as a return is).
	Kind string `json:"kind"`
	// The return's `tool_call_id`; null for a prompt.
	ToolCallID *string `json:"tool_call_id"`
	// The return's `tool_name`; null for a prompt.
	Tool *string `json:"tool"`
	// That tool's registry labels, sorted (its own and its capability's; empty for a tool the registry does not have, and for a prompt).
	Labels []string `json:"labels"`
	// Index of the message holding the source part.
	Message int `json:"message"`
	// Part index within that message.
	Part int `json:"part"`
	// Present only for a prompt part whose request also holds `tool-return` or `retry-prompt` parts: those tools' names, in message order. pydantic-ai puts what a tool returns beside its return value (a `ToolReturn`'s content, the files a tool returns) in a user-prompt part of that request, so the part carries those tools' labels too.
	Beside []string `json:"beside,omitempty" names:"tool"`
	// Present only when the registry sets flow labels: the source's integrity (`trusted`, `untrusted`): a prompt part's is `trusted` (joined with the labels of the tools it is `beside`), a return's its tool's (registry default `untrusted`), a retry prompt's `untrusted` whatever its tool (it quotes what the model sent).
	Integrity string `json:"integrity,omitempty"`
	// Present only when the registry sets flow labels: the source's confidentiality (`public`, `internal`, `confidential`, `secret`), its tool's (registry default `internal`).
	Confidentiality string `json:"confidentiality,omitempty"`
}

// InputApproval is input.call.approval.
type InputApproval struct {
	// `tool-approved` or `tool-denied`.
	Kind string `json:"kind"`
	// The call's digest (`sha256:…`), which the approval carried.
	Digest string `json:"digest"`
	// Who answered, as the harness says (may be empty: count distinct names to ask for two approvers).
	Approvers []string `json:"approvers"`
	// A denial's message for the model.
	Message string `json:"message,omitempty"`
	// The model's arguments, which the approver was shown.
	CallArgs any `json:"call_args"`
	// The approver's edited arguments, when given (also `args`).
	OverrideArgs any `json:"override_args,omitempty" jsontype:"object"`
}

// FilterInput is the input document of a capability filter
// (policycheck.capabilities.<id>.prepare_tools).
type FilterInput struct {
	// Every registry tool (never the framework tools), built once per registry revision.
	Tools []FilterTool `json:"tools"`
	// The request context, as for the decision.
	Context any `json:"context" jsontype:"object"`
	// Sorted ids of the capabilities active for the decision being made (next request or dispatch).
	ActiveCapabilities []string `json:"active_capabilities" names:"capability"`
}

// FilterTool is one element of a filter's input.tools.
type FilterTool struct {
	// Tool name.
	Name string `json:"name" names:"tool"`
	// Owning capability id.
	Capability *string `json:"capability" names:"capability"`
	// The tool's own `defer_loading` flag.
	DeferLoading bool `json:"defer_loading"`
}

// Result is the policy's decision document: the value of
// policycheck.availability.decision (or decision_from_sets), everything
// the engine reads from the policy. A key without omitempty is required.
type Result struct {
	// The tools callable on the next request.
	Available []string `json:"available" rego:"set"`
	// The tools whose schemas go to the model on the next request (the engine keeps them within available).
	Advertised []string `json:"advertised" rego:"set"`
	// The tools the calls of the dispatched response may execute.
	DispatchAvailable []string `json:"dispatch_available" rego:"set"`
	// One verdict per call of the dispatched response, in order.
	Verdicts []Verdict `json:"verdicts"`
	// The tools enforced operator rules hid for this request.
	Hidden []string `json:"hidden,omitempty" rego:"set"`
	// The tools log-only operator rules would hide (reported, not enforced).
	WouldHide []string `json:"would_hide,omitempty" rego:"set"`
	// Operator rule values of a refused shape the gate found at run time: the decision fails closed naming the rule.
	RuleErrors []FlaggedValue `json:"rule_errors,omitempty"`
}

// Verdict is one element of Result.Verdicts.
type Verdict struct {
	// `execute`, `not_available_yet`, `unknown_tool`, `denied`, `approval_required` or `invalid_args`.
	Verdict string `json:"verdict"`
	// The rule that decided (`gate`, `unknown_tool`, `deny`, `filter_error`, `approval_denied`, `require_approval`, `args`).
	Rule string `json:"rule,omitempty"`
	// The operator-facing reason.
	Reason string `json:"reason,omitempty"`
	// On not_available_yet: what the call needs first.
	Form *VerdictForm `json:"form,omitempty"`
	// On unknown_tool: what removed the called tool.
	By []RemovedBy `json:"by,omitempty"`
	// On denied by an operator rule: its denials.
	Denials []RuleAnswer `json:"denials,omitempty"`
	// On approval_required: the approval requests.
	Requests []RuleAnswer `json:"requests,omitempty"`
	// On execute: the denials of the log-only rules (reported, not enforced).
	WouldDeny []RuleAnswer `json:"would_deny,omitempty"`
}

// VerdictForm is a not_available_yet verdict's form.
type VerdictForm struct {
	// The capability whose load makes the tool available.
	Capability string `json:"capability,omitempty"`
}

// RemovedBy is one thing that removed a called tool.
type RemovedBy struct {
	// `prepare_tools` or `hide`.
	Rule string `json:"rule,omitempty"`
	// The hiding rules package (below policycheck.rules).
	Package string `json:"package,omitempty"`
}

// RuleAnswer is a denial or approval request of an operator rules
// package, or, carrying value, a rule value of a refused shape the gate
// flagged (then read as a FlaggedValue).
type RuleAnswer struct {
	// The rules package (below policycheck.rules).
	Package string `json:"package,omitempty"`
	// The operator-facing reason.
	Reason string `json:"reason,omitempty"`
	// The model-facing (or approver-facing) message.
	Message string `json:"message,omitempty"`
	// With value: the flagged rule (`deny`, `require_approval`).
	Rule string `json:"rule,omitempty"`
	// Present only on a flagged value: the value, as the rule yielded it.
	Value any `json:"value,omitempty"`
}

// FlaggedValue is an operator rule value of a refused shape the gate
// found at run time.
type FlaggedValue struct {
	// The rules package (below policycheck.rules).
	Package string `json:"package,omitempty"`
	// The rule (`hide`, `deny`, `require_approval`).
	Rule string `json:"rule,omitempty"`
	// The value, as the rule yielded it.
	Value any `json:"value,omitempty"`
}
