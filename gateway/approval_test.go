package gateway_test

import (
	"crypto/ed25519"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/gateway"
	"github.com/policycheck/policycheck/trust"
)

// TestSignedApprovalInMeta: with approver keys, a call that needs
// approval waits; the same call again with an approval signed for it
// (its tool_call_id, digest and the session as the run) executes once;
// an approval signed for another run, or none, leaves it refused.
func TestSignedApprovalInMeta(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	key, _ := jwk.Import(priv)
	_ = key.Set(jwk.KeyIDKey, "ana-key")
	_ = key.Set(jwk.AlgorithmKey, jwa.EdDSA())
	pub, _ := key.PublicKey()
	_ = pub.Set("sub", "ana@example.com")
	keys := jwk.NewSet()
	_ = keys.AddKey(pub)
	v, err := trust.NewApprovalVerifier(keys)
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeUpstream()
	g := newTestGateway(t, f, func(c *gateway.Config) { c.Approvals = v })
	cs := connect(t, g, gateway.Principal{Name: "alice"}, nil)
	args := map[string]any{"env": "prod"}
	re := regexp.MustCompile(`tool_call_id (gw_[0-9]+), digest (sha256:[0-9a-f]+), run (gs_[0-9a-f]+)`)
	ask := func() (id, digest, run string) {
		msg, isErr := call(t, cs, "deploy", args)
		m := re.FindStringSubmatch(msg)
		if !isErr || m == nil {
			t.Fatalf("deploy: %q", msg)
		}
		return m[1], m[2], m[3]
	}
	sign := func(digest, run string) map[string]any {
		sig, err := trust.SignApproval(key, trust.ApprovalPayload{Digest: digest, Kind: facts.ToolApproved, RunID: run, Expiry: time.Now().Add(time.Minute).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return map[string]any{"kind": facts.ToolApproved, "digest": digest, "signature": sig}
	}
	callMeta := func(meta mcp.Meta) (string, bool) {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "deploy", Arguments: args, Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}

	_, digest, _ := ask()
	if msg, isErr := callMeta(mcp.Meta{"policycheck/approval": sign(digest, "gs_elsewhere")}); !isErr {
		t.Fatalf("an approval signed for another run executed: %q", msg)
	}
	_, digest, run := ask()
	if msg, isErr := callMeta(mcp.Meta{"policycheck/approval": sign(digest, run)}); isErr {
		t.Fatalf("a signed approval did not apply: %q", msg)
	}
	if f.calls.Load() != 1 {
		t.Fatalf("upstream ran %d calls", f.calls.Load())
	}
	// Used once: the next deploy asks again.
	if msg, _ := callMeta(nil); !strings.Contains(msg, "must approve") {
		t.Fatalf("second deploy: %q", msg)
	}
	if f.calls.Load() != 1 {
		t.Fatalf("upstream ran %d calls", f.calls.Load())
	}
}
