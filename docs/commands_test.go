// Every command the README and the docs show, and every statement in the
// docs about a command's output, is run here and compared, so that the
// docs cannot drift from the program: the install step (against a real go
// install), each README command with the installed binary on PATH, the
// sidecar started as docs/sidecar.md starts it with docs/sidecar.md's
// Python client and docs/reference/http.md's error example, the
// commands of docs/reference/commands.md, the example input error, the
// coverage figure of docs/testing.md, the history example of
// docs/input.md, and each runnable command of docs/*.md.
package docs_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/loader"
)

// shellCommands returns the commands of the ```sh blocks of a Markdown
// file, continuation lines joined and comments removed.
func shellCommands(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []string
	in := false
	pending := ""
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		case !in:
			continue
		}
		if i := strings.Index(line, "  #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if strings.HasSuffix(line, "\\") {
			pending += strings.TrimSuffix(line, "\\")
			continue
		}
		if cmd := strings.Join(strings.Fields(pending+line), " "); cmd != "" {
			out = append(out, cmd)
		}
		pending = ""
	}
	return out
}

// codeBlocks returns the bodies of the fenced blocks of a language.
func codeBlocks(t *testing.T, file, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	re := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```")
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// installed builds the binary as the README's install step does, into a
// temporary GOBIN, and returns that directory.
func installed(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	cmd := exec.Command("go", "install", "./cmd/policycheck")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOBIN="+bin)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go install ./cmd/policycheck: %s", out)
	_, err = os.Stat(filepath.Join(bin, "policycheck"))
	require.NoError(t, err, "go install put no policycheck in GOBIN")
	return bin
}

// sh runs a command line in the repository root with bin first on PATH.
func sh(bin, line string) (stdout, stderr string, code int) {
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return o.String(), e.String(), code
}

// The README's commands, one by one.
func TestReadmeCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary with go install")
	}
	// Where go install puts the binary when GOBIN is unset, as the README
	// says: $(go env GOPATH)/bin.
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	require.NoError(t, err)
	list := exec.Command("go", "list", "-f", "{{.Target}}", "./cmd/policycheck")
	list.Dir = ".."
	list.Env = append(os.Environ(), "GOBIN=")
	target, err := list.Output()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(strings.TrimSpace(string(gopath)), "bin", "policycheck"), strings.TrimSpace(string(target)),
		"README: without GOBIN, go install puts policycheck in $(go env GOPATH)/bin")

	bin := installed(t)
	cmds := shellCommands(t, "../README.md")
	require.Contains(t, cmds, "go install ./cmd/policycheck")
	require.Contains(t, cmds, "bash scripts/test.sh")
	assert.GreaterOrEqual(t, runShown(t, bin, "../README.md"), 2)
}

// The commands of docs/sidecar.md (the sidecar, with its Python client,
// the error example of docs/reference/http.md and the request for
// explain's page) and of docs/reference/commands.md, with the installed
// binary as a reader would run them.
func TestSidecarCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary with go install")
	}
	bin := installed(t)
	assert.Equal(t, 1, runShown(t, bin, "sidecar.md"), "docs/sidecar.md starts the sidecar once")
	assert.Equal(t, 1, runShown(t, bin, "reference/commands.md"), "docs/reference/commands.md writes explain's page")
}

// runShown runs the commands of a page's ```sh blocks with the installed
// binary, and returns how many it ran.
func runShown(t *testing.T, bin, file string) int {
	t.Helper()
	ran := 0
	for _, c := range shellCommands(t, file) {
		switch {
		case c == "go install ./cmd/policycheck":
			continue // done by installed, into a temporary GOBIN
		case c == "bash scripts/test.sh":
			continue // the suite this test is part of
		case strings.HasPrefix(c, "policycheck serve "):
			checkServe(t, bin, c)
			ran++
			continue
		case strings.HasPrefix(c, sidecarPageCommand):
			continue // run by checkServe, against the sidecar it starts
		case strings.Contains(c, " --format html > "):
			checkPageCommand(t, bin, c)
			ran++
			continue
		case strings.HasPrefix(c, "go run ./cmd/policycheck "):
			// The same program as the installed binary, without a
			// second build.
			c = "policycheck " + strings.TrimPrefix(c, "go run ./cmd/policycheck ")
		}
		require.True(t, strings.HasPrefix(c, "policycheck "), "%s: command %q is neither run nor listed here", file, c)
		stdout, stderr, code := sh(bin, c)
		assert.Equal(t, 0, code, "%s\n%s", c, stderr)
		assert.NotEmpty(t, stdout, c)
		ran++
		if c == "policycheck version" {
			assert.Regexp(t, `^policycheck \S+\nOPA v1\.\d+\.\d+\nGo go1\.`, stdout)
		}
	}
	return ran
}

// checkServe starts the sidecar as docs/sidecar.md does (on a free port
// rather than 8181), checks /health, a decision, explain's page, the
// Python client of docs/sidecar.md and the error example of
// docs/reference/http.md, then stops it with SIGTERM, which must exit 0.
func checkServe(t *testing.T, bin, line string) {
	t.Helper()
	base, stop := startServe(t, bin, line)
	checkSidecar(t, base)
	stop()
}

// startServe starts the sidecar of a page's command line on a free port
// rather than the one it names, and returns its URL and a function that
// stops it with SIGTERM and checks that it exits 0.
func startServe(t *testing.T, bin, line string) (base string, stop func()) {
	t.Helper()
	args := strings.Fields(line)[1:]
	for i := range args {
		if i > 0 && args[i-1] == "--addr" {
			args[i] = "127.0.0.1:0"
		}
	}
	cmd := exec.Command(filepath.Join(bin, "policycheck"), args...)
	cmd.Dir = ".."
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // once stopped, a no-op
	addr := make(chan string, 1)
	var log bytes.Buffer
	readDone := make(chan struct{}) // closed once stderr is read to its end
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`msg="policycheck serving" addr=(\S+)`)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: never said it was serving", line)
	}
	stop = func() {
		t.Helper()
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		done := make(chan error, 1)
		// Wait closes the pipe: only once its reader has seen the end (the
		// process gone), and then the log is the reader's no more.
		go func() { <-readDone; done <- cmd.Wait() }()
		select {
		case err := <-done:
			assert.NoError(t, err, "serve exits 0 on SIGTERM\n%s", log.String())
		case <-time.After(time.Minute):
			t.Fatal("serve did not stop on SIGTERM")
		}
	}
	return base, stop
}

