// Package policytest holds scenario suites for stock `opa test`: recorded
// histories turned into the exact input document the engine hands to Rego
// (`policycheck facts --format input`), with the registry as data, under
// recorded/<suite>/<name>/{input,registry}/data.json, and Rego tests
// (*_test.rego) that replay them through the shipped policies alone:
//
//	opa test policies/ policy_test/
//
// The policies read the fixtures' JSON arrays as the sets the engine
// hands them, so a fixture needs no conversion. The Go test in this package regenerates every fixture and fails
// when a committed one is stale; `go test ./policy_test -update` rewrites
// them. docs/testing.md walks through the workflow.
package policytest
