// Package wire is policycheck's one reader of JSON bytes. Every production
// reader of JSON input goes through it: the history decoder (package
// loader, which builds on Scanner), the checks of the other JSON inputs (a
// context, approvals, a JSON registry, each member of a sidecar request:
// Skip), the sidecar's request envelope (SkimEnvelope, envelope.go) and
// the splitting of a history among goroutines (the structural readers of
// skim.go), the indenter of
// the JSON policycheck writes (internal/ground/jsonout, StringEnd), and the flow
// index's walk of a tool return's content (package facts, Scanner).
//
// There is one grammar, checked in one place: Scanner (RFC 8259 and UTF-8
// only, the reference's number extensions where a history may hold them,
// a lone UTF-16 surrogate escape refused, a nesting limit counted as the
// reference counts it). The structural readers follow only strings and
// nesting, over bytes the Scanner has read or is about to read strictly.
//
// Errors are *Error values naming the file, the JSON pointer and the rule
// broken; package loader re-exports the type as loader.Error. The package
// is internal: its API is not a promise, and loader's public API is the
// decoder, not the scanner.
package wire
