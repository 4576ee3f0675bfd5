package server_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/internal/testkit/bundletest"
	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// TestBuiltSignedBundle: a bundle `policycheck bundle build` signed
// activates on `serve --config` that verifies it with OPA's keys
// configuration, and decides with the bundle's policy; a bundle whose
// policy was changed after signing, and one signed with another key, are
// refused: the signed revision keeps serving and /health says degraded,
// with the bundle's error.
func TestBuiltSignedBundle(t *testing.T) {
	bin, reg, body := exampleServe(t)
	dir := t.TempDir()
	key, pub := rsaKeyFiles(t, dir, "bundle")
	other, _ := rsaKeyFiles(t, dir, "other")
	policies := filepath.Join(dir, "operator")
	require.NoError(t, os.MkdirAll(policies, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(policies, "hide.rego"),
		[]byte("package policycheck.rules.bundled\n\nimport data.policycheck.lib\n\n# The shipped library beside the bundle: its roots leave it in place.\nhide contains \"get_time\" if count(lib.calls(\"no_such_tool\")) == 0\n"), 0o600))
	build := func(rev, key string) []byte {
		t.Helper()
		out := filepath.Join(dir, rev+".tar.gz")
		var stdout, stderr bytes.Buffer
		code := cli.Run([]string{"bundle", "build", policies, "--revision", rev, "--signing-key", key, "--output", out},
			nil, &stdout, &stderr)
		require.Equal(t, 0, code, stderr.String())
		raw, err := os.ReadFile(out)
		require.NoError(t, err)
		return raw
	}

	var current atomic.Pointer[[]byte]
	publish := func(raw []byte) { current.Store(&raw) }
	publish(build("r1", key))
	bs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/bundles/policycheck.tar.gz" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(*current.Load())
	}))
	t.Cleanup(bs.Close)
	cfg := filepath.Join(dir, "opa.yaml")
	pubPEM, err := os.ReadFile(pub)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg, []byte(`services:
  bundles:
    url: `+bs.URL+`
bundles:
  policycheck:
    service: bundles
    resource: /bundles/policycheck.tar.gz
    polling:
      min_delay_seconds: 1
      max_delay_seconds: 1
    signing:
      keyid: bundle-key
keys:
  bundle-key:
    algorithm: RS256
    key: |
`+indent(string(pubPEM), "      ")), 0o600))

	p := servetest.Start(t, bin, "--registry", reg, "--config", cfg)
	rs := processRunning(t, p)
	require.Eventually(t, func() bool {
		status, h := health(t, rs)
		return status == http.StatusOK && h.Bundles["policycheck"].Serving == "r1"
	}, 15*time.Second, 50*time.Millisecond)
	signed := availableAfter(t, rs, body)
	require.NotContains(t, signed, "get_time", "the bundle's rule decides")
	require.NotEmpty(t, signed)

	for _, tc := range []struct {
		note string
		raw  []byte
		want string
	}{
		{"a policy changed after signing", bundletest.Tamper(t, build("r2", key), "/hide.rego", "get_time", "search_docs"), "hide.rego"},
		{"signed with another key", build("r3", other), "verification"},
	} {
		publish(tc.raw)
		var h struct {
			status string
			err    string
		}
		require.Eventually(t, func() bool {
			_, got := health(t, rs)
			h.status, h.err = got.Status, got.Bundles["policycheck"].Error
			return got.Status == "degraded" && got.Bundles["policycheck"].Error != ""
		}, 15*time.Second, 50*time.Millisecond, tc.note)
		require.Contains(t, h.err, tc.want, tc.note)
		_, got := health(t, rs)
		require.Equal(t, "r1", got.Bundles["policycheck"].Serving, tc.note)
		require.Equal(t, signed, availableAfter(t, rs, body), tc.note)

		// The signed bundle again: healthy.
		publish(build("r1", key))
		require.Eventually(t, func() bool {
			_, got := health(t, rs)
			return got.Status == "ok"
		}, 15*time.Second, 50*time.Millisecond, tc.note)
	}
}

// rsaKeyFiles writes an RSA key pair under dir as NAME.pem (PKCS #1) and
// NAME.pub.pem (PKIX), and returns their paths.
func rsaKeyFiles(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	priv := filepath.Join(dir, name+".pem")
	require.NoError(t, os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), 0o600))
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	pub := filepath.Join(dir, name+".pub.pem")
	require.NoError(t, os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600))
	return priv, pub
}

// indent prefixes every line of s with prefix.
func indent(s, prefix string) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, prefix) + "\n"
}
