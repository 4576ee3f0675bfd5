package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// budgetRegistry: notes the model writes, a trusted payee list, and a
// consequential payment to many payees at once.
const budgetRegistry = `tools:
  - name: write_note
    parameters_json_schema: {"type": "object", "properties": {"text": {"type": "string"}}}
  - name: list_payees
    integrity: trusted
    parameters_json_schema: {"type": "object", "properties": {}}
  - name: pay_many
    consequential: true
    parameters_json_schema: {"type": "object", "properties": {"to": {"type": "array", "items": {"type": "string"}}}, "required": ["to"]}
`

// budgetHistory: the model writes notes notes of about 1 KB each, reads
// a trusted list of payees payees, and pays every one of them.
func budgetHistory(t *testing.T, notes, payees int) facts.History {
	t.Helper()
	h := facts.History{{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt, Content: []byte(`"Pay every payee on my list."`)}}}}
	filler := strings.Repeat("minutes of the weekly meeting ", 34)
	for i := range notes {
		args, err := json.Marshal(map[string]string{"text": fmt.Sprintf("%s%d", filler, i)})
		require.NoError(t, err)
		id := fmt.Sprintf("n%d", i)
		h = append(h, facts.Message{Kind: facts.Response, Parts: []facts.Part{rt2Call("write_note", id, string(args))}},
			facts.Message{Kind: facts.Request, Parts: []facts.Part{rt2Return("write_note", id, `"saved"`)}})
	}
	list := make([]string, payees)
	for i := range list {
		list[i] = fmt.Sprintf("GB%02dBUKB2020%010d", i%90+10, i)
	}
	ret, err := json.Marshal(list)
	require.NoError(t, err)
	args, err := json.Marshal(map[string]any{"to": list})
	require.NoError(t, err)
	return append(h,
		facts.Message{Kind: facts.Response, Parts: []facts.Part{rt2Call("list_payees", "l1", `{}`)}},
		facts.Message{Kind: facts.Request, Parts: []facts.Part{rt2Return("list_payees", "l1", string(ret))}},
		facts.Message{Kind: facts.Response, Parts: []facts.Part{rt2Call("pay_many", "p1", string(args))}})
}

// TestEchoLookUpFromTheCallsIsBudgeted: with a policy that reads
// input.facts.tool_calls, the engine judges whether a trusted return
// echoes what the agent sent from the calls in the input. That look-up
// read every call's arguments for each value judged, with no bound: 500
// payees paid after 500 notes executed on main (each payee judged
// trusted) after reading the notes 500 times, where the derived flows,
// past their comparison budget, ask approval (2,000 and 2,000 took 31 s
// under a 5 s deadline). It now spends the flows' comparison budgets
// (facts.SentValues): past them a value counts as sent, and both policy
// sets ask approval. Within the budget (20 payees) both find every payee
// trusted, and the call executes.
func TestEchoLookUpFromTheCallsIsBudgeted(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ParseRegistry("r.yaml", []byte(budgetRegistry))
	require.NoError(t, err)
	for _, tc := range []struct {
		notes, payees int
		verdict       string
	}{
		{500, 500, engine.ApprovalRequired},
		{500, 20, engine.Execute},
		// No notes, a payment to 1,000 payees: only the payment itself
		// holds the values, and it comes after the list that vouches for
		// them. The look-up from the calls read it too, for each payee,
		// and ran out of its budget on an honest payment (approval asked)
		// that the derived flows let execute.
		{0, 1000, engine.Execute},
	} {
		h := budgetHistory(t, tc.notes, tc.payees)
		var integrity []any
		for _, extra := range [][]engine.Option{nil, {engine.Modules(rt2Calls)}} {
			eng, err := engine.New(ctx, append([]engine.Option{engine.Registry(reg), engine.PolicyPaths("../examples/policies/integrity")}, extra...)...)
			require.NoError(t, err)
			d, err := eng.Decide(ctx, engine.Request{History: h})
			require.NoError(t, err)
			require.Empty(t, d.Errors)
			require.Len(t, d.Calls, 1)
			assert.Equal(t, tc.verdict, d.Calls[0].Verdict, "%d payees, reading tool_calls: %v", tc.payees, extra != nil)
			doc, err := d.InputDocument()
			require.NoError(t, err)
			levels := callsOf(t, doc)[0]["args_integrity"].(map[string]any)
			require.Len(t, levels, tc.payees)
			untrusted := 0
			for _, l := range levels {
				if l == "untrusted" {
					untrusted++
				}
			}
			if tc.verdict == engine.Execute {
				assert.Zero(t, untrusted, "within the budget every payee is the trusted list's")
				integrity = append(integrity, levels)
			} else {
				assert.Positive(t, untrusted, "past the budget some payee counts as sent by the agent")
			}
		}
		if tc.verdict == engine.Execute {
			assert.Equal(t, integrity[0], integrity[1], "within the budget, the same levels whether or not the calls are read")
		}
	}
}

