package facts

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSentValuesReadsWithinTheBudget: looking up many values among many
// calls reads no more of the calls than the comparison budget covers,
// however many values are looked up (the look-up from the calls,
// input.facts.tool_calls, once read each call's arguments for each value
// judged: 1,000 values among 1,000 calls of 1 KB held a core for 7 s,
// 2,000 among 2,000 for 31 s, under a 5 s deadline). Past the budget
// every value counts as sent (the budget marked exceeded); a value found within
// it is answered as Echoes answers it; the next call judged has a budget
// of its own. No clock is read.
func TestSentValuesReadsWithinTheBudget(t *testing.T) {
	id := func(s string) *string { return &s }
	filler := strings.Repeat("lorem ipsum dolor sit amet ", 400) // 10,800 bytes, 8,400 folded
	calls := make([]ToolCallRecord, 4_000)
	for i := range calls {
		args, err := json.Marshal(map[string]string{"text": fmt.Sprintf("%s %d", filler, i)})
		require.NoError(t, err)
		calls[i] = ToolCallRecord{Tool: "note", ToolCallID: id(fmt.Sprint(i)), Message: 2*i + 1, Args: args}
	}
	calls[3].Args = []byte(`{"to": "GB33 BUKB 2020 1555 5555 55"}`)
	s := NewSentValues(calls)
	end := Position{Message: 9_000}

	assert.True(t, s.SentBefore("GB33BUKB20201555555555", end), "found within the budget")
	assert.False(t, s.SentBefore("GB33BUKB20201555555555", Position{Message: 7}), "not before the call that sent it")
	assert.False(t, s.b.exceeded)

	covered := FlowCallCompareBudget/8_400 + 1
	for i := range 5_000 {
		require.True(t, s.SentBefore(fmt.Sprintf("DE89-3704-%08d", i), end), "past the budget, value %d counts as sent", i)
	}
	assert.True(t, s.b.exceeded)
	assert.LessOrEqual(t, len(s.log.sums)-1, covered, "calls read, of %d", len(calls))

	s.StartCall()
	assert.True(t, s.SentBefore("GB33BUKB20201555555555", end), "the next call has a budget of its own")
	assert.False(t, s.SentBefore(true, end), "a boolean is never sent")
	assert.True(t, s.CalledBefore("note", "3", end))
	assert.False(t, s.CalledBefore("note", "3", Position{Message: 7}))
	assert.False(t, s.CalledBefore("fetch", "3", end))
}

// TestSentValuesPutsTheCallsInOrder: calls read back in any order (a
// logged input's) are looked up in history order: the first to send a
// value is the earliest.
func TestSentValuesPutsTheCallsInOrder(t *testing.T) {
	id := func(s string) *string { return &s }
	calls := []ToolCallRecord{
		{Tool: "b", ToolCallID: id("x"), Message: 9, Args: []byte(`{"v": "acct-778899"}`)},
		{Tool: "a", ToolCallID: id("x"), Message: 3, Part: 1, Args: []byte(`{"v": "acct-778899"}`)},
		{Tool: "a", ToolCallID: id("x"), Message: 1, Args: []byte(`{}`)},
	}
	s := NewSentValues(calls)
	assert.True(t, s.SentBefore("acct-778899", Position{Message: 4}))
	assert.False(t, s.SentBefore("acct-778899", Position{Message: 3, Part: 1}))
	assert.True(t, s.CalledBefore("a", "x", Position{Message: 2}), "the earliest call of a with x")
	assert.False(t, s.CalledBefore("b", "x", Position{Message: 9}))
}

// TestSentValuesAgreesWithEchoes: within the budget, SentBefore answers
// as a search of every call before the place with Echoes does, and
// CalledBefore as a search for a call of the tool with the id, on calls
// given in any order, values written as strings and numbers several
// ways.
func TestSentValuesAgreesWithEchoes(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 7))
	words := []string{"GB33 BUKB", "gb33bukb", "20201555", "Ada Lovelace", "ada.lovelace@example.com", "12345.67", "73401659", "x"}
	nums := []string{"12345.67", "1.234567e4", "73401659", "7.3401659e7", "2024", "0.5"}
	for round := range 300 {
		calls := make([]ToolCallRecord, 1+r.IntN(12))
		for i := range calls {
			id := fmt.Sprint(r.IntN(4))
			obj := map[string]any{}
			for k := range r.IntN(3) {
				if r.IntN(3) == 0 {
					obj[fmt.Sprint("n", k)] = json.Number(nums[r.IntN(len(nums))])
				} else {
					obj[fmt.Sprint("s", k)] = words[r.IntN(len(words))] + " " + words[r.IntN(len(words))]
				}
			}
			args, err := json.Marshal(obj)
			require.NoError(t, err)
			calls[i] = ToolCallRecord{Tool: []string{"a", "b"}[r.IntN(2)], ToolCallID: &id, Message: r.IntN(20), Part: r.IntN(2), Args: args}
		}
		s := NewSentValues(calls)
		for q := range 30 {
			at := Position{Message: r.IntN(22), Part: r.IntN(2)}
			var v any = words[r.IntN(len(words))]
			if r.IntN(2) == 0 {
				v = json.Number(nums[r.IntN(len(nums))])
			}
			want := false
			for _, c := range calls {
				if (Position{Message: c.Message, Part: c.Part}).Before(at) && Echoes(c.Args, v) {
					want = true
				}
			}
			require.Equal(t, want, s.SentBefore(v, at), "round %d query %d: %v before %v", round, q, v, at)
			tool, id := []string{"a", "b"}[r.IntN(2)], fmt.Sprint(r.IntN(4))
			called := false
			for _, c := range calls {
				called = called || c.Tool == tool && *c.ToolCallID == id && (Position{Message: c.Message, Part: c.Part}).Before(at)
			}
			require.Equal(t, called, s.CalledBefore(tool, id, at), "round %d query %d: %s %s before %v", round, q, tool, id, at)
		}
		require.False(t, s.b.exceeded)
	}
}
