package facts

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sharedPrefixContent is a return of n strings sharing their first 8
// bytes, and a secret.
func sharedPrefixContent(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`["the secret value 42",`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", fmt.Sprintf("sharedpx%07d", i))
	}
	b.WriteByte(']')
	return b.Bytes()
}

// TestFlowMatchingIsBounded: matching a call's arguments compares at
// most FlowCallCompareBudget bytes of indexed strings, and a response's
// calls at most FlowResponseCompareBudget together, whatever the returns
// and arguments (issue 43, item 4: returned strings sharing one prefix
// and an argument repeating it made the comparisons the product of the
// two). A call past its budget keeps what it found and the flows are
// said incomplete (Facts.FlowIndexTruncated); the next call has a budget
// of its own. No clock is read.
func TestFlowMatchingIsBounded(t *testing.T) {
	x := newFlowIndex(Options{Flows: true})
	x.addPart(&Part{Kind: ToolReturn, ToolName: "fetch", Content: sharedPrefixContent(20_000)}, Position{2, 0}, nil, nil)
	require.False(t, x.truncated)
	hostile := []byte(`{"body": "` + strings.Repeat("sharedpx", 12_500) + `"}`)
	honest := []byte(`{"to": "acct: the secret value 42, today"}`)

	b := newFlowBudget()
	flows := callFlows(honest, b, x)
	require.Len(t, flows, 1, "a call within its budget finds its flow")
	assert.False(t, b.exceeded)

	before := b.response
	callFlows(hostile, b, x)
	assert.True(t, b.exceeded, "20,000 strings under one prefix times 12,500 windows pass the budget")
	assert.LessOrEqual(t, before-b.response, FlowCallCompareBudget, "one call compares at most its budget")

	flows = callFlows(honest, b, x)
	assert.Len(t, flows, 1, "the next call has a budget of its own")

	for range FlowResponseCompareBudget / FlowCallCompareBudget {
		callFlows(hostile, b, x)
	}
	assert.GreaterOrEqual(t, b.response, 0, "a response compares at most its budget")
	assert.Less(t, b.response, len("the secret value 42"), "the response's budget is spent")
	assert.Empty(t, callFlows(honest, b, x), "past the response's budget nothing more is compared")

	// Through Flows: the flows of such a response are incomplete.
	h := History{
		{Kind: Request, Parts: []Part{{Kind: UserPrompt}}},
		{Kind: Response, Parts: []Part{{Kind: ToolCall, ToolName: "fetch", ToolCallID: "f1", HasToolCallID: true, Args: []byte(`{}`)}}},
		{Kind: Request, Parts: []Part{{Kind: ToolReturn, ToolName: "fetch", ToolCallID: "f1", HasToolCallID: true, Content: sharedPrefixContent(20_000)}}},
		{Kind: Response, Parts: []Part{
			{Kind: ToolCall, ToolName: "send", ToolCallID: "s1", HasToolCallID: true, Args: honest},
			{Kind: ToolCall, ToolName: "send", ToolCallID: "s2", HasToolCallID: true, Args: hostile},
		}},
	}
	reg, err := NewRegistry(nil, []Tool{{Name: "fetch"}, {Name: "send"}})
	require.NoError(t, err)
	calls, truncated := Flows(h, reg, Options{Flows: true})
	assert.True(t, truncated, "a call past its budget makes the flows incomplete")
	require.Len(t, calls, 2)
	assert.Len(t, calls[0], 1)
	f := Derive(h, reg, Options{Flows: true})
	assert.True(t, f.FlowIndexTruncated)
	h[3].Parts = h[3].Parts[:1]
	_, truncated = Flows(h, reg, Options{Flows: true})
	assert.False(t, truncated, "within the budgets the flows are complete")
}
