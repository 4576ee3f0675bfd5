package cli

import (
	"github.com/spf13/cobra"
)

func newEvalCmd() *cobra.Command {
	var in inputFlags
	cmd := &cobra.Command{
		Use:   "eval --registry R --history H [--context C] [--approvals A] [--policy DIR|FILE|BUNDLE]...",
		Short: "Decide availability, advertisement and every call's verdict (JSON)",
		Long: `eval prints the decision document: the fingerprint, the facts, the tools available and advertised for
the next request and, when the history ends with a response, the dispatch facts and one verdict per
tool call (execute, not_available_yet, unknown_tool, denied or approval_required), with the model-facing
retry message on every refusal. An approval_required call carries its arguments and digest for the
approver; --approvals passes the answers back (each bound to its call by that digest), and the
decision's "approvals" says who approved what and whether each approval applied. A policy error, a timeout or an undefined result fails the decision closed: every
registry tool unavailable, every call denied, and "errors" says why (exit status 0: a decision was made).` + exitCodesHelp,
		Example: `  policycheck eval --registry examples/registry.yaml --history examples/histories/refund.json \
    --policy examples/policies --context examples/context/support.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loaded, eng, err := in.loadEngine(cmd)
			if err != nil {
				return err
			}
			d, err := eng.Decide(cmd.Context(), loaded.request())
			if err != nil {
				return badInput(err)
			}
			return writeJSON(cmd, d)
		},
	}
	in.register(cmd, true)
	in.registerApprovals(cmd)
	return cmd
}
