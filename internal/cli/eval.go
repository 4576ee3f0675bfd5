package cli

import (
	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
)

func newEvalCmd() *cobra.Command {
	var in inputFlags
	cmd := &cobra.Command{
		Use:   "eval --registry R --history H [--context C] [--policy DIR|FILE|BUNDLE]...",
		Short: "Decide availability, advertisement and every call's verdict (JSON)",
		Long: `eval prints the decision document: the fingerprint, the facts, the tools available and advertised for
the next request and, when the history ends with a response, the dispatch facts and one verdict per
tool call (execute, not_available_yet, unknown_tool or denied), with the model-facing retry message on
every refusal. A policy error, a timeout or an undefined result fails the decision closed: every
registry tool unavailable, every call denied, and "errors" says why (exit status 0: a decision was made).` + exitCodesHelp,
		Example: `  policycheck eval --registry examples/registry.yaml --history examples/histories/refund.json \
    --policy examples/policies --context examples/context/support.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loaded, eng, err := in.loadEngine(cmd)
			if err != nil {
				return err
			}
			d, err := eng.Decide(cmd.Context(), engine.Request{History: loaded.history, Context: loaded.context})
			if err != nil {
				return badInput(err)
			}
			return writeJSON(cmd, d)
		},
	}
	in.register(cmd, true)
	return cmd
}
