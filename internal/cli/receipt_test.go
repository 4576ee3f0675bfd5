package cli_test

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/testkit/receiptcases"
	"github.com/policycheck/policycheck/trust"
)

// receiptFiles writes the table's two keys and the JWKS of the first.
func receiptFiles(t *testing.T) (dir, key1, key2, keys string) {
	t.Helper()
	dir = t.TempDir()
	key1 = writeFile(t, dir, "key1.pem", string(receiptcases.PEM(receiptcases.Key(1))))
	key2 = writeFile(t, dir, "key2.pem", string(receiptcases.PEM(receiptcases.Key(2))))
	res := run(t, "", "receipt", "keys", "--receipt-key", key1)
	require.Equal(t, 0, res.code, res.stderr)
	keys = writeFile(t, dir, "keys.json", res.stdout)
	return dir, key1, key2, keys
}

// evalReceipt runs eval on the refund example with --receipt-key key and
// returns the decision's calls.
func evalCalls(t *testing.T, key string, extra ...string) []engine.CallVerdict {
	t.Helper()
	args := append([]string{"eval", "--registry", "../../examples/registry.yaml", "--history", "../../examples/histories/refund.json",
		"--policy", "../../examples/policies", "--context", "../../examples/context/support.json", "--receipt-key", key}, extra...)
	res := run(t, "", args...)
	require.Equal(t, 0, res.code, res.stderr)
	var d engine.Decision
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &d))
	return d.Calls
}

func receiptOfCall(t *testing.T, calls []engine.CallVerdict, id string) string {
	t.Helper()
	for _, c := range calls {
		if c.ToolCallID != nil && *c.ToolCallID == id {
			require.NotEmpty(t, c.Receipt, "%+v", c)
			return c.Receipt
		}
	}
	t.Fatalf("no call %q", id)
	return ""
}

// TestReceiptForgeriesThroughTheCLI runs the forgery table through the
// command line: eval --receipt-key signs, receipt verify checks (with
// the JWKS of receipt keys, from a file and from a URL). The honest
// receipt exits 0; each forgery exits 1 and says why. An expired receipt
// is one signed by a signer whose clock is that much behind.
func TestReceiptForgeriesThroughTheCLI(t *testing.T) {
	dir, key1, key2, keysFile := receiptFiles(t)
	jwks, err := os.ReadFile(keysFile)
	require.NoError(t, err)
	keysURL := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(jwks) }))
	t.Cleanup(keysURL.Close)
	honest := receiptOfCall(t, evalCalls(t, key1), "c1")
	forged := receiptOfCall(t, evalCalls(t, key2), "c1")
	id := "c1"
	args := []byte(`{"order_id":7}`)
	for _, tc := range receiptcases.Cases() {
		for _, keys := range []string{keysFile, keysURL.URL} {
			t.Run(tc.Name+"/"+strings.SplitN(keys, ":", 2)[0], func(t *testing.T) {
				r := honest
				switch {
				case tc.OtherKey:
					r = forged
				case tc.Later > 0:
					// Issued tc.Later ago, for the same call.
					s, err := trust.NewSigner(receiptcases.Key(1), trust.TTL(receiptcases.TTL),
						trust.Clock(func() time.Time { return time.Now().Add(-tc.Later) }))
					require.NoError(t, err)
					r, err = s.Sign(trust.Claims{ToolCallID: &id, Tool: "get_order", Digest: trust.CallDigest(&id, "get_order", args), PolicyRevision: "r"})
					require.NoError(t, err)
				}
				if tc.Tamper != nil {
					r = tc.Tamper(r)
				}
				callID := id
				call := trust.Call{ToolCallID: &callID, Tool: "get_order", Args: args}
				if tc.Edit != nil {
					tc.Edit(&call)
				}
				b, err := json.Marshal(call)
				require.NoError(t, err)
				callFile := writeFile(t, dir, "call.json", string(b))
				res := run(t, "", "receipt", "verify", "--keys", keys, "--call", callFile, r)
				if tc.Want == "" {
					require.Equal(t, 0, res.code, res.stderr)
					assert.Contains(t, res.stdout, "receipt valid: get_order (tool_call_id c1)")
					return
				}
				require.Equal(t, 1, res.code, "stdout %s\nstderr %s", res.stdout, res.stderr)
				assert.Contains(t, res.stderr, "receipt rejected: ")
				assert.Contains(t, res.stderr, tc.Want)
			})
		}
	}
	t.Run("receipt from stdin", func(t *testing.T) {
		callFile := writeFile(t, dir, "stdin-call.json", `{"tool_call_id": "c1", "tool": "get_order", "args": {"order_id": 7}}`)
		res := run(t, honest+"\n", "receipt", "verify", "--keys", keysFile, "--call", callFile, "-")
		require.Equal(t, 0, res.code, res.stderr)
	})
}

