package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/output/render"
	"github.com/policycheck/policycheck/trust"
)

func newExplainCmd() *cobra.Command {
	var in inputFlags
	var format string
	var ev evidenceFlag
	rf := receiptFlags{ttl: trust.DefaultTTL}
	cmd := &cobra.Command{
		Use:   "explain --registry R --history H [--context C] [--approvals A] [--policy ...]... [--format pretty|json|html] [--evidence client|verified --receipt-key K]",
		Short: "Explain, for a person, why each tool is or is not available and why each call got its verdict",
		Long: `explain makes the same decision as eval and says why: for each registry tool, what gates it and which
message and part revealed or loaded it (or which compaction part hid that evidence), and for each call
of the last response, its verdict, the model-facing message and the rule, filter or policy file that
decided.

--format pretty (the default) is for people; --format json prints the same explanation as a document
(with the decision of eval inside); --format html writes one self-contained page (no script, nothing
loaded) to open in a browser: the conversation as a timeline with the windows, reveals and loads marked
where they happen, each tool's story and each call's verdict. "text", the former name of pretty, is kept
as an alias.

` + evidenceHelp + `
explain signs nothing: its --receipt-key is only the key whose receipts count, and is refused without
--evidence verified.` + exitCodes(exitLineDecision, exitLineBad),
		Example: `  policycheck explain --registry examples/registry.yaml --history examples/histories/refund.json
  policycheck explain --registry examples/registry.yaml --history examples/histories/refund.json --format html > explain.html`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := parseFormat(explainFormats, format)
			if err != nil {
				return err
			}
			signer, err := rf.signer(cmd)
			if err != nil {
				return err
			}
			verified, err := ev.verified(signer)
			if err != nil {
				return err
			}
			if signer != nil && !verified {
				return badInput(errors.New("--receipt-key on explain is the key whose receipts count with --evidence verified; explain signs nothing, and --evidence is not verified"))
			}
			in.transcript = f == render.HTML
			loaded, eng, err := in.loadEngine(cmd)
			if err != nil {
				return err
			}
			var opts []engine.DecideOption
			if verified {
				opts = append(opts, engine.VerifiedEvidence(signer))
			}
			x, err := eng.Explain(cmd.Context(), loaded.request(), opts...)
			if err != nil {
				return badInput(err)
			}
			return render.Write(cmd.OutOrStdout(), f, &render.Doc{Explanation: x, Transcript: loaded.transcript})
		},
	}
	in.register(cmd, true)
	in.registerApprovals(cmd)
	cmd.Flags().StringVarP(&format, "format", "f", "pretty", "output format: pretty (for people), json, or html (a page for a browser; text: alias of pretty)")
	ev.register(cmd)
	cmd.Flags().StringVar(&rf.key, "receipt-key", "", "with --evidence verified: the Ed25519 private key (PEM, PKCS #8) whose receipts count as evidence (explain signs nothing)")
	return cmd
}
