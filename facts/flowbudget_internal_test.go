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
	flows := callFlows(ArgsValue(honest), b, x)
	require.Len(t, flows, 1, "a call within its budget finds its flow")
	assert.False(t, b.exceeded)

	before := b.response
	callFlows(ArgsValue(hostile), b, x)
	assert.True(t, b.exceeded, "20,000 strings under one prefix times 12,500 windows pass the budget")
	assert.LessOrEqual(t, before-b.response, FlowCallCompareBudget, "one call compares at most its budget")

	flows = callFlows(ArgsValue(honest), b, x)
	assert.Len(t, flows, 1, "the next call has a budget of its own")

	for range FlowResponseCompareBudget / FlowCallCompareBudget {
		callFlows(ArgsValue(hostile), b, x)
	}
	assert.GreaterOrEqual(t, b.response, 0, "a response compares at most its budget")
	assert.Less(t, b.response, len("the secret value 42"), "the response's budget is spent")
	assert.Empty(t, callFlows(ArgsValue(honest), b, x), "past the response's budget nothing more is compared")

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

// quotedHistory: n returns of read_mail, each quoting value, then a
// response of one send call per element of args (a call's arguments: a
// list of the value repeated).
func quotedHistory(n int, value string, args ...int) History {
	h := History{{Kind: Request, Parts: []Part{{Kind: UserPrompt, Content: []byte(`"Pay what my mail says."`)}}}}
	for i := range n {
		id := fmt.Sprintf("m%d", i)
		h = append(h,
			Message{Kind: Response, Parts: []Part{{Kind: ToolCall, ToolName: "read_mail", ToolCallID: id, HasToolCallID: true, Args: []byte(`{}`)}}},
			Message{Kind: Request, Parts: []Part{{Kind: ToolReturn, ToolName: "read_mail", ToolCallID: id, HasToolCallID: true,
				Content: fmt.Appendf(nil, `["%s", "ref %d"]`, value, i)}}})
	}
	r := Message{Kind: Response}
	for c, a := range args {
		list := strings.Repeat(`"`+value+`",`, a)
		r.Parts = append(r.Parts, Part{Kind: ToolCall, ToolName: "send", ToolCallID: fmt.Sprintf("s%d", c), HasToolCallID: true,
			Args: []byte(`{"to":[` + list[:len(list)-1] + `]}`)})
	}
	return append(h, r)
}

// TestFlowCountIsBounded: a call has at most FlowCallMaxFlows flows and
// a response at most FlowResponseMaxFlows, past which the flows are
// said incomplete, as past the comparison budget. A value a history
// quotes in n returns, sent in a arguments, is n×a flows that cost no
// comparison (each is an exact match of an indexed string, or of its
// tokens): 2,000 returns and 80 arguments took 4 s to decide with the
// examples' integrity policy, 4,000 and 160 passed the 5 s deadline, a
// few more built gigabytes of flows. The flows kept are the first in
// document order, the same for a one-shot derivation (which indexes
// the returns again, all of them, when its flows end incomplete) and a
// Tracker.
func TestFlowCountIsBounded(t *testing.T) {
	const value = "GB33BUKB20201555555555"
	reg, err := NewRegistry(nil, []Tool{{Name: "read_mail"}, {Name: "send"}})
	require.NoError(t, err)
	for _, tokens := range []bool{false, true} {
		o := Options{Flows: true, FlowTokens: tokens}
		n := 128
		a := FlowCallMaxFlows / n // a×n: exactly at the bound, complete
		calls, truncated := Flows(quotedHistory(n, value, a), reg, o)
		assert.False(t, truncated, "tokens %v: %d flows, at the bound, are complete", tokens, a*n)
		require.Len(t, calls, 1)
		assert.Len(t, calls[0], a*n)

		// One more argument: the flows stop at the bound.
		h := quotedHistory(n, value, a+1, 1, a+1, a+1, a+1, 1)
		calls, truncated = Flows(h, reg, o)
		assert.True(t, truncated, "tokens %v: past the bound the flows are incomplete", tokens)
		require.Len(t, calls, 6)
		assert.Len(t, calls[0], FlowCallMaxFlows, "the call stops at its bound")
		assert.Equal(t, "/to/0", calls[0][0].Path, "the first in document order are kept")
		assert.Equal(t, fmt.Sprintf("/to/%d", a-1), calls[0][FlowCallMaxFlows-1].Path, "the last argument is not matched")
		assert.Len(t, calls[1], n, "the next call has a bound of its own")
		assert.Len(t, calls[2], FlowCallMaxFlows)
		assert.Len(t, calls[3], FlowCallMaxFlows)
		total := 0
		for _, c := range calls {
			total += len(c)
		}
		assert.Equal(t, FlowResponseMaxFlows, total, "the response stops at its bound")
		assert.Len(t, calls[5], 0, "past the response's bound a call has none")

		// A Tracker that read the history message by message finds the
		// same flows, and says as much of their truncation.
		tr := NewTracker(reg, o)
		tr.Append(h...)
		f := tr.FactsWith(o)
		assert.True(t, f.FlowIndexTruncated)
		require.NotNil(t, f.Dispatch)
		d := Derive(h, reg, o)
		assert.True(t, d.FlowIndexTruncated)
		for c := range calls {
			assert.Equal(t, calls[c], f.Dispatch.Calls[c].Flows, "tokens %v, call %d: the Tracker's flows", tokens, c)
			assert.Equal(t, calls[c], d.Dispatch.Calls[c].Flows, "tokens %v, call %d: Derive's flows", tokens, c)
		}
	}
}