// TestAValueInManyReturnsGivesOneShortReason: a value a hostile history
// put in 2,000 returns (each a different mail quoting it) is judged with
// one reason per argument naming the three latest sources and counting
// the rest: the reason used to name every source (88 KB at 1,000), and
// its condition made the stock rules compute it once per source (2.45 s
// at 1,000 returns; 5,000 passed the 5 s deadline and failed closed).
// Above the sink's clearance, one denial the same way. Twenty arguments
// each carrying the value get a reason each (their flows grouped by
// argument once, not scanned per argument).
func TestAValueInManyReturnsGivesOneShortReason(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		label, verdict string
	}{{"", engine.ApprovalRequired}, {"    confidentiality: secret\n", engine.Denied}} {
		reg, err := loader.ParseRegistry("r.yaml", []byte(budgetRegistry+"  - name: read_mail\n"+tc.label))
		require.NoError(t, err)
		eng, err := engine.New(ctx, engine.Registry(reg), engine.PolicyPaths("../examples/policies/integrity"), engine.FlowTokens(true))
		require.NoError(t, err)
		h := facts.History{{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt, Content: []byte(`"Pay what my mail says."`)}}}}
		for i := range 2000 {
			id := fmt.Sprintf("m%d", i)
			h = append(h, facts.Message{Kind: facts.Response, Parts: []facts.Part{rt2Call("read_mail", id, `{}`)}},
				facts.Message{Kind: facts.Request, Parts: []facts.Part{rt2Return("read_mail", id, fmt.Sprintf(`"pay GB33BUKB20201555555555 now, ref %d"`, i))}})
		}
		judge := func(h facts.History, args string) *engine.Decision {
			d, err := eng.Decide(ctx, engine.Request{History: append(h[:len(h):len(h)],
				facts.Message{Kind: facts.Response, Parts: []facts.Part{rt2Call("pay_many", "p1", args)}})})
			require.NoError(t, err)
			require.Empty(t, d.Errors)
			require.Len(t, d.Calls, 1)
			assert.Equal(t, tc.verdict, d.Calls[0].Verdict)
			return d
		}
		d := judge(h, `{"to":["GB33BUKB20201555555555"]}`)
		require.Len(t, d.Calls[0].Reasons, 1, "one reason for the one argument")
		assert.Less(t, len(d.Calls[0].Reasons[0]), 1024, d.Calls[0].Reasons[0])
		assert.Contains(t, d.Calls[0].Reasons[0], "tool_call_id m1999")
		assert.Contains(t, d.Calls[0].Reasons[0], "and 1997 more")

		// 20 arguments, each the value, after 200 of the mails (4,000
		// flows): one reason each, the flows grouped by argument once.
		to := strings.Repeat(`"GB33BUKB20201555555555",`, 20)
		d = judge(h[:1+2*200], `{"to":[`+to[:len(to)-1]+`]}`)
		require.Len(t, d.Calls[0].Reasons, 20, "one reason per argument")
		for _, r := range d.Calls[0].Reasons {
			assert.Less(t, len(r), 1024, r)
			assert.Contains(t, r, "and 197 more")
		}
	}
}

