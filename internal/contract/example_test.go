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

// Problems print by place: file, then row, then column.
func ExampleSortByPlace() {
	probs := []contract.Problem{
		{File: "b.rego", Row: 1, Col: 1},
		{File: "a.rego", Row: 9, Col: 2},
		{File: "a.rego", Row: 9, Col: 1},
		{File: "a.rego", Row: 3, Col: 5},
	}
	contract.SortByPlace(probs, func(p contract.Problem) (string, int, int) { return p.File, p.Row, p.Col })
	for _, p := range probs {
		fmt.Printf("%s:%d:%d\n", p.File, p.Row, p.Col)
	}
	// Output:
	// a.rego:3:5
	// a.rego:9:1
	// a.rego:9:2
	// b.rego:1:1
}
