// Package engine decides, with Rego, which tools are available, which are
// advertised and what each call of the dispatched response gets.
//
// A decision is made in four stages, each a function returning a value
// the next reads (stages.go); Decide, Explain and Run.Step call the same
// four:
//
//   - prepare → prepared: the facts (verified evidence vouched), the
//     capability filters (filter cache), the calls' arguments read once and
//     validated against their tools' schemas, the approvals bound
//     (approvals.go), the input document (input.go, contract.Input: each
//     field that comes from the facts is one docField, written there and
//     read back by inputdoc.go's FactsFromInput; a filter's input is built
//     there once, filterInput, FilterInput for policycheck check).
//   - evaluate → evaluated: the policy's result (result.go,
//     contract.Result) from the decision memo (memo.go) or one evaluation
//     of data.policycheck.availability.decision (percall.go confines an
//     error to its call), or a fault: why the decision fails closed.
//   - check → outcome: the result held to invariants.go, the one table of
//     every check the engine makes of the policy's answer, with messages
//     (messages.go) and reasons. A fault, a broken invariant or a failed
//     filter makes the outcome closed: the one place a decision fails
//     closed.
//   - assemble → *Decision: the one place a Decision is built, with what
//     became of the approvals, the receipts (WithReceipts) and a Run's
//     step section. Nothing changes a Decision once it is returned.
//
// The answers are one Decision with optional sections (step, approvals,
// unverified evidence, errors), an Explanation (explain.go) around one,
// and the FactsReport (report.go) of `policycheck facts`. compile.go
// compiles the policies once against the operator contract
// (internal/contract); warnings.go and inventory.go say what a policy
// set defines and what can never decide; engine.go is the Engine, an
// immutable snapshot swapped atomically by Reload; run.go is the per-run
// API over an incremental facts.Tracker with the retry accounting of spec
// §8 X8, computed as a step is assembled and recorded once it is answered;
// Run.Replay records a step another process decided, from its verdicts,
// without the stages (a gateway replica resuming another's session).
//
// An Engine is safe for concurrent use. Nothing a decision does changes
// the registry or the compiled policies (seed 004); the engine's caches
// (filters, contexts, the decision memo, the per-call verdict queries)
// are the only shared state a decision writes, and their entries are pure
// functions of their keys (docs/caches.md, held to the code by
// internal/caches).
package engine
