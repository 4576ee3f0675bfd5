package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/loader"
)

func newRegistryCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "registry --registry R",
		Short: "Print the registry as policies read it (data.policycheck.registry)",
		Long: `registry validates a tool registry and prints it as the policies read it, data.policycheck.registry,
with sets as sorted arrays: the registry/data.json of a recorded-run fixture for opa test
(policy_test/fixture.rego turns the arrays back into sets), or a starting point for mocking it with
"with data.policycheck.registry as". docs/input.md describes every field.` + exitCodes("0  the registry is valid (and printed)", "2  a registry that does not load or validate, bad flags or arguments"),
		Example: `  policycheck registry --registry examples/registry.yaml > policy_test/recorded/mine/run/registry/data.json`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return badInput(errors.New("--registry names a file; an empty name is not one"))
			}
			reg, err := loader.ReadRegistry(file)
			if err != nil {
				return badInput(err)
			}
			doc, err := engine.RegistryDocument(reg)
			if err != nil {
				return err
			}
			return writeJSON(cmd, doc)
		},
	}
	cmd.Flags().StringVar(&file, "registry", "", "tool registry (YAML or JSON) (required)")
	_ = cmd.MarkFlagRequired("registry")
	return cmd
}
