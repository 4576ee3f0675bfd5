// The example operator policies under examples/policies, exercised through
// `policycheck eval` (in-process) on the example registry and histories,
// beside their own Rego unit tests (run by `policycheck test` here and by
// stock `opa test` in scripts/rego-checks.sh).
package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/cli"
	"github.com/policycheck/policycheck/loader"
)

type call struct {
	ToolCallID string          `json:"tool_call_id"`
	Tool       string          `json:"tool"`
	Verdict    string          `json:"verdict"`
	Message    string          `json:"message"`
	Reasons    []string        `json:"reasons"`
	Args       json.RawMessage `json:"args"`
}

type decision struct {
	Available  []string `json:"available"`
	Advertised []string `json:"advertised"`
	Calls      []call   `json:"calls"`
	Errors     []string `json:"errors"`
}

// eval runs `policycheck eval` in-process and decodes its decision.
func eval(t *testing.T, policy, history, ctx string, approvals ...string) decision {
	t.Helper()
	args := []string{"eval", "--registry", "registry.yaml", "--history", "histories/" + history + ".json"}
	if policy != "" {
		args = append(args, "--policy", policy)
	}
	if ctx != "" {
		args = append(args, "--context", "context/"+ctx+".json")
	}
	for _, a := range approvals {
		if a != "" {
			args = append(args, "--approvals", "approvals/"+a+".json")
		}
	}
	var out, errb bytes.Buffer
	code := cli.Run(args, strings.NewReader(""), &out, &errb)
	require.Equal(t, cli.ExitOK, code, errb.String())
	var d decision
	require.NoError(t, json.Unmarshal(out.Bytes(), &d))
	require.Empty(t, d.Errors)
	return d
}

