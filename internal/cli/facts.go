package cli

import (
	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/internal/output/render"
)

func newFactsCmd() *cobra.Command {
	var in inputFlags
	var format string
	cmd := &cobra.Command{
		Use:   "facts --registry R --history H [--format json|input]",
		Short: "Print what the model was shown: the facts your policies will see",
		Long: `facts derives from a message history the facts that policies decide on: the post-compaction window,
discovered tools, loaded capabilities, successful returns, the active capability set and, when the
history ends with a response, the dispatch facts anchored to its serving provider.

--format json (the default) prints the facts as eval reports them. With --format input it prints the whole input document the engine hands to Rego (filters evaluated
with the given policies), ready to commit as an opa test fixture. "facts", the former name of json, is kept as an alias.` + exitCodes(exitLineDecision, exitLineBad),
		Example: `  policycheck facts --registry examples/registry.yaml --history examples/histories/refund.json
  policycheck facts --registry examples/registry.yaml --history examples/histories/refund.json --format input`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := parseFormat(factsFormats, format)
			if err != nil {
				return err
			}
			if _, err := in.flows.options(); err != nil {
				return err
			}
			loaded, err := in.load(cmd)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch f {
			case render.JSON:
				derived := facts.Derive(loaded.history, loaded.reg)
				report := engine.ReportFacts(&derived)
				return render.Write(out, f, &render.Doc{Facts: &report})
			case render.Input:
				eng, err := in.engine(cmd, loaded.reg)
				if err != nil {
					return err
				}
				doc, err := eng.Input(cmd.Context(), engine.Request{History: loaded.history, Context: loaded.context})
				if err != nil {
					return badInput(err)
				}
				return render.Write(out, f, &render.Doc{Input: doc})
			}
			return nil
		},
	}
	in.register(cmd, true)
	cmd.Flags().StringVarP(&format, "format", "f", "json", "output format: json (the facts as eval reports them; facts: alias) or input (the Rego input document)")
	return cmd
}
