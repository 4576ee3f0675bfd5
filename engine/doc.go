// Package engine decides, with Rego, which tools are available, which are
// advertised and what each call of the dispatched response gets.
//
// The map:
//
//   - compile.go loads policies (the shipped defaults of package policies,
//     operator files, directories and OPA bundles), compiles them once in
//     strict mode, holds every rule the engine reads to the operator
//     contract (internal/contract), rejects filters that reach
//     nondeterministic built-ins or name unknown capabilities, and prepares
//     the decision query and one query per capability filter.
//   - warnings.go finds what loads but can never take part in a decision
//     (a module in a package the engine never reads) and reports it
//     through Engine.Warnings and OnWarning, on every compile.
//   - inventory.go names what a policy set defines (packages, rules and
//     their definitions) so that a reload can tell what a change drops.
//   - input.go puts the registry in the OPA store as data (sets the policy
//     does set algebra on, built once per registry revision), converts the
//     request context (recent ones remembered by their JSON encoding) and
//     builds each decision's small input directly as an ast.Value, in
//     the shape of contract.Input (internal/contract/document.go, the one
//     definition of the input document; docs/docs_test.go holds the two
//     together both ways); each field that comes from the facts is one
//     docField (its key, how it is written, how it is read back), which
//     inputdoc.go reads back (FactsFromInput) through a reader that
//     refuses a path contract.Input lacks. A filter's input is built
//     there too, once (filterInput, FilterInput for policycheck check).
//   - engine.go is the Engine: an immutable snapshot swapped atomically by
//     Reload, Decide (the filters of an active set through the filter
//     cache, which keeps their composed results per active set and
//     context, then one evaluation of data.policycheck.availability.decision
//     unless the decision memo of memo.go holds the result for this exact
//     input), and the fail-closed paths.
//   - result.go decodes the policy's result, contract.Result (sets read
//     by looking up the registry's names), reading no key the type lacks;
//     decision.go holds it to the invariants of invariants.go, one table
//     of every check the engine makes of the policy's answer (advertised
//     within available, an executed call names a tool of the resolved set
//     whatever the policy says, the gate before approval, ...: each with
//     its hostile-policy test), fails closed on a rule value the gate
//     flags (one of them), gives invalid_args to
//     a call whose arguments fail its tool's parameters_json_schema or
//     cannot be read exactly one way (read once and validated before
//     evaluation, readCalls; such a call reaches the
//     input with invalid_args and no arguments, and no operator rule), assembles the
//     model-facing messages of messages.go and the reasons the policy's
//     verdicts give, and says on demand what removed a tool
//     (Decision.Removed).
//   - explain.go explains a decision against the history's provenance;
//     report.go is the facts report that `policycheck facts` and the
//     sidecar's /v1/facts print.
//   - run.go is the per-run API: a Run decides step after step over an
//     incremental facts.Tracker and keeps the retry accounting of spec §8
//     X8 (budgets, the free first availability refusal, carry-over) that
//     the stateless Decide leaves out.
//
// An Engine is safe for concurrent use. Nothing a decision does changes
// the registry or the compiled policies (seed 004); the engine's three
// caches (the filter cache, the context cache and the decision memo, all
// on internal/lru) are the only shared state a decision writes, and
// their entries are pure functions of their keys. docs/caches.md lists
// every cache of policycheck with its key, bound, metric and benchmark
// (internal/caches holds the table to the code).
package engine
