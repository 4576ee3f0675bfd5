package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/trust"
)

// approverKeysFlag is --approver-keys of eval and serve, with
// --approval-max-ttl, the bound on a signature's exp.
type approverKeysFlag struct {
	path   string
	maxTTL time.Duration
}

// maxApprovalTTL bounds --approval-max-ttl itself: an approval is an
// answer to one call, given while the agent waits.
const maxApprovalTTL = 24 * time.Hour

func (f *approverKeysFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.path, "approver-keys", "", "JWKS of approver keys: an approval counts only if signed by one of them (over its call, the run it is for and an exp), and its approver is the key's sub (or kid) (see docs/trust.md)")
	cmd.Flags().DurationVar(&f.maxTTL, "approval-max-ttl", trust.DefaultMaxTTL, "with --approver-keys: how far ahead an approval signature's exp may lie (at most 24h); one without exp, or with a later one, does not count")
}

// verifier is the approval signature check the flag asks for; nil
// without --approver-keys.
func (f *approverKeysFlag) verifier(cmd *cobra.Command) (*trust.ApprovalVerifier, error) {
	if err := f.checkTTL(cmd); err != nil {
		return nil, badInput(err)
	}
	keys, err := f.keys(cmd)
	if keys == nil || err != nil {
		return nil, err
	}
	v, err := trust.NewApprovalVerifier(keys, trust.MaxTTL(f.maxTTL))
	if err != nil {
		return nil, badInput(fmt.Errorf("--approver-keys %s: %w", f.path, err))
	}
	return v, nil
}

// keys is the approver key set the flag names, checked as approver keys;
// nil without --approver-keys.
func (f *approverKeysFlag) keys(cmd *cobra.Command) (jwk.Set, error) {
	if f.path == "" {
		if cmd.Flags().Changed("approver-keys") {
			return nil, badInput(errors.New("--approver-keys names a file; an empty name is not one"))
		}
		return nil, nil
	}
	keys, err := trust.ReadKeys(f.path)
	if err != nil {
		return nil, badInput(fmt.Errorf("--approver-keys: %w", err))
	}
	if _, err := trust.NewApprovalVerifier(keys); err != nil {
		return nil, badInput(fmt.Errorf("--approver-keys %s: %w", f.path, err))
	}
	return keys, nil
}

// checkTTL refuses an --approval-max-ttl that is not positive, longer
// than maxApprovalTTL, or given without --approver-keys.
func (f *approverKeysFlag) checkTTL(cmd *cobra.Command) error {
	switch {
	case f.maxTTL <= 0:
		return fmt.Errorf("--approval-max-ttl must be positive, not %v: every approval signature must expire", f.maxTTL)
	case f.maxTTL > maxApprovalTTL:
		return fmt.Errorf("--approval-max-ttl %v is longer than %v: an approval answers one call while the agent waits", f.maxTTL, maxApprovalTTL)
	case f.path == "" && cmd.Flags().Changed("approval-max-ttl"):
		return errors.New("--approval-max-ttl bounds the exp of signed approvals, and without --approver-keys none is checked: give --approver-keys or drop --approval-max-ttl")
	}
	return nil
}
