package cli

import (
	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/internal/render"
)

func newExplainCmd() *cobra.Command {
	var in inputFlags
	var format string
	cmd := &cobra.Command{
		Use:   "explain --registry R --history H [--context C] [--approvals A] [--policy ...]... [--format pretty|json|html]",
		Short: "Explain, for a person, why each tool is or is not available and why each call got its verdict",
		Long: `explain makes the same decision as eval and says why: for each registry tool, what gates it and which
message and part revealed or loaded it (or which compaction part hid that evidence), and for each call
of the last response, its verdict, the model-facing message and the rule, filter or policy file that
decided.

--format pretty (the default) is for people; --format json prints the same explanation as a document
(with the decision of eval inside); --format html writes one self-contained page (no script, nothing
loaded) to open in a browser: the conversation as a timeline with the windows, reveals and loads marked
where they happen, each tool's story and each call's verdict. "text", the former name of pretty, is kept
as an alias.` + exitCodes(exitLineDecision, exitLineBad),
		Example: `  policycheck explain --registry examples/registry.yaml --history examples/histories/refund.json
  policycheck explain --registry examples/registry.yaml --history examples/histories/refund.json --format html > explain.html`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := parseFormat(explainFormats, format)
			if err != nil {
				return err
			}
			loaded, eng, err := in.loadEngine(cmd)
			if err != nil {
				return err
			}
			x, err := eng.Explain(cmd.Context(), loaded.request())
			if err != nil {
				return badInput(err)
			}
			return render.Write(cmd.OutOrStdout(), f, &render.Doc{Explanation: x, History: loaded.historyJSON})
		},
	}
	in.register(cmd, true)
	in.registerApprovals(cmd)
	cmd.Flags().StringVarP(&format, "format", "f", "pretty", "output format: pretty (for people), json, or html (a page for a browser; text: alias of pretty)")
	return cmd
}