func TestExamplesThroughEval(t *testing.T) {
	cases := []struct {
		note    string
		policy  string
		history string
		context string
		// verdicts maps tool_call_id to the verdict.
		verdicts map[string]string
		// messages maps tool_call_id to a part of the model-facing message.
		messages map[string]string
		// reasons maps tool_call_id to a part of an operator-facing reason.
		reasons   map[string]string
		available []string
		hidden    []string
		// approvals names a file of approvals/ (eval --approvals).
		approvals string
		// args maps tool_call_id to the JSON of the arguments to execute.
		args map[string]string
	}{
		{note: "groups: support loses transfer_funds and the vault's tools",
			policy: "policies/groups", history: "refund", context: "support",
			verdicts: map[string]string{"c1": "execute", "c2": "execute", "c3": "execute", "c4": "unknown_tool", "c5": "unknown_tool"},
			hidden:   []string{"transfer_funds", "secret_op"}, available: []string{"get_order", "issue_refund"}},
		{note: "groups: viewers see only their allow list",
			policy: "policies/groups", history: "refund", context: "viewer",
			verdicts:  map[string]string{"c1": "execute", "c2": "unknown_tool", "c3": "execute", "c4": "unknown_tool"},
			available: []string{"get_time", "get_order", "search_docs"}, hidden: []string{"issue_refund", "transfer_funds"}},
		{note: "groups: admins keep the default policy's verdicts",
			policy: "policies/groups", history: "refund", context: "admin",
			verdicts:  map[string]string{"c1": "execute", "c2": "execute", "c4": "not_available_yet", "c5": "unknown_tool"},
			available: []string{"transfer_funds", "issue_refund"}},
		{note: "groups: no context, no registry tool",
			policy: "policies/groups", history: "refund",
			verdicts: map[string]string{"c1": "unknown_tool", "c2": "unknown_tool"},
			hidden:   []string{"get_time", "get_order", "search_docs", "search_tools"}},
		{note: "transfers: above the limit asks a person, with what to show them",
			policy: "policies/transfers", history: "transfer", context: "support",
			verdicts: map[string]string{"t1": "execute", "t2": "approval_required"},
			messages: map[string]string{"t2": "Approve a transfer of 5000 from ops to savings?"},
			reasons:  map[string]string{"t2": "policycheck.rules.transfers (policies/transfers/transfers.rego:43:1): transfer_funds of 5000 exceeds the limit of 1000"}},
		{note: "transfers: a flag in the context approves nothing",
			policy: "policies/transfers", history: "transfer", context: "admin",
			verdicts: map[string]string{"t1": "execute", "t2": "approval_required"}},
		{note: "transfers: the approval bound to t2 lets it through with the approver's amount",
			policy: "policies/transfers", history: "transfer", context: "support", approvals: "transfer",
			verdicts: map[string]string{"t1": "execute", "t2": "execute"},
			args:     map[string]string{"t2": `{"amount":4000,"from":"ops","to":"savings"}`}},
		{note: "vault: non-admins do not see rotate_key",
			policy: "policies/vault", history: "vault-rotate", context: "support",
			verdicts:  map[string]string{"v1": "execute", "v2": "unknown_tool"},
			available: []string{"secret_op"}, hidden: []string{"rotate_key"}},
		{note: "vault: admins rotate keys",
			policy: "policies/vault", history: "vault-rotate", context: "admin",
			verdicts:  map[string]string{"v1": "execute", "v2": "execute"},
			available: []string{"secret_op", "rotate_key"}},
		{note: "vault: the filter runs only while the vault is active",
			policy: "policies/vault", history: "refund", context: "support",
			verdicts: map[string]string{"c4": "not_available_yet"}},
		{note: "sequence: a refund in the same response as the lookup is denied",
			policy: "policies/sequence", history: "refund",
			verdicts: map[string]string{"c1": "execute", "c2": "denied"},
			messages: map[string]string{"c2": "Call get_order first and check its result, then call issue_refund again."}},
		{note: "sequence: a refund after a successful lookup executes",
			policy: "policies/sequence", history: "refund-after-lookup",
			verdicts: map[string]string{"c2": "execute"}},
		{note: "budgets: the transfer past 10,000 and the fourth transfer of the run are denied; a retried call is not counted",
			policy: "policies/budgets", history: "budget",
			verdicts: map[string]string{"b4": "denied", "b5": "denied"},
			reasons: map[string]string{
				"b4": "transfer_funds would bring this run's transfers to 10500, above the budget of 10000",
				"b5": "transfer_funds call 4 of this run exceeds the budget of 3 calls per run"}},
		{note: "budgets: two transfers within both budgets execute",
			policy: "policies/budgets", history: "transfer",
			verdicts: map[string]string{"t1": "execute", "t2": "execute"}},
		{note: "exfiltration: the secret read from the vault in a transfer's destination needs a person's yes; the plain transfer executes",
			policy: "policies/exfiltration", history: "exfiltration",
			verdicts: map[string]string{"x1": "execute", "x2": "approval_required"},
			messages: map[string]string{"x2": "Approve sending a value read from secret_op through transfer_funds (argument /to)?"},
			reasons:  map[string]string{"x2": "argument /to of transfer_funds carries a value returned by secret-labelled secret_op (tool_call_id v1, message 4, part 0)"}},
		{note: "exfiltration: the approval bound to x2 lets it through",
			policy: "policies/exfiltration", history: "exfiltration", approvals: "exfiltration",
			verdicts: map[string]string{"x1": "execute", "x2": "execute"}},
		{note: "exfiltration: transfers that carry no secret execute",
			policy: "policies/exfiltration", history: "transfer",
			verdicts: map[string]string{"t1": "execute", "t2": "execute"}},
		{note: "all examples together",
			policy: "policies", history: "refund", context: "support",
			verdicts: map[string]string{"c1": "execute", "c2": "denied", "c3": "execute", "c4": "unknown_tool", "c5": "unknown_tool"}},
		{note: "the vault filter docs/writing-filters.md shows, as committed",
			policy: "policies/vault/vault.rego", history: "vault-rotate", context: "support",
			verdicts: map[string]string{"v2": "unknown_tool"}},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			d := eval(t, tc.policy, tc.history, tc.context, tc.approvals)
			got := map[string]call{}
			for _, c := range d.Calls {
				got[c.ToolCallID] = c
			}
			for id, want := range tc.verdicts {
				require.Contains(t, got, id)
				assert.Equal(t, want, got[id].Verdict, "call %s (%s)", id, got[id].Tool)
				if want != "execute" {
					assert.NotEmpty(t, got[id].Message, "every refusal has a message")
				}
			}
			for id, msg := range tc.messages {
				assert.Contains(t, got[id].Message, msg)
			}
			for id, reason := range tc.reasons {
				assert.Contains(t, strings.Join(got[id].Reasons, "\n"), reason)
			}
			for id, args := range tc.args {
				assert.JSONEq(t, args, string(got[id].Args))
			}
			for _, name := range tc.available {
				assert.Contains(t, d.Available, name)
			}
			for _, name := range tc.hidden {
				assert.NotContains(t, d.Available, name)
				assert.NotContains(t, d.Advertised, name)
			}
		})
	}
}

// The worked filter of docs/writing-filters.md (once the README's) is the
// committed example, so it compiles and behaves as TestExamplesThroughEval
// shows.
func TestReadmeFilterIsTheExample(t *testing.T) {
	page, err := os.ReadFile("../docs/writing-filters.md")
	require.NoError(t, err)
	text := string(page)
	start := strings.Index(text, "## A capability filter")
	require.GreaterOrEqual(t, start, 0, "docs/writing-filters.md lost its filter section")
	text = text[start:]
	const open = "```rego\n"
	i := strings.Index(text, open)
	require.GreaterOrEqual(t, i, 0, "docs/writing-filters.md's filter section has no rego block")
	j := strings.Index(text[i+len(open):], "```")
	require.GreaterOrEqual(t, j, 0)
	snippet := text[i+len(open) : i+len(open)+j]
	example, err := os.ReadFile("policies/vault/vault.rego")
	require.NoError(t, err)
	assert.Equal(t, string(example), snippet, "docs/writing-filters.md's filter and examples/policies/vault/vault.rego differ")
}

