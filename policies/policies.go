// Package policies embeds the shipped Rego policies: the default
// availability policy (package policycheck.availability, the documentation
// of the rules an operator reads) and the library operators import
// (policycheck.lib, policycheck.lib.gate). Their unit tests
// (*_test.rego) sit beside them and run under stock `opa test`.
package policies

import (
	"embed"
	"io/fs"
)

//go:embed availability/*.rego lib/*.rego
var files embed.FS

// FS returns the shipped policies, tests included (*_test.rego).
func FS() fs.FS { return files }
