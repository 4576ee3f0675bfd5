package server_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// pkcs8PEM is key as a PKCS #8 PEM file.
func pkcs8PEM(t *testing.T, key any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// healthDoc is /health's document, read loosely.
type healthDoc struct {
	Status     string   `json:"status"`
	Reasons    []string `json:"reasons"`
	ReceiptKey *struct {
		Result string `json:"result"`
		Error  string `json:"error"`
	} `json:"receipt_key_reload"`
}

// TestServeWatchHealthShowsRefusedReloads (issue 43, item 8): under serve
// --watch, a --receipt-key file replaced by an RSA, a P-256 or an empty
// file is refused (the current key keeps signing) and /health is
// degraded, saying why, and /metrics counts it, until a good key loads;
// likewise while a policy reload is refused.
func TestServeWatchHealthShowsRefusedReloads(t *testing.T) {
	bin, reg, _ := exampleServe(t)
	dir := t.TempDir()
	policies := filepath.Join(dir, "policies")
	require.NoError(t, os.Mkdir(policies, 0o755))
	policy := filepath.Join(policies, "hide.rego")
	require.NoError(t, os.WriteFile(policy, []byte(hideRule("get_time")), 0o600))
	keyFile := filepath.Join(dir, "receipt-key.pem")
	_, key, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, pkcs8PEM(t, key), 0o600))
	p := servetest.Start(t, bin, "--registry", reg, "--policy", policies, "--receipt-key", keyFile,
		"--watch", "--watch-interval", "20ms")
	rs := processRunning(t, p)
	healthNow := func() (int, healthDoc, string) {
		status, body := rs.do(t, http.MethodGet, "/health", nil)
		var h healthDoc
		require.NoError(t, json.Unmarshal(body, &h), string(body))
		return status, h, string(body)
	}
	metric := func(re string) bool {
		_, m := rs.do(t, http.MethodGet, "/metrics", nil)
		return regexp.MustCompile(`(?m)^` + re + `$`).Match(m)
	}
	status, h, body := healthNow()
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "ok", h.Status, body)

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	for i, bad := range []struct {
		note string
		file []byte
	}{
		{"an RSA key", pkcs8PEM(t, rsaKey)},
		{"a P-256 key", pkcs8PEM(t, p256)},
		{"an empty file", nil},
	} {
		require.NoError(t, os.WriteFile(keyFile, bad.file, 0o600))
		require.Eventually(t, func() bool {
			return metric(`policycheck_receipt_key_reloads_total\{result="refused"\} ` + string(rune('1'+i)))
		}, 10*time.Second, 10*time.Millisecond, bad.note)
		status, h, body = healthNow()
		require.Equal(t, http.StatusOK, status, "decisions are still made")
		require.Equal(t, "degraded", h.Status, "%s: %s", bad.note, body)
		require.NotNil(t, h.ReceiptKey, body)
		require.Equal(t, "refused", h.ReceiptKey.Result, body)
		require.NotEmpty(t, h.ReceiptKey.Error, body)
		require.True(t, strings.Contains(strings.Join(h.Reasons, "\n"), "receipt key"), body)
		require.True(t, metric(`policycheck_receipt_key_reload_failing 1`), bad.note)
	}

	// A good key loads: ok again.
	_, key2, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, pkcs8PEM(t, key2), 0o600))
	require.Eventually(t, func() bool { return metric(`policycheck_receipt_key_reload_failing 0`) }, 10*time.Second, 10*time.Millisecond)
	_, h, body = healthNow()
	require.Equal(t, "ok", h.Status, body)
	require.True(t, metric(`policycheck_receipt_key_reloads_total\{result="rotated"\} 1`))

	// A policy that does not compile: degraded while it is refused, ok
	// once a good one loads.
	require.NoError(t, os.WriteFile(policy, []byte("package policycheck.rules.test\n\nhide contains x if {"), 0o600))
	require.Eventually(t, func() bool { return metric(`policycheck_policy_reload_failing 1`) }, 10*time.Second, 10*time.Millisecond)
	status, h, body = healthNow()
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "degraded", h.Status, body)
	require.True(t, strings.Contains(strings.Join(h.Reasons, "\n"), "policy reload refused"), body)
	require.NoError(t, os.WriteFile(policy, []byte(hideRule("search_docs")), 0o600))
	require.Eventually(t, func() bool { return metric(`policycheck_policy_reload_failing 0`) }, 10*time.Second, 10*time.Millisecond)
	_, h, body = healthNow()
	require.Equal(t, "ok", h.Status, body)
	require.Empty(t, h.Reasons, body)
}
