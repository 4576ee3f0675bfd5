package cli

import (
	"errors"
	"fmt"

	"github.com/lestrrat-go/jwx/v3/jwk"
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
	keys, err := f.keys(cmd)
	if keys == nil || err != nil {
		return nil, err
	}
	v, err := approvalsig.New(keys)
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
	keys, err := approvalsig.ReadKeys(f.path)
	if err != nil {
		return nil, badInput(fmt.Errorf("--approver-keys: %w", err))
	}
	if _, err := approvalsig.New(keys); err != nil {
		return nil, badInput(fmt.Errorf("--approver-keys %s: %w", f.path, err))
	}
	return keys, nil
}