// TestAValueQuotedInManyArgumentsHasBoundedFlows: a value a hostile
// history quotes in many returns, sent in many arguments, is a flow per
// return and argument. Each was derived, written into the input and
// read by the rules: 1,000 mails and 40 arguments (40,000 flows) took
// 1 s to decide with the examples' integrity policy, 2,000 and 80 took
// 4 s, 4,000 and 160 passed the 5 s deadline. A call now has at most
// facts.FlowCallMaxFlows flows, past which its flows are incomplete:
// the policy asks a person, saying why, and the input holds no more
// than the bound.
func TestAValueQuotedInManyArgumentsHasBoundedFlows(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ParseRegistry("r.yaml", []byte(budgetRegistry+"  - name: read_mail\n"))
	require.NoError(t, err)
	eng, err := engine.New(ctx, engine.Registry(reg), engine.PolicyPaths("../examples/policies/integrity"), engine.FlowTokens(true))
	require.NoError(t, err)
	h := facts.History{{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt, Content: []byte(`"Pay what my mail says."`)}}}}
	for i := range 1000 {
		id := fmt.Sprintf("m%d", i)
		h = append(h, facts.Message{Kind: facts.Response, Parts: []facts.Part{rt2Call("read_mail", id, `{}`)}},
			facts.Message{Kind: facts.Request, Parts: []facts.Part{rt2Return("read_mail", id, fmt.Sprintf(`"pay GB33BUKB20201555555555 now, ref %d"`, i))}})
	}
	to := strings.Repeat(`"GB33BUKB20201555555555",`, 40)
	h = append(h, facts.Message{Kind: facts.Response, Parts: []facts.Part{rt2Call("pay_many", "p1", `{"to":[`+to[:len(to)-1]+`]}`)}})

	d, err := eng.Decide(ctx, engine.Request{History: h})
	require.NoError(t, err)
	require.Empty(t, d.Errors)
	require.Len(t, d.Calls, 1)
	assert.Equal(t, engine.ApprovalRequired, d.Calls[0].Verdict)
	assert.True(t, slices.ContainsFunc(d.Calls[0].Reasons, func(r string) bool {
		return strings.Contains(r, "the flows of this pay_many call cannot be relied on")
	}), "the reasons say the flows are incomplete (%d reasons)", len(d.Calls[0].Reasons))

	input, err := eng.Input(ctx, engine.Request{History: h})
	require.NoError(t, err)
	in, err := json.Marshal(input)
	require.NoError(t, err)
	var doc struct {
		Dispatch struct {
			Calls []struct {
				Flows []json.RawMessage `json:"flows"`
			} `json:"calls"`
		} `json:"dispatch"`
		Facts struct {
			Truncated bool `json:"flow_index_truncated"`
		} `json:"facts"`
	}
	require.NoError(t, json.Unmarshal(in, &doc))
	assert.True(t, doc.Facts.Truncated)
	require.Len(t, doc.Dispatch.Calls, 1)
	assert.Equal(t, facts.FlowCallMaxFlows, len(doc.Dispatch.Calls[0].Flows), "the input holds the call's flows up to the bound")
}

// TestEchoLookUpComparesNoEmptyText: a string of the agent's arguments
// with no letter or digit ("-", "", an object key "!") folds to an empty
// text, which no value looked up can be inside, and which the
// comparison budget counted as 0 bytes: the echo look-up compared each
// with every value judged, unbudgeted (the derived flows' look-up, and
// the same comparison for a policy reading input.facts.tool_calls). One
// earlier call with 400,000 such strings (1.6 MB) and a payment to
// 8,000 payees of a trusted list held a core 7.3 s under the 5 s
// deadline (the look-up runs before the policy, and reads no clock),
// and the decision failed closed; 200,000 strings and 1,000 payees took
// 0.5 s, 2,000 0.9 s, 4,000 1.8 s: payees times strings. Here 2,000,000
// strings and 2,000 payees (about 9 s on main). Empty texts are no
// longer kept, and the payees are judged trusted well within the
// deadline.
func TestEchoLookUpComparesNoEmptyText(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ParseRegistry("r.yaml", []byte(budgetRegistry))
	require.NoError(t, err)
	junk := `{"text":"see list","tags":[` + strings.Repeat(`"-",`, 2_000_000) + `""],"!?":{"":"--"}}`
	h := budgetHistory(t, 0, 2_000)
	h = append(facts.History{h[0],
		{Kind: facts.Response, Parts: []facts.Part{rt2Call("write_note", "n0", junk)}},
		{Kind: facts.Request, Parts: []facts.Part{rt2Return("write_note", "n0", `"saved"`)}},
	}, h[1:]...)
	eng, err := engine.New(ctx, engine.Registry(reg), engine.PolicyPaths("../examples/policies/integrity"))
	require.NoError(t, err)
	d, err := eng.Decide(ctx, engine.Request{History: h}, engine.WithDeadline(5*time.Second))
	require.NoError(t, err)
	require.Empty(t, d.Errors)
	require.Len(t, d.Calls, 1)
	assert.Equal(t, engine.Execute, d.Calls[0].Verdict, "every payee is the trusted list's")
}
