package server_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/trust"
)

// signClaims signs claims, as they are written, with the approver key of
// receiptcases.ApproverJWKS (seed 3, kid "ana-key").
func signClaims(t *testing.T, claims map[string]any) string {
	t.Helper()
	key, err := jwk.Import(receiptcases.Key(3))
	require.NoError(t, err)
	require.NoError(t, key.Set(jwk.KeyIDKey, "ana-key"))
	payload, err := json.Marshal(claims)
	require.NoError(t, err)
	out, err := jws.Sign(payload, jws.WithKey(jwa.EdDSA(), key))
	require.NoError(t, err)
	return string(out)
}

// TestSignedApprovalBindsToOneRun: a signed approval counts for the run
// its signature names, once, and only with an exp within the sidecar's
// bound (--approval-max-ttl). The same signature on another run, on a
// stateless /v1/decide, or a second time on its own run is not applied,
// and approvals[].why says why; so is one without exp and one whose exp
// lies beyond the bound. A signature without run_id is for /v1/decide
// only, and it too is applied once.
func TestSignedApprovalBindsToOneRun(t *testing.T) {
	keys, err := trust.ParseKeys(receiptcases.ApproverJWKS())
	require.NoError(t, err)
	v, err := trust.NewApprovalVerifier(keys)
	require.NoError(t, err)
	reg, err := loader.ReadRegistry(filepath.Join("..", "examples", "registry.yaml"))
	require.NoError(t, err)
	rs := start(t, withRegistry(reg), withEngine(engine.PolicyPaths(filepath.Join("..", "examples", "policies"))), withApproverKeys(v))
	transfer, err := os.ReadFile(filepath.Join("..", "examples", "histories", "transfer.json"))
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join("..", "examples", "approvals", "transfer.json"))
	require.NoError(t, err)
	var file struct {
		Approvals map[string]map[string]json.RawMessage
	}
	require.NoError(t, json.Unmarshal(raw, &file))
	honest := file.Approvals["t2"]
	claims := func(extra map[string]any) map[string]any {
		c := map[string]any{"digest": honest["digest"], "kind": honest["kind"], "override_args": honest["override_args"]}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	approvals := func(sig string) string {
		a := map[string]json.RawMessage{}
		for k, v := range honest {
			a[k] = v
		}
		a["signature"], _ = json.Marshal(sig)
		b, err := json.Marshal(map[string]any{"t2": a})
		require.NoError(t, err)
		return string(b)
	}
	// decide posts the transfer history with the approval signed sig, to
	// run (stateless /v1/decide when run is ""), and returns t2's verdict
	// and the approval's outcome.
	decide := func(t *testing.T, run, sig string) (string, engine.ApprovalOutcome) {
		t.Helper()
		path, body := "/v1/decide", fmt.Sprintf(`{"history": %s, "approvals": %s, "context": %s}`, transfer, approvals(sig), adminContext(t))
		if run != "" {
			path = "/v1/runs/" + run + "/decide"
			body = fmt.Sprintf(`{"offset": 0, "messages": %s, "approvals": %s, "context": %s}`, transfer, approvals(sig), adminContext(t))
		}
		status, out := rs.post(t, path, []byte(body))
		require.Equal(t, http.StatusOK, status, string(out))
		d := decisionOf(t, path, out)
		require.Len(t, d.Approvals, 1)
		for _, c := range d.Calls {
			if c.ToolCallID != nil && *c.ToolCallID == "t2" {
				return c.Verdict, d.Approvals[0]
			}
		}
		t.Fatalf("no call t2 in %s", out)
		return "", engine.ApprovalOutcome{}
	}
	refused := func(t *testing.T, run, sig, want string) {
		t.Helper()
		verdict, o := decide(t, run, sig)
		assert.Equal(t, engine.ApprovalRequired, verdict, o.Why)
		assert.False(t, o.Applied, o.Why)
		assert.Contains(t, o.Why, want)
	}
	soon := time.Now().Add(5 * time.Minute).Unix()

	t.Run("a signature with no run_id and no exp executes nowhere", func(t *testing.T) {
		sig := signClaims(t, claims(nil))
		for _, run := range []string{"x0", "y0", "z0"} {
			refused(t, run, sig, "signed for stateless decisions (no run_id)")
		}
		refused(t, "", sig, "the signature has no exp")
	})
	t.Run("no exp", func(t *testing.T) {
		refused(t, "x1", signClaims(t, claims(map[string]any{"run_id": "x1"})), "the signature has no exp")
	})
	t.Run("exp beyond the bound", func(t *testing.T) {
		far := time.Now().Add(48 * time.Hour).Unix()
		refused(t, "x2", signClaims(t, claims(map[string]any{"run_id": "x2", "exp": far})), "--approval-max-ttl")
	})
	t.Run("run X at the right step executes once, and nowhere else", func(t *testing.T) {
		sig := signClaims(t, claims(map[string]any{"run_id": "run-x", "exp": soon}))
		refused(t, "run-y", sig, `signed for run "run-x"`)
		refused(t, "", sig, `signed for run "run-x"`)
		verdict, o := decide(t, "run-x", sig)
		assert.Equal(t, engine.Execute, verdict, o.Why)
		assert.True(t, o.Applied, o.Why)
		// The client starts run X again at offset 0 with the same history
		// (the outcome left out): the signature was used.
		refused(t, "run-x", sig, "already used")
		refused(t, "run-z", sig, `signed for run "run-x"`)
		// The same signature spelled otherwise (a segment padded, or in
		// the standard alphabet, which the JWS parser accepts) is the
		// same approval, used.
		for seg := range 3 {
			for _, enc := range []*base64.Encoding{base64.URLEncoding, base64.StdEncoding} {
				parts := strings.Split(sig, ".")
				raw, err := base64.RawURLEncoding.DecodeString(parts[seg])
				require.NoError(t, err)
				parts[seg] = enc.EncodeToString(raw)
				verdict, o := decide(t, "run-x", strings.Join(parts, "."))
				assert.Equal(t, engine.ApprovalRequired, verdict, o.Why)
				assert.False(t, o.Applied, o.Why)
			}
		}
	})
	t.Run("a stateless signature executes once on /v1/decide and never on a run", func(t *testing.T) {
		sig := signClaims(t, claims(map[string]any{"exp": soon}))
		refused(t, "run-s", sig, "signed for stateless decisions")
		verdict, o := decide(t, "", sig)
		assert.Equal(t, engine.Execute, verdict, o.Why)
		refused(t, "", sig, "already used")
	})
}
