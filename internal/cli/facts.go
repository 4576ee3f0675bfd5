package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
)

func newFactsCmd() *cobra.Command {
	var in inputFlags
	var format string
	cmd := &cobra.Command{
		Use:   "facts --registry R --history H [--format facts|input]",
		Short: "Print what the model was shown: the facts your policies will see",
		Long: `facts derives from a message history the facts that policies decide on: the post-compaction window,
discovered tools, loaded capabilities, successful returns, the active capability set and, when the
history ends with a response, the dispatch facts anchored to its serving provider.

With --format input it prints the whole input document the engine hands to Rego (filters evaluated
with the given policies), ready to commit as an opa test fixture.` + exitCodesHelp,
		Example: `  policycheck facts --registry examples/registry.yaml --history examples/histories/refund.json
  policycheck facts --registry examples/registry.yaml --history examples/histories/refund.json --format input`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loaded, err := in.load(cmd)
			if err != nil {
				return err
			}
			switch format {
			case "facts":
				f := facts.Derive(loaded.history, loaded.reg)
				return writeJSON(cmd, engine.ReportFacts(&f))
			case "input":
				eng, err := in.engine(cmd.Context(), loaded.reg)
				if err != nil {
					return err
				}
				doc, err := eng.Input(cmd.Context(), engine.Request{History: loaded.history, Context: loaded.context})
				if err != nil {
					return badInput(err)
				}
				return writeJSON(cmd, doc)
			}
			return badInput(fmt.Errorf("--format must be facts or input, not %q", format))
		},
	}
	in.register(cmd, true)
	cmd.Flags().StringVar(&format, "format", "facts", "facts (the facts as eval reports them) or input (the Rego input document)")
	return cmd
}
