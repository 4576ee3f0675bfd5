package gateway_test

import (
	"strings"
	"testing"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/gateway"
)

// TestPrincipalContextReachesThePolicy: a principal's context is
// input.context of every decision of its sessions.
func TestPrincipalContextReachesThePolicy(t *testing.T) {
	const pol = `package policycheck.rules.tenants

deny contains {"reason": "blocked tenant", "message": "Your tenant may not read files."} if {
	input.call.tool == "read_file"
	input.context.tenant == "blocked"
}
`
	g := newTestGateway(t, newFakeUpstream(), func(c *gateway.Config) {
		c.EngineOptions = append(c.EngineOptions, engine.Modules(engine.Source{File: "tenants.rego", Text: pol}))
	})
	ok := connect(t, g, gateway.Principal{Name: "a", Context: map[string]any{"tenant": "acme"}}, nil)
	blocked := connect(t, g, gateway.Principal{Name: "b", Context: map[string]any{"tenant": "blocked"}}, nil)
	if msg, isErr := call(t, ok, "read_file", map[string]any{"path": "x"}); isErr {
		t.Fatal(msg)
	}
	if msg, isErr := call(t, blocked, "read_file", map[string]any{"path": "x"}); !isErr || msg != "Your tenant may not read files." {
		t.Fatalf("%q", msg)
	}
}

func TestParseTokenFile(t *testing.T) {
	reg := mustRegistry(t, "context_schema:\n  type: object\n  properties:\n    tenant: {type: string}\n")
	for _, tc := range []struct{ name, file, want string }{
		{"ok", `{"tokens":[{"token":"0123456789abcdef","principal":"a","context":{"tenant":"x"}},{"token_sha256":"` + strings.Repeat("ab", 32) + `","principal":"ops","operator":true}]}`, ""},
		{"unknown key", `{"tokens":[{"token":"0123456789abcdef","principal":"a","admin":true}]}`, "unknown field"},
		{"duplicate", `{"tokens":[{"token":"0123456789abcdef","principal":"a"},{"token":"0123456789abcdef","principal":"b"}]}`, "/tokens/1: the same token twice"},
		{"no principal", `{"tokens":[{"token":"0123456789abcdef"}]}`, "/tokens/0/principal"},
		{"context schema", `{"tokens":[{"token":"0123456789abcdef","principal":"a","context":{"tenant":5}}]}`, "/tokens/0/context/tenant"},
		{"context not object", `{"tokens":[{"token":"0123456789abcdef","principal":"a","context":[1]}]}`, "must be a JSON object"},
		{"empty", `{"tokens":[]}`, "no tokens"},
		{"bad hash", `{"tokens":[{"token_sha256":"zz","principal":"a"}]}`, "64 hex digits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gateway.ParseTokenFile("tokens.json", []byte(tc.file), reg)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
