package docs_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/policycheck/policycheck/internal/testkit/bundletest"
	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// TestScalingSignedBundle runs scaling.md's "Building and signing the
// bundle": the page's bundle build command line on an operator directory,
// its bundle served to serve --config with the page's signing block merged
// into the replicas' configuration. The signed bundle activates and
// decides; one with a file changed after signing, and one not signed, are
// refused while it keeps serving, and /health says degraded with the
// bundle's error.
func TestScalingSignedBundle(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and starts serve")
	}
	bin := servetest.Build(t)
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bundle-key.pem"),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	pub := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "operator"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "operator", "hide.rego"),
		[]byte("package policycheck.rules.quiet\n\nimport data.policycheck.lib\n\n# The shipped library beside the bundle: its roots leave it in place.\nhide contains \"get_time\" if count(lib.calls(\"no_such_tool\")) == 0\n"), 0o600))

	// The page's command line, run in dir.
	page, err := os.ReadFile("scaling.md")
	require.NoError(t, err)
	lines := regexp.MustCompile(`(?m)^policycheck bundle build .*$`).FindAllString(string(page), -1)
	require.Len(t, lines, 1, "scaling.md shows one bundle build command line")
	buildArgs := strings.Fields(lines[0])[1:]
	build := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		raw, err := os.ReadFile(filepath.Join(dir, "policycheck.tar.gz"))
		require.NoError(t, err)
		return raw
	}
	signed := build(buildArgs...)

	// The replicas' configuration with the signing block merged in.
	yamls := codeBlocks(t, "scaling.md", "yaml")
	require.Len(t, yamls, 2, "scaling.md: the replicas' configuration, then its signing block")
	bundles, logs := newBundleHost(t), newLogCollector(t)
	cfgText := strings.NewReplacer("http://127.0.0.1:8282", bundles.URL, "http://127.0.0.1:8383", logs.URL).Replace(yamls[0])
	var cfg, signing map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(cfgText), &cfg))
	require.NoError(t, yaml.Unmarshal([]byte(yamls[1]), &signing))
	mergeYAML(cfg, signing)
	keys := cfg["keys"].(map[string]any)
	require.Len(t, keys, 1)
	for _, k := range keys {
		k := k.(map[string]any)
		require.Contains(t, k["key"], "BEGIN PUBLIC KEY")
		k["key"] = pub
	}
	raw, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	cfgPath := filepath.Join(dir, "opa.yaml")
	require.NoError(t, os.WriteFile(cfgPath, raw, 0o600))

	bundles.current.Store(&signed)
	p := servetest.Start(t, bin, "--registry", "../examples/registry.yaml", "--config", cfgPath)
	client := p.Client()
	type bundleHealth struct {
		Serving string `json:"serving"`
		Error   string `json:"error"`
	}
	health := func() (string, bundleHealth) {
		resp, err := client.Get(p.URL + "/health")
		require.NoError(t, err)
		defer resp.Body.Close()
		var h struct {
			Status  string                  `json:"status"`
			Bundles map[string]bundleHealth `json:"bundles"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
		return h.Status, h.Bundles[bundleName]
	}
	history, err := os.ReadFile("../examples/histories/refund.json")
	require.NoError(t, err)
	available := func() []string {
		resp, err := client.Post(p.URL+"/v1/decide", "application/json", bytes.NewReader([]byte(`{"history": `+string(history)+`}`)))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var d struct {
			Available []string `json:"available"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
		return d.Available
	}
	require.Eventually(t, func() bool { s, b := health(); return s == "ok" && b.Serving == "r1" }, 20*time.Second, 50*time.Millisecond)
	decided := available()
	require.NotEmpty(t, decided)
	require.NotContains(t, decided, "get_time", "the bundle's rule decides")

	var unsignedArgs []string
	for i := 0; i < len(buildArgs); i++ {
		if buildArgs[i] == "--signing-key" {
			i++
			continue
		}
		unsignedArgs = append(unsignedArgs, buildArgs[i])
	}
	for _, tc := range []struct {
		note string
		raw  []byte
		want string
	}{
		{"a file changed after signing", bundletest.Tamper(t, signed, "/hide.rego", "get_time", "search_docs"), "hide.rego"},
		{"not signed", build(append(unsignedArgs, "--revision", "r2")...), "signature"},
	} {
		bundles.current.Store(&tc.raw)
		var got bundleHealth
		require.Eventually(t, func() bool {
			var s string
			s, got = health()
			return s == "degraded" && got.Error != ""
		}, 20*time.Second, 50*time.Millisecond, tc.note)
		require.Contains(t, got.Error, tc.want, tc.note)
		require.Equal(t, "r1", got.Serving, tc.note)
		require.Equal(t, decided, available(), tc.note)
		bundles.current.Store(&signed)
		require.Eventually(t, func() bool { s, _ := health(); return s == "ok" }, 20*time.Second, 50*time.Millisecond, tc.note)
	}
}

// mergeYAML merges from into into, maps key by key.
func mergeYAML(into, from map[string]any) {
	for k, v := range from {
		if fm, ok := v.(map[string]any); ok {
			if im, ok := into[k].(map[string]any); ok {
				mergeYAML(im, fm)
				continue
			}
		}
		into[k] = v
	}
}
