// Package policytest holds scenario suites for stock `opa test`: recorded
// histories turned into the exact input document the engine hands to Rego
// (`policycheck facts --format input`), with the registry as data, under
// recorded/<suite>/<name>/{input,registry}/data.json, and Rego tests
// (*_test.rego) that replay them through the shipped policies alone:
//
//	opa test policies/ policy_test/
//
// fixture.rego converts the JSON fixtures back to the sets the policies
// read. The Go test in this package regenerates every fixture and fails
// when a committed one is stale; `go test ./policy_test -update` rewrites
// them. docs/testing.md walks through the workflow.
package policytest
