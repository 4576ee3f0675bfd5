package receiptcases

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// Refund builds the shipped refund example, which the receipt benchmarks
// decide: examples/registry.yaml, an engine on examples/policies, and the
// request of examples/histories/refund.json with the support context
// (examples/context/support.json; five calls, two of which execute). root
// is the module root as the test sees it ("..").
func Refund(tb testing.TB, root string) (*facts.Registry, *engine.Engine, engine.Request) {
	tb.Helper()
	examples := filepath.Join(root, "examples")
	reg, err := loader.ReadRegistry(filepath.Join(examples, "registry.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	eng, err := engine.New(context.Background(), engine.Registry(reg), engine.PolicyPaths(filepath.Join(examples, "policies")))
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(examples, "histories", "refund.json"))
	if err != nil {
		tb.Fatal(err)
	}
	h, err := loader.DecodeHistory("refund.json", raw, loader.DefaultLimits())
	if err != nil {
		tb.Fatal(err)
	}
	ctxRaw, err := os.ReadFile(filepath.Join(examples, "context", "support.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var ctxDoc any
	dec := json.NewDecoder(bytes.NewReader(ctxRaw))
	dec.UseNumber()
	if err := dec.Decode(&ctxDoc); err != nil {
		tb.Fatal(err)
	}
	return reg, eng, engine.Request{History: h, Context: ctxDoc}
}
