package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// TestExplainOfASelfReferringSchemaAnswers: explain reads the labels of
// every refused call, an invalid_args one too, and a tool schema holding
// allOf: [{$ref: "#"}, {$ref: "#"}] (it loads; its calls fail validation
// on the reference cycle) sent the labels' schema search down 2^64
// paths: the explanation never came. Seen failing on c30cdcd: Explain ran
// past 10s.
func TestExplainOfASelfReferringSchemaAnswers(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ParseRegistry("r.yaml", []byte(`tools:
  - name: read_file
    integrity: untrusted
  - name: loop
    consequential: true
    parameters_json_schema: {"type": "object", "allOf": [{"$ref": "#"}, {"$ref": "#"}], "properties": {"a": {"type": "object"}}}
`))
	require.NoError(t, err)
	eng, err := engine.New(ctx, engine.Registry(reg), engine.PolicyPaths("../examples/policies/integrity"))
	require.NoError(t, err)
	h := facts.History{
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt, Content: []byte(`"go"`)}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "loop", ToolCallID: "c1", HasToolCallID: true,
			Args: []byte(`{"a":{"b":{"c":{"d":{"e":{"f":"x"}}}}}}`)}}},
	}
	done := make(chan error, 1)
	go func() {
		_, err := eng.Explain(ctx, engine.Request{History: h})
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("no explanation within 10s")
	}
}