// checkSidecar checks the sidecar at base as checkServe says.
func checkSidecar(t *testing.T, base string) {
	t.Helper()
	resp, err := http.Get(base + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	hist, err := os.ReadFile("../examples/histories/refund.json")
	require.NoError(t, err)
	body := fmt.Sprintf(`{"history": %s}`, hist)
	resp, err = http.Post(base+"/v1/decide", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)

	checkSidecarPage(t, base)

	// docs/sidecar.md's Python client (every ```python block there), as
	// written, against this sidecar.
	ranPython := false
	py, err := exec.LookPath("python3")
	if err != nil {
		// The rest of this check goes on without python3 (outside CI).
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is required under CI (docs/sidecar.md's Python client runs on it)")
		}
		t.Log("python3 is not installed: docs/sidecar.md's Python client is not run")
	}
	for _, block := range codeBlocks(t, "sidecar.md", "python") {
		if py == "" {
			ranPython = true
			break
		}
		require.Contains(t, block, `"http://127.0.0.1:8181"`, "a docs/sidecar.md Python snippet that does not reach the page's sidecar")
		script := filepath.Join(t.TempDir(), "snippet.py")
		require.NoError(t, os.WriteFile(script, []byte(strings.ReplaceAll(block, "http://127.0.0.1:8181", base)), 0o600))
		cmd := exec.Command(py, script)
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "docs/sidecar.md's Python snippet:\n%s", out)
		ranPython = true
	}
	assert.True(t, ranPython, "docs/sidecar.md lost its Python client")

	// docs/reference/http.md's error example, for the request it names.
	var example string
	for _, b := range codeBlocks(t, "reference/http.md", "json") {
		if strings.Contains(b, `"error"`) {
			example = b
		}
	}
	require.NotEmpty(t, example, "docs/reference/http.md lost its sidecar error example")
	resp, err = http.Post(base+"/v1/decide", "application/json", strings.NewReader(`{"history": [{"kind": "nope", "parts": []}]}`))
	require.NoError(t, err)
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	// Byte for byte: errors are written as decisions are (indented).
	assert.Equal(t, example, string(got), "docs/reference/http.md's sidecar error example")

}

// run runs the command line in-process from the repository root.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = cli.Run(args, strings.NewReader(""), &o, &e)
	return o.String(), e.String(), code
}

// The example of an input error (docs/reference/commands.md, once the
// README's) names file and pointer as eval really does.
func TestReadmeInputErrorExample(t *testing.T) {
	page, err := os.ReadFile("reference/commands.md")
	require.NoError(t, err)
	m := regexp.MustCompile("e\\.g\\.\\s+`(history\\.json: [^`]+)`").FindStringSubmatch(string(page))
	require.NotNil(t, m, "docs/reference/commands.md lost its input error example")
	dir := t.TempDir()
	const msg = `{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}`
	hist := `[` + msg + `,{"kind":"response","parts":[{"part_kind":"text","content":"ok"}]},` + msg +
		`,{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"},{"part_kind":"tool-call","tool_name":"get_time","tool_call_id":"c1","args":{}}]}]`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "history.json"), []byte(hist), 0o600))
	reg, err := filepath.Abs("../examples/registry.yaml")
	require.NoError(t, err)
	t.Chdir(dir)
	_, stderr, code := run(t, "eval", "--registry", reg, "--history", "history.json")
	assert.Equal(t, cli.ExitBadUsage, code)
	assert.Equal(t, "policycheck: "+m[1]+"\n", stderr)
}

