package trust_test

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/policycheck/policycheck/trust"
)

// checkReceipt is what a tool service runs before it runs a call: the
// receipt must be signed by a key the sidecar serves (GET /v1/keys), not
// expired, and for exactly this call.
func checkReceipt(jwks []byte, receiptText, runID, toolCallID, tool string, args json.RawMessage) error {
	keys, err := trust.ParseKeys(jwks)
	if err != nil {
		return err
	}
	claims, err := trust.Verify(receiptText, keys, trust.Call{
		RunID: runID, ToolCallID: &toolCallID, Tool: tool, Args: args,
	})
	if err != nil {
		return err // a *trust.Invalid says why: refuse to run the call
	}
	fmt.Printf("run %s: decided by policy revision %.12s…\n", claims.Tool, claims.PolicyRevision)
	return nil
}

// A tool service checks the receipt of the refund example's get_order
// call (examples/trust: the receipt eval signed with
// --receipt-key examples/trust/receipt-key.pem, and the JWKS of that
// key) before it runs the call, and refuses the same receipt for other
// arguments.
func ExampleVerify() {
	jwks, _ := os.ReadFile("../examples/trust/receipt-keys.json")
	text, _ := os.ReadFile("../examples/trust/receipt.jws")
	err := checkReceipt(jwks, string(text), "", "c1", "get_order", json.RawMessage(`{"order_id": 7}`))
	fmt.Println(err)
	err = checkReceipt(jwks, string(text), "", "c1", "get_order", json.RawMessage(`{"order_id": 8}`))
	fmt.Println(err)
	// Output:
	// run get_order: decided by policy revision 53252a34100d…
	// <nil>
	// receipt rejected: issued for arguments with digest sha256:49bcba64add9d9d1d0a93dc79987570ba029a1534719e07d9bb9ee80681dba73, the call's arguments have digest sha256:6349cbe7b4f127c1c741dcc68b82592bc4f11fb47f77107ce3d5fb0981eae87e
}