// TestEvalSignsOnlyExecutes: with --receipt-key every execute of the
// decision carries a receipt and no refusal does; --format pretty shows
// them.
func TestEvalSignsOnlyExecutes(t *testing.T) {
	_, key1, _, _ := receiptFiles(t)
	calls := evalCalls(t, key1)
	executes := 0
	for _, c := range calls {
		if c.Verdict == engine.Execute {
			executes++
			assert.NotEmpty(t, c.Receipt, "%+v", c)
		} else {
			assert.Empty(t, c.Receipt, "%+v", c)
		}
	}
	require.Positive(t, executes)
	require.Less(t, executes, len(calls), "the example refuses some calls")
	res := run(t, "", "eval", "--registry", "../../examples/registry.yaml", "--history", "../../examples/histories/refund.json",
		"--policy", "../../examples/policies", "--context", "../../examples/context/support.json", "--receipt-key", key1, "--format", "pretty")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Equal(t, executes, strings.Count(res.stdout, "      receipt: ey"), res.stdout)
}

// TestReceiptBadInput: what the receipt flags and receipt verify do not
// accept is refused with exit 2 and says where.
func TestReceiptBadInput(t *testing.T) {
	dir, key1, _, keys := receiptFiles(t)
	honest := receiptOfCall(t, evalCalls(t, key1), "c1")
	call := writeFile(t, dir, "call.json", `{"tool_call_id": "c1", "tool": "get_order", "args": {"order_id": 7}}`)
	stranger := strangerKeyFile(t, dir)
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	eval := []string{"eval", "--registry", "../../examples/registry.yaml", "--history", "../../examples/histories/refund.json"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"ttl without key (eval)", append(eval, "--receipt-ttl", "1m"), "--receipt-ttl is how long"},
		{"ttl without key (serve)", []string{"serve", "--registry", "../../examples/registry.yaml", "--receipt-ttl", "1m"}, "--receipt-ttl is how long"},
		{"ttl zero", append(eval, "--receipt-key", key1, "--receipt-ttl", "0s"), "--receipt-ttl must be positive"},
		{"key file missing", append(eval, "--receipt-key", filepath.Join(dir, "nope.pem")), "nope.pem"},
		{"key not PEM", append(eval, "--receipt-key", call), "no PEM block"},
		{"key not Ed25519", append(eval, "--receipt-key", stranger), "want an Ed25519 private key"},
		{"key empty name", append(eval, "--receipt-key", ""), "--receipt-key names a file"},
		{"verify without receipt", []string{"receipt", "verify", "--keys", keys, "--call", call}, "want one RECEIPT argument"},
		{"verify without keys", []string{"receipt", "verify", "--call", call, honest}, "--keys and --call are required"},
		{"call malformed", []string{"receipt", "verify", "--keys", keys, "--call", writeFile(t, dir, "bad.json", `{"tool": `), honest}, "bad.json"},
		{"call unknown member", []string{"receipt", "verify", "--keys", keys, "--call", writeFile(t, dir, "extra.json", `{"tool": "get_order", "tool_name": "x"}`), honest}, `unknown field "tool_name"`},
		{"call without tool", []string{"receipt", "verify", "--keys", keys, "--call", writeFile(t, dir, "notool.json", `{"tool_call_id": "c1"}`), honest}, "/tool is required"},
		{"keys missing", []string{"receipt", "verify", "--keys", filepath.Join(dir, "none.json"), "--call", call, honest}, "none.json"},
		{"keys not a JWKS", []string{"receipt", "verify", "--keys", call, "--call", call, honest}, "--keys " + call},
		{"keys URL 404", []string{"receipt", "verify", "--keys", notFound.URL, "--call", call, honest}, "404"},
		{"keys and call both stdin", []string{"receipt", "verify", "--keys", "-", "--call", "-", honest}, "stdin"},
		{"receipt a file's name", []string{"receipt", "verify", "--keys", keys, "--call", call, writeFile(t, dir, "receipt.jws", honest)}, "did you mean @" + filepath.Join(dir, "receipt.jws") + "?"},
		{"receipt a file's name, dotted", []string{"receipt", "verify", "--keys", keys, "--call", call, writeFile(t, dir, "r.v1.jws", honest)}, "did you mean @" + filepath.Join(dir, "r.v1.jws") + "?"},
		{"receipt a missing path", []string{"receipt", "verify", "--keys", keys, "--call", call, "receipts/c1.jws"}, "did you mean @receipts/c1.jws?"},
		{"receipt without subcommand", []string{"receipt"}, "verify or keys"},
		{"keys without key", []string{"receipt", "keys"}, "--receipt-key is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, "", tc.args...)
			require.Equal(t, 2, res.code, "stdout %s\nstderr %s", res.stdout, res.stderr)
			assert.Contains(t, res.stderr, tc.want)
		})
	}
}