// docs/testing.md's coverage figure is what the shipped policies' tests
// reach.
func TestTestingCoverageFigure(t *testing.T) {
	t.Chdir("..")
	stdout, stderr, code := run(t, "test", "policies/", "--coverage", "--format", "json", "--timeout", "2m")
	require.Equal(t, cli.ExitOK, code, stderr)
	var out struct {
		Coverage struct {
			Coverage        float64 `json:"coverage"`
			CoveredLines    int     `json:"covered_lines"`
			NotCoveredLines int     `json:"not_covered_lines"`
		} `json:"coverage"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &out))
	doc, err := os.ReadFile("docs/testing.md")
	require.NoError(t, err)
	c := out.Coverage
	want := fmt.Sprintf("%.2f%% line coverage (`policycheck test policies/ --coverage`: %d of %d lines",
		c.Coverage, c.CoveredLines, c.CoveredLines+c.NotCoveredLines)
	m := regexp.MustCompile("[0-9.]+% line coverage \\(`policycheck test policies/ --coverage`: [0-9]+ of [0-9]+ lines").
		FindString(strings.Join(strings.Fields(string(doc)), " "))
	require.NotEmpty(t, m, "docs/testing.md lost its coverage figure")
	assert.Equal(t, want, m, "docs/testing.md's coverage figure is not what the run reports")
}

// docs/input.md's example history is one the loader accepts, schema and
// all.
func TestInputHistoryExample(t *testing.T) {
	var found bool
	for _, b := range codeBlocks(t, "input.md", "json") {
		if !strings.Contains(b, `"kind": "request"`) {
			continue
		}
		found = true
		h, err := loader.DecodeHistory("input.md", []byte(b), loader.DefaultLimits())
		require.NoError(t, err)
		require.NoError(t, loader.ValidateHistoryBytes("input.md", []byte(b)))
		assert.Len(t, h, 2)
	}
	assert.True(t, found, "docs/input.md lost its history example")
}

// templates are the docs' commands that name the reader's own files
// (run.json, tools.yaml, my-policies/, bundle.tar.gz) or other tools
// (stock opa: scripts/rego-checks.sh runs it; go test; mkdir; the
// scripts, which .ci/run runs or which take hours; policies export,
// which would write into the repository, and which TestTestingExport runs
// in a temporary directory): shown, not run here.
//
// The sidecar and the harnesses that reach it are run elsewhere, against
// a real server: policycheck serve by TestSidecarCommands (sidecar.md) and
// TestQuickstart (quickstart.md), and with the Python harnesses
// (approvals.md, trust.md) by go test ./examples.
var templates = regexp.MustCompile(`run\.json|tools\.yaml|my-policies/|bundle\.tar\.gz|^opa |^go run github\.com/open-policy-agent/opa|^go test |^mkdir |bash scripts/|^policycheck policies export |^policycheck serve |^python3 examples/harness/`)

// Each runnable command of docs/*.md runs, in process, and succeeds.
func TestDocsCommandsRun(t *testing.T) {
	files, err := filepath.Glob("*.md")
	require.NoError(t, err)
	t.Chdir("..")
	ran := 0
	for _, f := range files {
		for _, c := range shellCommands(t, filepath.Join("docs", f)) {
			if templates.MatchString(c) {
				continue
			}
			require.True(t, strings.HasPrefix(c, "policycheck "), "%s: command %q is neither run nor a listed template", f, c)
			args, err := splitArgs(strings.TrimPrefix(c, "policycheck "))
			require.NoError(t, err, c)
			stdout, stderr, code := run(t, append(args, timeoutFor(args)...)...)
			assert.Equal(t, cli.ExitOK, code, "%s: %s\n%s", f, c, stderr)
			assert.NotEmpty(t, stdout, "%s: %s", f, c)
			ran++
		}
	}
	assert.GreaterOrEqual(t, ran, 8)
}

// timeoutFor gives test runs the time the race detector on two busy
// cores needs.
func timeoutFor(args []string) []string {
	if len(args) > 0 && args[0] == "test" {
		return []string{"--timeout", "2m"}
	}
	return nil
}

// splitArgs splits a command line as sh would, for the quoting the docs
// use ('...' and "...").
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	quote := rune(0)
	inArg := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inArg = r, true
		case r == ' ':
			if inArg {
				out = append(out, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if inArg {
		out = append(out, cur.String())
	}
	return out, nil
}
