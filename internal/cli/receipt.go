package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/server"
	"github.com/policycheck/policycheck/trust"
)

// receiptFlags are --receipt-key and --receipt-ttl of serve, eval and
// replay.
type receiptFlags struct {
	key string
	ttl time.Duration
}

func (f *receiptFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.key, "receipt-key", "", "Ed25519 private key (PEM, PKCS #8) that signs an execution receipt for every call judged execute (see docs/trust.md)")
	fl.DurationVar(&f.ttl, "receipt-ttl", trust.DefaultTTL, "how long an execution receipt is valid (with --receipt-key)")
}

// signer is the receipt signer the flags ask for; nil without
// --receipt-key.
func (f *receiptFlags) signer(cmd *cobra.Command, opts ...trust.Option) (*trust.Signer, error) {
	if f.key == "" {
		if cmd.Flags().Changed("receipt-ttl") {
			return nil, badInput(errors.New("--receipt-ttl is how long the receipts --receipt-key signs are valid, and --receipt-key is not given"))
		}
		if cmd.Flags().Changed("receipt-key") {
			return nil, badInput(errors.New("--receipt-key names a file; an empty name is not one"))
		}
		return nil, nil
	}
	if f.ttl <= 0 {
		return nil, badInput(fmt.Errorf("--receipt-ttl must be positive, not %v", f.ttl))
	}
	key, err := trust.ReadSigningKey(f.key)
	if err != nil {
		return nil, badInput(fmt.Errorf("--receipt-key: %w", err))
	}
	s, err := trust.NewSigner(key, append([]trust.Option{trust.TTL(f.ttl)}, opts...)...)
	if err != nil {
		return nil, badInput(fmt.Errorf("--receipt-key: %w", err))
	}
	return s, nil
}

// keyWatch is serve --watch for --receipt-key: when the key file has
// changed (and is the same at the next look), the key it holds becomes
// the signing key; the key it replaces stays in GET /v1/keys until the
// receipts it signed have expired. A file that does not hold a key is
// logged and the current key keeps signing.
type keyWatch struct {
	path   string
	signer *trust.Signer
	settle settle
}

func newKeyWatch(path string, s *trust.Signer) *keyWatch {
	return &keyWatch{path: path, signer: s, settle: settle{last: treeStamp([]string{path})}}
}

// run looks at the key file every interval until ctx is done, telling
// srv each outcome (its /health and /metrics show a refused key).
func (w *keyWatch) run(ctx context.Context, srv *server.Server, interval time.Duration, logger *slog.Logger) {
	every(ctx, interval, func() { w.look(logger, srv.ReceiptKeyReloaded) })
}

// look is one look at the key file; when the file changed, report is
// told the outcome: why the key was refused, or whether it rotated.
func (w *keyWatch) look(logger *slog.Logger, report func(err error, rotated bool)) {
	if !w.settle.next(treeStamp([]string{w.path})) {
		return
	}
	var key ed25519.PrivateKey
	old := w.signer.KeyID()
	key, err := trust.ReadSigningKey(w.path)
	if err == nil {
		err = w.signer.Rotate(key)
	}
	report(err, err == nil && w.signer.KeyID() != old)
	switch {
	case err != nil:
		logger.Error("receipt key changed but not reloaded; the current key keeps signing", "err", err, "kid", old)
	case w.signer.KeyID() != old:
		logger.Info("receipt key rotated; the old key stays in /v1/keys until its receipts expire", "kid", w.signer.KeyID(), "retired_kid", old)
	}
}

func newReceiptCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "receipt (verify|keys)",
		Short: "Verify an execution receipt, or print the public keys that verify them",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return badInput(fmt.Errorf("receipt needs a subcommand: verify or keys\n%s", usageHint(cmd)))
		},
	}
	cmd.AddCommand(newReceiptVerifyCmd(), newReceiptKeysCmd())
	return cmd
}

func newReceiptKeysCmd() *cobra.Command {
	rf := receiptFlags{ttl: trust.DefaultTTL}
	cmd := &cobra.Command{
		Use:   "keys --receipt-key FILE",
		Short: "Print the JWKS that verifies the receipts a --receipt-key signs",
		Long: `keys prints the public key of --receipt-key as a JWKS (kid: its RFC 7638 thumbprint), the document
serve answers at GET /v1/keys: hand it to the tool services that verify the receipts eval signs.` +
			exitCodes("0  the key set was printed", exitLineBad),
		Example: `  policycheck receipt keys --receipt-key receipt-key.pem > receipt-keys.json`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rf.key == "" {
				return badInput(errors.New("--receipt-key is required"))
			}
			s, err := rf.signer(cmd)
			if err != nil {
				return err
			}
			return writeJSON(cmd, s.Keys())
		},
	}
	cmd.Flags().StringVar(&rf.key, "receipt-key", "", "Ed25519 private key (PEM, PKCS #8) (required)")
	return cmd
}

