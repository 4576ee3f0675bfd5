package jsonout_test

import (
	"os"

	"github.com/policycheck/policycheck/internal/ground/jsonout"
)

// ExampleWrite writes a value as policycheck eval prints a decision and
// the sidecar answers it: two-space indentation, "<" and "&" as they are.
func ExampleWrite() {
	v := map[string]any{"available": []string{"get_time"}, "errors": []string{"<policy> & more"}}
	if err := jsonout.Write(os.Stdout, v); err != nil {
		panic(err)
	}
	// Output:
	// {
	//   "available": [
	//     "get_time"
	//   ],
	//   "errors": [
	//     "<policy> & more"
	//   ]
	// }
}
