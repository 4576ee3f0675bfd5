package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
)

// TestFlowMatchingAnswersWithinTheDeadline is issue 43, item 4: 300,000
// returned strings sharing their first 8 bytes and a 1 MB argument
// repeating that prefix held a core for 70 s under a 5 s deadline (the
// deadline here too: the history's index alone takes seconds under the
// race detector on a loaded machine). The
// matching of a call's arguments is bounded (facts.FlowCallCompareBudget,
// FlowResponseCompareBudget): the decision answers within its deadline
// plus a second, and the call, whose flows could not all be matched, is
// refused by the rule that requires complete flows (the facts say the
// flows are incomplete, as past the index cap). On main no answer came
// within the bound.
func TestFlowMatchingAnswersWithinTheDeadline(t *testing.T) {
	reg, err := facts.NewRegistry(nil, []facts.Tool{{Name: "fetch"}, {Name: "send"}})
	require.NoError(t, err)
	e, err := engine.New(context.Background(), engine.Registry(reg), engine.Modules(engine.Source{File: "guard.rego", Text: `package policycheck.rules.guard

import data.policycheck.lib

deny contains "the flows of this call cannot be relied on" if {
	input.call.tool == "send"
	not lib.flows_complete(input.call)
}
`}))
	require.NoError(t, err)

	const prefix = "sharedpx"
	var content bytes.Buffer
	content.WriteByte('[')
	for i := range 300_000 {
		if i > 0 {
			content.WriteByte(',')
		}
		fmt.Fprintf(&content, "%q", fmt.Sprintf("%s%07d", prefix, i))
	}
	content.WriteByte(']')
	arg := strings.Repeat(prefix, (1<<20)/len(prefix))
	h := facts.History{
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "fetch", ToolCallID: "f1", HasToolCallID: true, Args: []byte(`{}`)}}},
		{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.ToolReturn, ToolName: "fetch", ToolCallID: "f1", HasToolCallID: true, Content: content.Bytes()}}},
		{Kind: facts.Response, Parts: []facts.Part{{Kind: facts.ToolCall, ToolName: "send", ToolCallID: "s1", HasToolCallID: true,
			Args: []byte(`{"body": "` + arg + `"}`)}}},
	}

	const deadline = 5 * time.Second
	type answer struct {
		d   *engine.Decision
		err error
	}
	done := make(chan answer, 1)
	go func() {
		d, err := e.Decide(context.Background(), engine.Request{History: h}, engine.WithDeadline(deadline))
		done <- answer{d, err}
	}()
	select {
	case a := <-done:
		require.NoError(t, a.err)
		require.Len(t, a.d.Calls, 1)
		assert.NotEqual(t, engine.Execute, a.d.Calls[0].Verdict, "flows that could not all be matched never let the call through")
		if !a.d.FailedClosed() {
			assert.Equal(t, engine.Denied, a.d.Calls[0].Verdict)
			assert.Contains(t, strings.Join(a.d.Calls[0].Reasons, "\n"), "the flows of this call cannot be relied on")
		}
	case <-time.After(deadline + time.Second):
		t.Fatalf("no answer within the deadline (%v) plus a second", deadline)
	}
}