// strangerKeyFile writes a PKCS #8 private key that is not Ed25519 (an
// X25519 one).
func strangerKeyFile(t *testing.T, dir string) string {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	return writeFile(t, dir, "x25519.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
}

// TestReceiptVerifyHelp: receipt verify's help lists its exit codes.
func TestReceiptVerifyHelp(t *testing.T) {
	res := run(t, "", "receipt", "verify", "--help")
	require.Equal(t, 0, res.code, res.stderr)
	for _, line := range []string{"  0  the receipt is valid", "  1  the receipt is not valid", "  2  bad input"} {
		assert.Contains(t, res.stdout, "\n"+line)
	}
	assert.Contains(t, res.stdout, "@FILE")
}

// TestReplaySignsTheCandidatesNewExecutes: replay --receipt-key signs,
// for a call whose verdict changes to execute, the receipt the candidate
// would hand out, for the run replayed; it verifies for that call in
// that run only.
func TestReplaySignsTheCandidatesNewExecutes(t *testing.T) {
	dir, key1, _, keys := receiptFiles(t)
	history := "../../examples/histories/refund.json"
	res := run(t, "", "replay", "--registry", "../../examples/registry.yaml", "--baseline", "../../examples/policies",
		"--candidate", t.TempDir(), "--context", "../../examples/context/support.json", "--format", "json", "--receipt-key", key1, history)
	require.Equal(t, 0, res.code, res.stderr)
	var rep struct {
		Changes []struct {
			Run, Kind, Transition string
			ToolCallID            *string `json:"tool_call_id"`
			Baseline, Candidate   struct{ Receipt string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep))
	signed := ""
	for _, c := range rep.Changes {
		assert.Empty(t, c.Baseline.Receipt)
		if c.Kind == "call" && strings.HasSuffix(c.Transition, "->execute") {
			require.NotEmpty(t, c.Candidate.Receipt, "%+v", c)
			require.Equal(t, "c2", *c.ToolCallID)
			signed = c.Candidate.Receipt
		} else {
			assert.Empty(t, c.Candidate.Receipt, "%+v", c)
		}
	}
	require.NotEmpty(t, signed, "the example's issue_refund call changes to execute")
	for _, tc := range []struct {
		run  string
		code int
	}{{history, 0}, {"another-run", 1}} {
		call := writeFile(t, dir, "c2.json", `{"run_id": "`+tc.run+`", "tool_call_id": "c2", "tool": "issue_refund", "args": {"order_id": 7, "amount": 42.5}}`)
		res := run(t, "", "receipt", "verify", "--keys", keys, "--call", call, signed)
		assert.Equal(t, tc.code, res.code, "%s: %s%s", tc.run, res.stdout, res.stderr)
	}
	// Without the key nothing is signed.
	res = run(t, "", "replay", "--registry", "../../examples/registry.yaml", "--baseline", "../../examples/policies",
		"--candidate", t.TempDir(), "--context", "../../examples/context/support.json", "--format", "json", history)
	require.Equal(t, 0, res.code, res.stderr)
	assert.NotContains(t, res.stdout, `"receipt"`)
}
