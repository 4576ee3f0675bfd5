package docs_test

import (
	"archive/zip"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fileProxy writes a GOPROXY directory (file://) serving one module,
// example.com/tool, at v1.0.0 (a command printing "tool ran") and v1.0.1
// (a command that does not compile), and returns its URL.
func fileProxy(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "example.com", "tool", "@v")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	gomod := "module example.com/tool\n\ngo 1.21\n"
	for v, main := range map[string]string{
		"v1.0.0": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"tool ran\") }\n",
		"v1.0.1": "package main\n\nfunc main() { undefined() }\n",
	} {
		var z bytes.Buffer
		w := zip.NewWriter(&z)
		for name, body := range map[string]string{"go.mod": gomod, "main.go": main} {
			f, err := w.Create("example.com/tool@" + v + "/" + name)
			require.NoError(t, err)
			_, err = f.Write([]byte(body))
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
		require.NoError(t, os.WriteFile(filepath.Join(dir, v+".zip"), z.Bytes(), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, v+".mod"), []byte(gomod), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, v+".info"), []byte(`{"Version":"`+v+`","Time":"2026-01-01T00:00:00Z"}`), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "list"), []byte("v1.0.0\nv1.0.1\n"), 0o644))
	return "file://" + filepath.ToSlash(root)
}

// fetchScript runs script in bash in dir after sourcing
// scripts/fetch.sh, with an empty module cache, proxy as GOPROXY and CI
// set to ci ("" unsets it).
func fetchScript(t *testing.T, dir, proxy, ci, script string) (stdout, stderr string, code int) {
	t.Helper()
	lib, err := filepath.Abs("../scripts/fetch.sh")
	require.NoError(t, err)
	cmd := exec.Command("bash", "-c", "set -euo pipefail; source "+lib+"; "+script)
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, "GOPROXY=") && !strings.HasPrefix(kv, "GOFLAGS=") {
			env = append(env, kv)
		}
	}
	env = append(env, "GOPROXY="+proxy, "GOMODCACHE="+t.TempDir(), "GOFLAGS=-modcacherw", "GOSUMDB=off",
		"GONOSUMDB=*", "GOTOOLCHAIN=local", "GOWORK=off")
	if ci != "" {
		env = append(env, "CI="+ci)
	}
	cmd.Env = env
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	}
	require.NoError(t, err)
	return o.String(), e.String(), 0
}

// TestSuiteSkipsWhatItCannotFetch: scripts/test.sh's steps that reach
// the network (staticcheck and stock opa at pinned versions, the modules
// go mod tidy reads) go through scripts/fetch.sh. A tool that fetches is
// installed and runs; one that cannot be fetched (GOPROXY=off, an empty
// module cache) is skipped with a note outside CI and fails the run under
// CI=true; one that fetches but does not build fails everywhere, never
// passing for being offline. tidy: an untidy go.mod fails everywhere; a
// tidy that cannot fetch what it reads is skipped outside CI only.
func TestSuiteSkipsWhatItCannotFetch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	script, err := os.ReadFile("../scripts/test.sh")
	require.NoError(t, err)
	for _, want := range []string{`go_tool "$tools" "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"`, "go_mod_tidy_diff"} {
		assert.True(t, strings.Contains(string(script), want), "scripts/test.sh lacks %s", want)
	}
	assert.False(t, strings.Contains(string(script), "go run honnef.co"), "scripts/test.sh runs staticcheck without go_tool")
	for _, f := range []string{"rego-checks.sh", "stock-opa-agrees.sh"} {
		b, err := os.ReadFile("../scripts/" + f)
		require.NoError(t, err)
		assert.True(t, strings.Contains(string(b), `go_tool "`), "scripts/%s builds stock opa without go_tool", f)
	}

	proxy := fileProxy(t)
	tool := `if go_tool "$PWD/bin" example.com/tool@%s "the tool"; then bin/tool; else echo skipped; fi`
	for _, tc := range []struct {
		name, proxy, version, ci string
		code                     int
		stdout, stderr           string
	}{
		{"fetched, outside CI", proxy, "v1.0.0", "", 0, "tool ran", ""},
		{"fetched, under CI", proxy, "v1.0.0", "true", 0, "tool ran", ""},
		{"offline, outside CI", "off", "v1.0.0", "", 0, "skipped", "note: skipping the tool (example.com/tool@v1.0.0): it could not be fetched"},
		{"offline, under CI", "off", "v1.0.0", "true", 1, "", "CI=true but the tool (example.com/tool@v1.0.0) could not be fetched"},
		{"offline, CI not true", "off", "v1.0.0", "1", 0, "skipped", "note: skipping the tool"},
		{"does not build, outside CI", proxy, "v1.0.1", "", 1, "", "go install example.com/tool@v1.0.1 failed"},
		{"does not build, under CI", proxy, "v1.0.1", "true", 1, "", "go install example.com/tool@v1.0.1 failed"},
	} {
		t.Run("go_tool "+tc.name, func(t *testing.T) {
			stdout, stderr, code := fetchScript(t, t.TempDir(), tc.proxy, tc.ci, strings.ReplaceAll(tool, "%s", tc.version))
			require.Equal(t, tc.code, code, "stdout %s\nstderr %s", stdout, stderr)
			assert.Equal(t, tc.stdout, strings.TrimSpace(stdout))
			assert.Contains(t, stderr, tc.stderr)
			if tc.stdout != "skipped" {
				assert.NotContains(t, stderr, "note: skipping")
			}
		})
	}

	module := func(t *testing.T, gomod string) string {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tools.go"), []byte("//go:build tools\n\npackage tools\n\nimport _ \"example.com/tool\"\n"), 0o644))
		return dir
	}
	tidy := "module example.com/m\n\ngo 1.21\n\nrequire example.com/tool v1.0.0\n"
	untidy := "module example.com/m\n\ngo 1.21\n"
	for _, tc := range []struct {
		name, gomod, proxy, ci string
		code                   int
		stderr                 string
	}{
		{"untidy, outside CI", untidy, proxy, "", 1, "not tidy"},
		{"untidy, under CI", untidy, proxy, "true", 1, "not tidy"},
		{"offline, outside CI", tidy, "off", "", 0, "note: skipping go mod tidy -diff"},
		{"offline, under CI", tidy, "off", "true", 1, "CI=true but go mod tidy -diff"},
	} {
		t.Run("tidy "+tc.name, func(t *testing.T) {
			stdout, stderr, code := fetchScript(t, module(t, tc.gomod), tc.proxy, tc.ci, "go_mod_tidy_diff")
			require.Equal(t, tc.code, code, "stdout %s\nstderr %s", stdout, stderr)
			assert.Contains(t, stderr, tc.stderr)
		})
	}
}
