// Package facts derives, in pure Go, what an agent's model has been shown:
// the facts that policycheck's Rego policies decide on.
//
// It is the map of docs/semantics.md (windows, reveals, loads, anchored
// evidence) and of the facts of docs/decision.md:
//
//   - [History], [Message] and [Part] model a pydantic-ai message history
//     after decoding (package loader turns the wire JSON into this model;
//     this package never parses a history). It imports neither
//     encoding/json, nor a JSON Schema library, nor OPA: the few JSON
//     bytes it must read (a call's arguments, [ReadArgs]; a request's
//     context, [Registry.ValidateContext]; the contents of tool returns,
//     for flows) are read by its internal package facts/internal/jsonvalue
//     with the module's one JSON scanner (and, for a return's content the
//     scanner refuses, encoding/json, as the flows have always read it).
//   - [Registry] is the shared, read-only tool and capability
//     configuration. It is immutable once built and safe for concurrent
//     use. It holds each tool's parameters_json_schema and the
//     context_schema as a compiled [Schema], which package loader
//     compiles as it reads the registry ([WithSchemaCompiler],
//     loader.CompileSchema); [ArgsSchema] validates a call's arguments
//     with it as pydantic-ai does before it runs a tool (the engine's
//     invalid_args verdict). A [Tracker] is the state of one growing
//     history, not a cache.
//   - [Derive] computes [Facts] for a whole history by transcribing the
//     reference rules literally: the conservative post-compaction window
//     (§2.1), the provider-anchored window of the response being dispatched
//     (§2.3), discovered tool names (§3), loaded capability ids (§4), the
//     anchored evidence (§5) and the active capability sets.
//   - [Tracker] ([NewTracker]) yields the same [Facts] incrementally for a
//     history that grows by appended messages, at a cost per appended
//     message that does not depend on the length of the history already
//     seen.
//   - Both take the same options ([Option]). [Options] asks for the facts
//     only some policies read: the tool calls of the whole history
//     ([ToolCalls]), what the model was shown of each tool's returns
//     ([ToolReturns], kept by the Tracker as messages arrive: the
//     engine's input.call.window) and the flows of the dispatched calls ([Flow]: which
//     argument values equal or contain a string, or equal a number, of an
//     earlier tool return or prompt, or, with Options.FlowTokens, hold one
//     of its tokens; flows.go, flowtokens.go), whose index of source
//     strings the Tracker builds as messages arrive, bounded by a cap.
//     Derive, which knows the dispatched calls' arguments before it
//     reads any return, indexes only the returns that may hold a match
//     of them (flowfilter.go), with the same flows and truncation.
//   - [SentValues] asks of a list of tool calls (a decision's
//     input.facts.tool_calls) what [Flow].EchoOfTheAgent asks of the
//     index: whether a call before a return sent a value, under the
//     flows' comparison budgets (sentvalues.go).
//   - [VouchedBy] makes a reveal or a load count only where a [Voucher]
//     vouches for the call that produced it (verified evidence):
//     [VouchHistory] removes the rest, and Derive and the Tracker given
//     VouchedBy derive without it and list it in [Facts].Unvouched. This
//     package finds each piece of evidence and its call; what vouches (a
//     receipt, a run's judgement) is the engine's.
//
// Facts are raw evidence, not verdicts: deciding which tools are available,
// advertised or callable is the policies' job (package engine).
package facts
