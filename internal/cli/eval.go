package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/ground/printable"
	"github.com/policycheck/policycheck/internal/output/render"
)

func newEvalCmd() *cobra.Command {
	var in inputFlags
	var format string
	var failOnRefusal bool
	var rf receiptFlags
	var ak approverKeysFlag
	var ev evidenceFlag
	cmd := &cobra.Command{
		Use:   "eval --registry R --history H [--context C] [--approvals A] [--policy DIR|FILE|BUNDLE]... [--format json|pretty] [--fail-on-refusal] [--evidence client|verified]",
		Short: "Decide availability, advertisement and every call's verdict (JSON, or --format pretty)",
		Long: `eval prints the decision document: the fingerprint, the facts, the tools available and advertised for
the next request and, when the history ends with a response, the dispatch facts and one verdict per
tool call (execute, not_available_yet, unknown_tool, invalid_args, denied or approval_required), with
the model-facing retry message on every refusal (invalid_args: the arguments fail the tool's
parameters_json_schema in the registry; "args_errors" says where). An approval_required call carries
its arguments and digest for the approver; --approvals passes the answers back (each bound to one call
by that digest, and used once that call's outcome is in the history), and the decision's "approvals"
says who approved what and whether each approval applied. A policy error, a timeout or an undefined result fails the decision closed: every
registry tool unavailable, every call denied, and "errors" says why (exit status 0: a decision was made).

--format json (the default) prints the decision document (docs/decision.md), for
scripts; --format pretty prints the same decision as a short summary for a person (explain says why).

--fail-on-refusal gates a pipeline, as "opa eval --fail-defined" does: the decision is printed as
usual, and the exit status is 3 when any call of the last response does not execute (not_available_yet,
unknown_tool, invalid_args, denied, approval_required) or the decision failed closed.

--receipt-key signs an execution receipt, "receipt", for every call judged execute: a compact JWS
(EdDSA) over its tool_call_id, tool, the digest of the arguments that will run, the policy revision
and the approvals applied, valid for --receipt-ttl. The tool service verifies it before it runs the
call (policycheck receipt verify, package trust; docs/trust.md).

--approver-keys (a JWKS) counts an approval only when it carries "signature", a compact JWS by one of
those keys over its digest, kind and override_args, no run_id (eval decides no run) and an exp at most
--approval-max-ttl ahead; its approver is then the key's sub (or kid). Any
other approval is not applied, and the decision's "approvals" says why (docs/trust.md).

` + evidenceHelp + exitCodes(exitLineDecision, exitLineBad, exitLineRefused),
		Example: `  policycheck eval --registry examples/registry.yaml --history examples/histories/refund.json \
    --policy examples/policies --context examples/context/support.json
  policycheck eval --registry examples/registry.yaml --history examples/histories/refund.json --format pretty
  policycheck eval --registry examples/registry.yaml --history run.json --fail-on-refusal > decision.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := parseFormat(evalFormats, format)
			if err != nil {
				return err
			}
			signer, err := rf.signer(cmd)
			if err != nil {
				return err
			}
			approvers, err := ak.verifier(cmd)
			if err != nil {
				return err
			}
			verified, err := ev.verified(signer)
			if err != nil {
				return err
			}
			loaded, eng, err := in.loadEngine(cmd)
			if err != nil {
				return err
			}
			req := loaded.request()
			if approvers != nil {
				req.Approvals = approvers.Check(req.Approvals, "")
			}
			var opts []engine.DecideOption
			if verified {
				opts = append(opts, engine.VerifiedEvidence(signer))
			}
			if signer != nil {
				opts = append(opts, engine.WithReceipts(signer, ""))
			}
			d, err := eng.Decide(cmd.Context(), req, opts...)
			if errors.Is(err, engine.ErrSign) {
				return err
			}
			if err != nil {
				return badInput(err)
			}
			if err := render.Write(cmd.OutOrStdout(), f, &render.Doc{Decision: d}); err != nil {
				return err
			}
			if failOnRefusal {
				return refusalError(d)
			}
			return nil
		},
	}
	in.register(cmd, true)
	in.registerApprovals(cmd)
	cmd.Flags().StringVarP(&format, "format", "f", "json", "output format: json (the decision document) or pretty (a summary for people)")
	cmd.Flags().BoolVar(&failOnRefusal, "fail-on-refusal", false, "exit 3 when a call is refused or the decision failed closed")
	rf.register(cmd)
	ak.register(cmd)
	ev.register(cmd)
	return cmd
}

// refusalError is the exit status 3 of --fail-on-refusal, or nil when
// every call executes and the decision did not fail closed.
func refusalError(d *engine.Decision) error {
	if len(d.Errors) > 0 {
		return &exitError{code: ExitRefused, err: fmt.Errorf("--fail-on-refusal: the decision failed closed: %s", printable.String(d.Errors[0]))}
	}
	refused := 0
	first := ""
	for _, c := range d.Calls {
		if c.Verdict != engine.Execute {
			if refused == 0 {
				first = fmt.Sprintf("%s (%s)", printable.String(c.Tool), c.Verdict)
			}
			refused++
		}
	}
	if refused > 0 {
		return &exitError{code: ExitRefused, err: fmt.Errorf("--fail-on-refusal: %d of %d calls refused, first %s", refused, len(d.Calls), first)}
	}
	return nil
}