// The example policies' own Rego tests pass, run by policycheck test with
// the shipped policies available.
func TestExamplePolicyTests(t *testing.T) {
	var out, errb bytes.Buffer
	code := cli.Run([]string{"test", "policies", "--coverage", "--threshold", "95", "--timeout", "2m"}, strings.NewReader(""), &out, &errb)
	require.Equal(t, cli.ExitOK, code, "%s\n%s", out.String(), errb.String())
	assert.Contains(t, out.String(), "PASS:")
}

// The example policies pass policycheck check against the example registry.
func TestExamplePoliciesCheckClean(t *testing.T) {
	var out, errb bytes.Buffer
	code := cli.Run([]string{"check", "policies", "--registry", "registry.yaml"}, strings.NewReader(""), &out, &errb)
	require.Equal(t, cli.ExitOK, code, "%s\n%s", out.String(), errb.String())
}

// The group policy is order-independent (seed 004): the registry is
// shared and read-only, visibility belongs to one request. A narrow group
// then a broad one, the reverse, and both concurrently on one engine give
// the same decisions, and the registry is unchanged.
func TestGroupPolicyIsOrderIndependent(t *testing.T) {
	ctx := context.Background()
	reg, err := loader.ReadRegistry("registry.yaml")
	require.NoError(t, err)
	raw, err := os.ReadFile("histories/refund.json")
	require.NoError(t, err)
	h, err := loader.DecodeHistory("refund.json", raw, loader.DefaultLimits())
	require.NoError(t, err)
	toolsBefore := fmt.Sprint(reg.ToolNames())

	newEngine := func() *engine.Engine {
		e, err := engine.New(ctx, engine.Registry(reg), engine.PolicyPaths("policies/groups"))
		require.NoError(t, err)
		return e
	}
	decide := func(e *engine.Engine, group string) string {
		d, err := e.Decide(ctx, engine.Request{History: h, Context: map[string]any{"group": group}})
		if err != nil {
			return "error: " + err.Error()
		}
		b, err := json.Marshal(d)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(b)
	}
	const narrow, broad = "viewer", "admin"

	// Each group alone, on a fresh engine: the reference.
	want := map[string]string{narrow: decide(newEngine(), narrow), broad: decide(newEngine(), broad)}
	require.NotEqual(t, want[narrow], want[broad], "the groups must differ for the test to mean anything")

	for _, order := range [][]string{{narrow, broad, narrow}, {broad, narrow, broad}} {
		e := newEngine()
		for _, g := range order {
			assert.JSONEq(t, want[g], decide(e, g), "order %v, group %s", order, g)
		}
	}

	// Concurrently, interleaved, on one shared engine.
	e := newEngine()
	const workers, rounds = 8, 25
	got := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				g := narrow
				if (w+i)%2 == 0 {
					g = broad
				}
				if d := decide(e, g); d != want[g] {
					got[w] = append(got[w], fmt.Sprintf("round %d group %s: %s", i, g, d))
				}
			}
		})
	}
	wg.Wait()
	for w, diffs := range got {
		assert.Empty(t, diffs, "worker %d saw decisions that differ from the reference", w)
	}
	assert.Equal(t, toolsBefore, fmt.Sprint(reg.ToolNames()), "the shared registry is unchanged")
}

// TestBudgetsRefuseNegativeAmounts (issue 43, item 12): a negative
// transfer would offset the budget's sum (a -9,000 transfer then lets
// 19,000 through under a 10,000 budget); transfer_funds' schema has a
// minimum, so it is invalid_args before any rule, and the model is told
// why.
func TestBudgetsRefuseNegativeAmounts(t *testing.T) {
	raw, err := os.ReadFile("histories/transfer.json")
	require.NoError(t, err)
	text := strings.Replace(string(raw), `"amount": 250`, `"amount": -9000`, 1)
	text = strings.Replace(text, `"amount": 5000`, `"amount": 14000`, 1)
	require.NotEqual(t, string(raw), text)
	file := filepath.Join(t.TempDir(), "negative.json")
	require.NoError(t, os.WriteFile(file, []byte(text), 0o600))
	var out, errb bytes.Buffer
	code := cli.Run([]string{"eval", "--registry", "registry.yaml", "--history", file, "--policy", "policies/budgets"},
		strings.NewReader(""), &out, &errb)
	require.Equal(t, cli.ExitOK, code, errb.String())
	var d decision
	require.NoError(t, json.Unmarshal(out.Bytes(), &d))
	got := map[string]call{}
	for _, c := range d.Calls {
		got[c.ToolCallID] = c
	}
	require.Equal(t, "invalid_args", got["t1"].Verdict, out.String())
	assert.Contains(t, got["t1"].Message, "amount")
	assert.NotEqual(t, "execute", got["t2"].Verdict, "14,000 is above the run's budget of 10,000: %s", out.String())
}
