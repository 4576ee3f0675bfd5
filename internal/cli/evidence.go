package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/trust"
)

// evidenceFlag is --evidence of eval, explain and serve: which reveals
// and loads of a history count.
type evidenceFlag struct{ mode string }

const evidenceHelp = `--evidence client (the default) takes every reveal and load of the history on the client's word.
--evidence verified counts a reveal (a search return's discovered tools) or a capability load only where
the tool return that carries it holds, in metadata.policycheck_receipt, an execution receipt that
--receipt-key's key signed for the call it answers (on serve's /v1/runs: or that call was judged execute
in the run); other evidence is ignored, as if the history never held it, and listed in the decision's
"unverified_evidence" (docs/trust.md, "Verified evidence").`

func (f *evidenceFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.mode, "evidence", "client", evidenceUsage)
}

// verified reports whether the flag asks for verified evidence, which
// needs signer (the --receipt-key whose receipts vouch).
func (f *evidenceFlag) verified(signer *trust.Signer) (bool, error) {
	verified, err := parseEvidence(f.mode)
	if err != nil {
		return false, badInput(fmt.Errorf("--evidence %w", err))
	}
	if verified && signer == nil {
		return false, badInput(errNoEvidenceKey)
	}
	return verified, nil
}

// errNoEvidenceKey refuses --evidence verified without --receipt-key.
var errNoEvidenceKey = errors.New("--evidence verified counts a reveal or a load only with a receipt of the server's key: --receipt-key is required")

// parseEvidence is an --evidence mode: whether it asks for verified
// evidence.
func parseEvidence(mode string) (bool, error) {
	switch mode {
	case "client":
		return false, nil
	case "verified":
		return true, nil
	}
	return false, fmt.Errorf("is client or verified, not %q", mode)
}

// evidenceValue is serve's --evidence, bound into server.Config's
// VerifiedEvidence: verified sets it, client clears it, any other mode
// is refused when the flag is parsed.
type evidenceValue struct{ verified *bool }

// evidenceUsage is --evidence's line in serve's flags.
const evidenceUsage = "which reveals and loads count: client (all, on the client's word) or verified (only those of calls a --receipt-key receipt or, on /v1/runs, the run vouches for) (see docs/trust.md)"

func (v evidenceValue) String() string {
	if v.verified != nil && *v.verified {
		return "verified"
	}
	return "client"
}

func (v evidenceValue) Set(mode string) error {
	verified, err := parseEvidence(mode)
	if err != nil {
		return err
	}
	*v.verified = verified
	return nil
}

func (v evidenceValue) Type() string { return "string" }
