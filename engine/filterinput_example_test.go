package engine_test

import (
	"encoding/json"
	"fmt"
	"log"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/loader"
)

// The input a capability filter reads, with vault active: what policycheck
// check evaluates a filter with, built as the engine builds it for a
// decision.
func ExampleFilterInput() {
	reg, err := loader.ParseRegistry("tools.yaml", []byte(exampleRegistry))
	if err != nil {
		log.Fatal(err)
	}
	doc, err := ast.JSON(engine.FilterInput(reg, []string{"vault"}))
	if err != nil {
		log.Fatal(err)
	}
	out, _ := json.Marshal(doc)
	fmt.Println(string(out))
	// Output:
	// {"active_capabilities":["vault"],"context":{},"tools":[{"capability":null,"defer_loading":false,"name":"get_time"},{"capability":null,"defer_loading":true,"name":"search_docs"},{"capability":"vault","defer_loading":true,"name":"read_secret"},{"capability":"vault","defer_loading":true,"name":"delete_secret"}]}
}
