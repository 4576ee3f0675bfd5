package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/approvalsig"
)

// approverKeysFlag is --approver-keys of eval and serve.
type approverKeysFlag struct{ path string }

func (f *approverKeysFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.path, "approver-keys", "", "JWKS of approver keys: an approval counts only if signed by one of them, and its approver is the key's sub (or kid) (see docs/trust.md)")
}

// verifier is the approval signature check the flag asks for; nil
// without --approver-keys.
func (f *approverKeysFlag) verifier(cmd *cobra.Command) (*approvalsig.Verifier, error) {
	if f.path == "" {
		if cmd.Flags().Changed("approver-keys") {
			return nil, badInput(errors.New("--approver-keys names a file; an empty name is not one"))
		}
		return nil, nil
	}
	keys, err := approvalsig.ReadKeys(f.path)
	if err != nil {
		return nil, badInput(fmt.Errorf("--approver-keys: %w", err))
	}
	v, err := approvalsig.New(keys)
	if err != nil {
		return nil, badInput(fmt.Errorf("--approver-keys %s: %w", f.path, err))
	}
	return v, nil
}
