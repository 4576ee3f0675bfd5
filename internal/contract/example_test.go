package contract_test

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/internal/contract"
)

// A hide rule written as a boolean hides nothing the engine could read:
// the contract refuses it at its location, showing the right form.
func ExampleCheck() {
	m, err := ast.ParseModuleWithOpts("rules/ops.rego", "package policycheck.rules.ops\n\nhide if input.context.group == \"guest\"\n",
		ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		panic(err)
	}
	c := ast.NewCompiler()
	c.Compile(map[string]*ast.Module{"rules/ops.rego": m})
	probs, _ := contract.Check(c)
	for _, p := range probs {
		fmt.Printf("%s:%d:%d: %s\n", p.File, p.Row, p.Col, p.Code)
	}
	// Output:
	// rules/ops.rego:3:1: rule_shape
}
