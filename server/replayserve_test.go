package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// TestReplayOfServesOwnLog: a real `policycheck serve` process with OPA's
// console decision logger on writes its decisions into its own log on
// standard error, in text (the default) and with --log-format json,
// beside the records that are not decisions (the startup record first).
// `policycheck replay` reads that log as serve wrote it, skips and counts
// the other records, and gives the report that replaying the histories
// behind the decisions gives.
func TestReplayOfServesOwnLog(t *testing.T) {
	root := conformance.ModuleRoot()
	examples := filepath.Join(root, "examples")
	regPath := filepath.Join(examples, "registry.yaml")
	policies := filepath.Join(examples, "policies")
	cfg := filepath.Join(t.TempDir(), "opa-config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("decision_logs:\n  console: true\n"), 0o600))
	ctxDoc := `{"group": "support"}`
	ctxFile := filepath.Join(t.TempDir(), "context.json")
	require.NoError(t, os.WriteFile(ctxFile, []byte(ctxDoc), 0o600))
	candidate := filepath.Join(examples, "candidate")
	bin := servetest.Build(t)

	replay := func(t *testing.T, input string, extra ...string) (map[string]any, string) {
		t.Helper()
		var out, errb bytes.Buffer
		args := append([]string{"replay", "--format", "json", "--registry", regPath,
			"--baseline", policies, "--candidate", policies, "--candidate", candidate}, extra...)
		code := cli.Run(append(args, input), strings.NewReader(""), &out, &errb)
		require.Equal(t, 0, code, errb.String())
		var rep map[string]any
		require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
		return rep, errb.String()
	}
	histDir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(examples, "histories", "*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(histDir, filepath.Base(f)), raw, 0o600))
	}
	fromHistories, _ := replay(t, histDir, "--context", ctxFile)
	for _, c := range fromHistories["changes"].([]any) {
		c := c.(map[string]any)
		c["run"] = filepath.Base(c["run"].(string))
	}
	require.NotEmpty(t, fromHistories["changes"])
	want, _ := json.MarshalIndent(fromHistories, "", " ")

	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			p := servetest.Start(t, bin, "--registry", regPath, "--policy", policies, "--config", cfg, "--log-format", format)
			steps := 0
			for _, f := range files {
				raw, err := os.ReadFile(f)
				require.NoError(t, err)
				steps += len(decideSteps(t, p, filepath.Base(f), splitHistory(t, raw), ctxDoc))
			}
			p.Stop()
			log := filepath.Join(t.TempDir(), "serve.log")
			require.NoError(t, os.WriteFile(log, []byte(p.Logged()), 0o600))
			first, _, _ := strings.Cut(p.Logged(), "\n")
			require.Contains(t, first, "policycheck serving", "the log begins with the startup record")

			fromLog, stderr := replay(t, log)
			require.EqualValues(t, steps, fromLog["decisions"])
			got, _ := json.MarshalIndent(fromLog, "", " ")
			assert.Equal(t, string(want), string(got))

			// Every record but the decisions was skipped, and counted.
			records := strings.Count(p.Logged(), "\n")
			m := regexp.MustCompile(`replay: skipped (\d+) record\(s\) of serve's log that are not decisions`).FindStringSubmatch(stderr)
			require.NotNil(t, m, stderr)
			skipped, _ := strconv.Atoi(m[1])
			assert.Equal(t, records-steps, skipped)
			assert.GreaterOrEqual(t, skipped, 2, "the startup record and the shutdown record at least")
		})
	}
}

// decideSteps posts msgs to the serve process p's run one message a
// request (/v1/runs/<run>/decide, offset i, the context ctxDoc, JSON text),
// requires each answered 200 and returns the answers.
func decideSteps(t *testing.T, p *servetest.Process, run string, msgs []json.RawMessage, ctxDoc any) [][]byte {
	t.Helper()
	var answers [][]byte
	gen := "" // the generation of the run's last answer
	for i, m := range msgs {
		body := fmt.Sprintf(`{"offset": %d, "messages": [%s], "context": %s}`, i, m, ctxDoc)
		if i > 0 {
			body = fmt.Sprintf(`{"offset": %d, "messages": [%s], "context": %s, "generation": %q}`, i, m, ctxDoc, gen)
		}
		resp, err := p.Client().Post(p.URL+"/v1/runs/"+run+"/decide", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
		var answer struct{ Generation string }
		require.NoError(t, json.Unmarshal(out, &answer))
		gen = answer.Generation
		answers = append(answers, out)
	}
	return answers
}
