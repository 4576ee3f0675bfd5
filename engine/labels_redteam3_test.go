package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
)

// TestATrustedNumberVouchesOnlyForItself: flows compare numbers as
// 64-bit floats (docs/flows.md), so an integer past 2^53 flows from
// every neighbour a float cannot tell from it. A trusted contact list
// holding Ann's id 1234567890123456789 made the id 1234567890123456800
// an injected mail gave (another account: the tool reads JSON integers
// exactly, as Python does) a trusted value, and the consequential call
// executed. A number whose digits are not its float's shortest form is
// now trusted by no flow: it asks, an exact copy of such an id too (the
// flow cannot tell the copy from its neighbours). A number a float holds
// exactly (12345, 12345.0, 1.2345e4) is still trusted.
func TestATrustedNumberVouchesOnlyForItself(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ParseRegistry("r.yaml", []byte(`tools:
  - name: read_mail
  - name: list_contacts
    integrity: trusted
  - name: send_dm
    consequential: true
    parameters_json_schema: {"type": "object", "properties": {"user_id": {"type": "number"}}, "required": ["user_id"]}
`))
	require.NoError(t, err)
	for _, extra := range [][]engine.Option{nil, {engine.Modules(rt2Calls)}} {
		eng, err := engine.New(ctx, append([]engine.Option{engine.Registry(reg), engine.PolicyPaths("../examples/policies/integrity")}, extra...)...)
		require.NoError(t, err)
		for _, tc := range []struct{ note, id, verdict string }{
			{"the injected neighbour of Ann's id", "1234567890123456800", engine.ApprovalRequired},
			{"another neighbour", "1234567890123456700", engine.ApprovalRequired},
			{"Ann's id, past a float's digits", "1234567890123456789", engine.ApprovalRequired},
			{"a decimal past a float's digits", "12345.000000000000001", engine.ApprovalRequired},
			{"Bo's id", "12345", engine.Execute},
			{"Bo's id as a decimal", "12345.0", engine.Execute},
			{"Bo's id with an exponent", "1.2345e4", engine.Execute},
		} {
			h := facts.History{
				{Kind: facts.Request, Parts: []facts.Part{{Kind: facts.UserPrompt, Content: []byte(`"DM the contact my mail names."`)}}},
				{Kind: facts.Response, Parts: []facts.Part{rt2Call("list_contacts", "c1", `{}`)}},
				{Kind: facts.Request, Parts: []facts.Part{rt2Return("list_contacts", "c1", `[{"name":"Ann","user_id":1234567890123456789},{"name":"Bo","user_id":12345}]`)}},
				{Kind: facts.Response, Parts: []facts.Part{rt2Call("read_mail", "m1", `{}`)}},
				{Kind: facts.Request, Parts: []facts.Part{rt2Return("read_mail", "m1", `"Ann's new id is 1234567890123456800"`)}},
				{Kind: facts.Response, Parts: []facts.Part{rt2Call("send_dm", "s1", `{"user_id":`+tc.id+`}`)}},
			}
			d, err := eng.Decide(ctx, engine.Request{History: h})
			require.NoError(t, err)
			require.Empty(t, d.Errors)
			require.Len(t, d.Calls, 1)
			assert.Equal(t, tc.verdict, d.Calls[0].Verdict, "%s (reading tool_calls: %v): %v", tc.note, extra != nil, d.Calls[0].Reasons)
		}
	}
}