func newReceiptVerifyCmd() *cobra.Command {
	var keysFrom, callPath string
	cmd := &cobra.Command{
		Use:   "verify --keys JWKS_FILE_OR_URL --call CALL_JSON RECEIPT",
		Short: "Verify an execution receipt against the call it is to authorise",
		Long: `verify checks an execution receipt (the "receipt" of a call that serve or eval judged execute
with --receipt-key) as the service that runs the tool would: signed by a key of --keys (a JWKS file,
or an http(s) URL such as the sidecar's /v1/keys), not expired, and for exactly the call in --call:

  {"run_id": "…", "tool_call_id": "…", "tool": "…", "args": {…}}

run_id is the run of a /v1/runs/{id}/decide decision (leave it out for /v1/decide and eval); args are
the arguments about to run (the approver's override_args where an approval replaced them). RECEIPT is
the compact JWS, @FILE to read it from a file, or - from stdin. On success it prints what the receipt
vouches for; on failure why it is rejected.` +
			exitCodes("0  the receipt is valid for the call", "1  the receipt is not valid for the call (the reason is printed)",
				"2  bad input: --call or --keys unreadable or malformed, a missing argument, a path as RECEIPT without @"),
		Example: `  policycheck receipt verify --keys http://127.0.0.1:8181/v1/keys --call call.json "$RECEIPT"`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return badInput(fmt.Errorf("want one RECEIPT argument (the compact JWS, @FILE or - for stdin), got %d\n%s", len(args), usageHint(c)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if keysFrom == "" || callPath == "" {
				return badInput(errors.New("--keys and --call are required"))
			}
			if keysFrom == "-" && (callPath == "-" || args[0] == "-") {
				return badInput(errors.New("only one of --keys, --call and RECEIPT can be read from stdin"))
			}
			if callPath == "-" && args[0] == "-" {
				return badInput(errors.New("only one of --call and RECEIPT can be read from stdin"))
			}
			keys, err := readKeys(cmd, "--keys", keysFrom)
			if err != nil {
				return badInput(err)
			}
			raw, err := readFile(cmd, callPath)
			if err != nil {
				return badInput(err)
			}
			call, err := trust.ParseCall(raw)
			if err != nil {
				return badInput(fmt.Errorf("--call %s: %w", callPath, err))
			}
			text := args[0]
			if err := receiptArgIsPath(text); err != nil {
				return badInput(err)
			}
			switch {
			case text == "-":
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return badInput(fmt.Errorf("RECEIPT from stdin: %w", err))
				}
				text = string(b)
			case strings.HasPrefix(text, "@"):
				// A compact JWS is base64url: it never begins with @.
				b, err := readFile(cmd, text[1:])
				if err != nil {
					return badInput(err)
				}
				text = string(b)
			}
			c, err := trust.Verify(text, keys, call)
			var inv *trust.Invalid
			if errors.As(err, &inv) {
				return &exitError{code: ExitFailed, err: err}
			}
			if err != nil {
				return err
			}
			id := "null"
			if c.ToolCallID != nil {
				id = *c.ToolCallID
			}
			run := ""
			if c.RunID != "" {
				run = ", run " + c.RunID
			}
			fmt.Fprintf(cmd.OutOrStdout(), "receipt valid: %s (tool_call_id %s%s), arguments %s, policy revision %s, %d approval(s), expires %s\n",
				c.Tool, id, run, c.Digest, c.PolicyRevision, len(c.Approvals), time.Unix(c.Expiry, 0).UTC().Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().StringVar(&keysFrom, "keys", "", "JWKS file, - for stdin, or http(s) URL (the sidecar's GET /v1/keys) (required)")
	cmd.Flags().StringVar(&callPath, "call", "", "JSON file of the call to verify against, - for stdin (required)")
	return cmd
}

// receiptArgIsPath refuses, as bad input, a RECEIPT argument that names
// a file rather than holding a receipt: one that exists on disk, or one
// that holds a path separator, which a compact JWS (base64url segments
// joined by dots) never does. The user meant @PATH; a rejection (exit 1)
// would say the receipt is forged when it was never read.
func receiptArgIsPath(text string) error {
	if text == "-" || strings.HasPrefix(text, "@") {
		return nil
	}
	st, err := os.Stat(text)
	named := err == nil && !st.IsDir()
	if !named && strings.ContainsAny(text, `/\`) {
		named = true
	}
	if named {
		return fmt.Errorf("RECEIPT %q is a path, not a compact JWS: did you mean @%s?", text, text)
	}
	return nil
}

// readKeys reads a JWKS from a file, stdin or an http(s) URL, given as
// the flag named flag.
func readKeys(cmd *cobra.Command, flag, from string) (jwk.Set, error) {
	var data []byte
	if strings.HasPrefix(from, "http://") || strings.HasPrefix(from, "https://") {
		ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, from, nil)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, from, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s %s: HTTP status %s", flag, from, resp.Status)
		}
		if data, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20)); err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, from, err)
		}
	} else {
		var err error
		if data, err = readFile(cmd, from); err != nil {
			return nil, err
		}
	}
	set, err := trust.ParseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, from, err)
	}
	return set, nil
}
