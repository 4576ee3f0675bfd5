package cli_test

import (
	"archive/tar"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/stretchr/testify/require"
)

// operatorDir writes a directory of operator policies and data: a filter
// that calls the shipped library, a rule, a decision-log mask, a test
// (left out of bundles) and data under operator/.
func operatorDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "rules"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "operator"), 0o755))
	writeFile(t, dir, "vault.rego", "package policycheck.capabilities.vault\n\nimport data.policycheck.lib\n\nprepare_tools := lib.names(input.tools) - {\"secret_op\"}\n")
	writeFile(t, dir, "rules/hide.rego", "package policycheck.rules.hide_time\n\nhide contains \"get_time\" if data.operator.quiet\n")
	writeFile(t, dir, "rules/hide_test.rego", "package policycheck.rules.hide_time_test\n\ntest_x if true\n")
	writeFile(t, dir, "operator/data.json", `{"quiet": true}`)
	writeFile(t, dir, "mask.rego", "package system.log\n\nmask contains \"/input/context/secret\"\n")
	return dir
}

// tarNames lists the files of the bundle file.
func tarNames(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		require.NoError(t, err)
		names = append(names, hdr.Name)
	}
}

func readBundle(t *testing.T, file string) bundle.Bundle {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	b, err := bundle.NewReader(f).WithSkipBundleVerification(true).Read()
	require.NoError(t, err)
	return b
}

// TestBundleBuildManifest: the built bundle's manifest has the roots of its
// packages and data (so the shipped policies stay in place beside it) and
// the revision given, or a digest of its content; tests are left out.
func TestBundleBuildManifest(t *testing.T) {
	dir := operatorDir(t)
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	res := run(t, "", "bundle", "build", dir, "--revision", "2024-06-01.1", "--output", out)
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, out+": revision 2024-06-01.1, roots operator policycheck/capabilities/vault policycheck/rules/hide_time system/log, 3 policies, unsigned\n", res.stdout)
	b := readBundle(t, out)
	require.Equal(t, "2024-06-01.1", b.Manifest.Revision)
	require.NotNil(t, b.Manifest.Roots)
	require.Equal(t, []string{"operator", "policycheck/capabilities/vault", "policycheck/rules/hide_time", "system/log"}, *b.Manifest.Roots)
	var paths []string
	for _, m := range b.Modules {
		paths = append(paths, m.URL)
	}
	require.ElementsMatch(t, []string{"/vault.rego", "/rules/hide.rego", "/mask.rego"}, paths)
	require.Equal(t, map[string]any{"operator": map[string]any{"quiet": true}}, b.Data)

	// Without --revision: a digest of the content, the same for the same files.
	again := filepath.Join(t.TempDir(), "b.tar.gz")
	for _, o := range []string{out, again} {
		res = run(t, "", "bundle", "build", dir, "--output", o)
		require.Equal(t, 0, res.code, res.stderr)
	}
	rev := readBundle(t, out).Manifest.Revision
	require.Regexp(t, `^[0-9a-f]{12}$`, rev)
	require.Equal(t, rev, readBundle(t, again).Manifest.Revision)
	writeFile(t, dir, "operator/data.json", `{"quiet": false}`)
	res = run(t, "", "bundle", "build", dir, "--output", again)
	require.Equal(t, 0, res.code, res.stderr)
	require.NotEqual(t, rev, readBundle(t, again).Manifest.Revision)
}

