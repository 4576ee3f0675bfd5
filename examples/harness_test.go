package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// docLine returns the one command line of a doc's ```sh blocks that
// begins with prefix (doc is a path from the repository root).
func docLine(t *testing.T, doc, prefix string) []string {
	t.Helper()
	readme, err := os.ReadFile("../" + doc)
	require.NoError(t, err)
	var found [][]string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		for _, line := range strings.Split(m[1], "\n") {
			if strings.HasPrefix(line, prefix) {
				found = append(found, strings.Fields(line))
			}
		}
	}
	require.Len(t, found, 1, "%s's command line beginning %q", doc, prefix)
	return found[0]
}

// runHarness starts the sidecar as doc's line beginning with serve starts
// it, on a free port rather than 8181, runs the harness of doc's line
// beginning with harness against it from the repository root, and returns
// what the harness printed.
func runHarness(t *testing.T, doc, serve, harness string) []byte {
	t.Helper()
	py := servetest.Python3(t)
	args := docLine(t, doc, serve)[2:]
	for i := range args {
		if i > 0 && args[i-1] == "--addr" {
			args[i] = "127.0.0.1:0" // a free port rather than 8181
		}
	}
	url := servetest.StartIn(t, "..", servetest.Build(t), args...).URL
	cmdline := docLine(t, doc, harness)
	require.Equal(t, "http://127.0.0.1:8181", cmdline[2], "the doc's harness reaches the doc's sidecar")
	cmdline[2] = url
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, cmdline[1:]...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	return out
}

// TestApprovalHarnessOverTheSidecar runs docs/approvals.md's Python
// harness (examples/harness/approvals.py, stdlib only) as the page runs
// it, against a real `policycheck serve` started with the page's own
// arguments (all of examples/policies, the groups policy among them): the
// approval_required call becomes pydantic-ai's DeferredToolRequests with
// its digest, the person's answer comes back as DeferredToolResults and
// the call executes with the approver's arguments; the same answer on
// edited arguments does not apply.
func TestApprovalHarnessOverTheSidecar(t *testing.T) {
	out := runHarness(t, "docs/approvals.md", "policycheck serve --addr ", "python3 examples/harness/approvals.py ")

	type execution struct {
		ToolCallID string         `json:"tool_call_id"`
		Args       map[string]any `json:"args"`
	}
	type outcome struct {
		Execute []execution      `json:"execute"`
		Refused []map[string]any `json:"refused"`
		Waiting []string         `json:"waiting"`
	}
	var got struct {
		Requests struct {
			Approvals []map[string]any          `json:"approvals"`
			Metadata  map[string]map[string]any `json:"metadata"`
		} `json:"requests"`
		Results struct {
			Approvals map[string]map[string]any `json:"approvals"`
		} `json:"results"`
		Resumed     outcome          `json:"resumed"`
		Approvals   []map[string]any `json:"approvals"`
		Tampered    outcome          `json:"tampered"`
		TamperedWhy []string         `json:"tampered_why"`
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))

	// DeferredToolRequests: the one call above the limit, as its part.
	require.Len(t, got.Requests.Approvals, 1)
	assert.Equal(t, "t2", got.Requests.Approvals[0]["tool_call_id"])
	assert.Equal(t, "transfer_funds", got.Requests.Approvals[0]["tool_name"])
	assert.Equal(t, "Approve a transfer of 5000 from ops to savings?", got.Requests.Metadata["t2"]["question"])
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, got.Requests.Metadata["t2"]["digest"])
	// DeferredToolResults carries that digest back.
	assert.Equal(t, got.Requests.Metadata["t2"]["digest"], got.Results.Approvals["t2"]["digest"])

	// Resumed: both execute, t2 with the approver's amount.
	require.Len(t, got.Resumed.Execute, 2, string(out))
	assert.Equal(t, "t2", got.Resumed.Execute[1].ToolCallID)
	assert.Equal(t, 4000.0, got.Resumed.Execute[1].Args["amount"])
	assert.Equal(t, 250.0, got.Resumed.Execute[0].Args["amount"])
	assert.Empty(t, got.Resumed.Waiting)
	require.Len(t, got.Approvals, 1)
	assert.Equal(t, true, got.Approvals[0]["applied"])
	assert.Equal(t, []any{"ana"}, got.Approvals[0]["approvers"])

	// The same answer on edited arguments does not apply.
	assert.Equal(t, []string{"t2"}, got.Tampered.Waiting)
	require.Len(t, got.TamperedWhy, 1)
	assert.Contains(t, got.TamperedWhy[0], "not what the approver was shown")
}

// TestVerifiedHarnessOverTheSidecar runs docs/trust.md's verified-evidence
// harness (examples/harness/verified.py, stdlib only) as the page runs
// it, against a real `policycheck serve --evidence verified --receipt-key`
// started with the page's arguments: a whole run whose receipts the
// harness keeps in each tool return's metadata.policycheck_receipt
// executes every call, the deferred tool and the vault's included; the
// same history without the receipts does not reach the vault's tool, and
// the decision says which evidence did not count.
func TestVerifiedHarnessOverTheSidecar(t *testing.T) {
	out := runHarness(t, "docs/trust.md", "policycheck serve --evidence verified ", "python3 examples/harness/verified.py ")
	var got struct {
		Verdicts           [][]string `json:"verdicts"`
		WithoutReceipts    [][]string `json:"without_receipts"`
		UnverifiedEvidence []struct {
			Message, Part int
			Why           string
		} `json:"unverified_evidence"`
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	assert.Equal(t, [][]string{{"search_tools", "execute"}, {"search_docs", "execute"}, {"load_capability", "execute"}, {"secret_op", "execute"}}, got.Verdicts)
	assert.Equal(t, [][]string{{"secret_op", "not_available_yet"}}, got.WithoutReceipts)
	require.Len(t, got.UnverifiedEvidence, 2)
	assert.Equal(t, 2, got.UnverifiedEvidence[0].Message)
	assert.Contains(t, got.UnverifiedEvidence[0].Why, `no receipt (metadata.policycheck_receipt) of the search call "s1"`)
	assert.Equal(t, 6, got.UnverifiedEvidence[1].Message)
	assert.Contains(t, got.UnverifiedEvidence[1].Why, `of the load call "l1"`)
}

// TestReadmeShowsTheHarness: the Python harnesses the docs show (once the
// README; docs/approvals.md and docs/trust.md) are the committed
// examples/harness/approvals.py and verified.py, which the tests above run.
func TestReadmeShowsTheHarness(t *testing.T) {
	readme, err := os.ReadFile("../docs/approvals.md")
	require.NoError(t, err)
	harness, err := os.ReadFile("harness/approvals.py")
	require.NoError(t, err)
	text := string(readme)
	start := strings.Index(text, "```python\n")
	require.GreaterOrEqual(t, start, 0, "docs/approvals.md lost its approval harness")
	rest := text[start+len("```python\n"):]
	end := strings.Index(rest, "```")
	require.GreaterOrEqual(t, end, 0)
	assert.Equal(t, string(harness), rest[:end], "docs/approvals.md's harness and examples/harness/approvals.py differ")

	verified, err := os.ReadFile("harness/verified.py")
	require.NoError(t, err)
	trustPage, err := os.ReadFile("../docs/trust.md")
	require.NoError(t, err)
	assert.Contains(t, string(trustPage), "```python\n"+string(verified)+"```", "docs/trust.md's verified-evidence harness and examples/harness/verified.py differ")
}