// TestBundleBuildBadInput: what cannot make a good bundle exits 2, naming
// the file.
func TestBundleBuildBadInput(t *testing.T) {
	dir := operatorDir(t)
	keys := t.TempDir()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalECPrivateKey(ec)
	require.NoError(t, err)
	ecKey := writeFile(t, keys, "ec.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})))
	pubDER, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	require.NoError(t, err)
	pubKey := writeFile(t, keys, "ec.pub.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})))
	secret := writeFile(t, keys, "secret", "s3cret")
	badClaims := writeFile(t, keys, "claims.json", `["scope"]`)
	uncompiled := t.TempDir()
	bad := writeFile(t, uncompiled, "bad.rego", "package policycheck.rules.bad\n\ndeny if {\n\tinput.x == y\n}\n")
	unparsed := t.TempDir()
	writeFile(t, unparsed, "broken.rego", "package policycheck.rules.broken\n\nhide contains x if {\n")
	shipped := t.TempDir()
	writeFile(t, shipped, "lib.rego", "package policycheck.lib\n\nmine := 1\n")
	registry := t.TempDir()
	writeFile(t, registry, "x.rego", "package policycheck.rules.x\n\nhide := set()\n")
	require.NoError(t, os.MkdirAll(filepath.Join(registry, "policycheck"), 0o755))
	writeFile(t, registry, "policycheck/data.json", `{"registry": {}}`)
	noRego := t.TempDir()
	writeFile(t, noRego, "data.json", `{}`)
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	for _, tc := range []struct {
		note string
		args []string
		want string
	}{
		{"a policy that does not compile", []string{uncompiled}, bad + ":4: rego_unsafe_var_error: var y is unsafe"},
		{"a policy that does not parse", []string{unparsed}, "broken.rego:"},
		{"a package the shipped policies own", []string{shipped}, "lib.rego: package policycheck.lib: the shipped policies own policycheck.lib"},
		{"data.policycheck", []string{registry}, "data.policycheck is the engine's"},
		{"no policies", []string{noRego}, "no Rego policies"},
		{"a path that does not exist", []string{filepath.Join(dir, "missing")}, "missing: no such file"},
		{"an unreadable key", []string{dir, "--signing-key", filepath.Join(keys, "missing.pem")}, "--signing-key: open " + filepath.Join(keys, "missing.pem")},
		{"an EC key for RS256", []string{dir, "--signing-key", ecKey}, "--signing-key " + ecKey + ": a *ecdsa.PrivateKey cannot sign RS256"},
		{"an EC P-256 key for ES384", []string{dir, "--signing-key", ecKey, "--signing-alg", "ES384"}, "an ECDSA key on P-256, and ES384 needs P-384"},
		{"a public key", []string{dir, "--signing-key", pubKey, "--signing-alg", "ES256"}, `a PEM "PUBLIC KEY", not a private key`},
		{"a secret for ES256", []string{dir, "--signing-key", secret, "--signing-alg", "ES256"}, "not a PEM key"},
		{"a PEM key as an HMAC secret", []string{dir, "--signing-key", ecKey, "--signing-alg", "HS256"}, "HS256 signs with a shared secret"},
		{"an unknown algorithm", []string{dir, "--signing-key", ecKey, "--signing-alg", "ES999"}, `--signing-alg "ES999"`},
		{"claims that are not an object", []string{dir, "--signing-key", ecKey, "--signing-alg", "ES256", "--claims-file", badClaims}, "--claims-file " + badClaims + ": not a JSON object"},
		{"an algorithm without a key", []string{dir, "--signing-alg", "ES256"}, "need --signing-key"},
		{"the default algorithm without a key", []string{dir, "--signing-alg", "RS256"}, "need --signing-key"},
		{"claims without a key", []string{dir, "--claims-file", badClaims}, "need --signing-key"},
		{"no path", nil, "needs a PATH"},
		{"an output that cannot be written", []string{dir, "--output", filepath.Join(keys, "missing", "b.tar.gz")}, "--output: open"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			args := append([]string{"bundle", "build", "--output", out}, tc.args...)
			res := run(t, "", args...)
			require.Equal(t, 2, res.code, res.stdout+res.stderr)
			require.Contains(t, res.stderr, tc.want)
			require.Empty(t, res.stdout)
		})
	}
	_, err = os.Stat(out)
	require.True(t, os.IsNotExist(err), "nothing was written")

	// Keys that fit sign: ES256 and an HMAC secret, with claims.
	claims := writeFile(t, keys, "scope.json", `{"scope": "write"}`)
	for _, args := range [][]string{
		{"--signing-key", ecKey, "--signing-alg", "ES256"},
		{"--signing-key", secret, "--signing-alg", "HS256", "--claims-file", claims},
	} {
		res := run(t, "", append([]string{"bundle", "build", dir, "--output", out}, args...)...)
		require.Equal(t, 0, res.code, res.stderr)
		require.True(t, strings.HasSuffix(res.stdout, "signed "+args[3]+"\n"), res.stdout)
		require.Contains(t, tarNames(t, out), "/.signatures.json")
	}
}
