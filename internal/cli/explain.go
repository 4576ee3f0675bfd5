package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/explainpage"
	"github.com/policycheck/policycheck/internal/printable"
	"github.com/policycheck/policycheck/receipt"
)

func newExplainCmd() *cobra.Command {
	var in inputFlags
	var format string
	var ev evidenceFlag
	rf := receiptFlags{ttl: receipt.DefaultTTL}
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
			format, err := normalizeFormat(format, "pretty", "json", "html")
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
			switch format {
			case "json":
				return writeJSON(cmd, x)
			case "html":
				return explainpage.Write(cmd.OutOrStdout(), x, loaded.historyJSON)
			}
			printExplanation(cmd.OutOrStdout(), x)
			return nil
		},
	}
	in.register(cmd, true)
	in.registerApprovals(cmd)
	cmd.Flags().StringVarP(&format, "format", "f", "pretty", "output format: pretty (for people), json, or html (a page for a browser; text: alias of pretty)")
	ev.register(cmd)
	cmd.Flags().StringVar(&rf.key, "receipt-key", "", "with --evidence verified: the Ed25519 private key (PEM, PKCS #8) whose receipts count as evidence (explain signs nothing)")
	return cmd
}

func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

// printExplanation is explain --format pretty; strings from the input are
// escaped (internal/printable).
func printExplanation(w io.Writer, x *engine.Explanation) {
	d := x.Decision
	printable.Fprintf(w, "Filter-cache fingerprint (active capabilities, context, policy and registry revisions; not the history): %s\n", d.Fingerprint)
	for _, e := range d.Errors {
		printable.Fprintf(w, "FAILED CLOSED: %s\n", e)
	}
	printable.Fprintf(w, "Window: %s\n", x.Window)
	if x.Dispatch != "" {
		printable.Fprintf(w, "Dispatch: %s\n", x.Dispatch)
	}
	printable.Fprintf(w, "Active capabilities (next request): %s\n", list(d.Facts.ActiveCapabilities))
	if d.Dispatch != nil {
		printable.Fprintf(w, "Active capabilities (dispatch): %s\n", list(d.Dispatch.ActiveCapabilities))
	}
	fmt.Fprintln(w, "\nTools:")
	for _, t := range x.Tools {
		status := yesNo(t.Available, "available", "NOT available") + ", " + yesNo(t.Advertised, "advertised", "not advertised")
		if t.DispatchAvailable != nil {
			status += ", " + yesNo(*t.DispatchAvailable, "callable by the last response", "NOT callable by the last response")
		}
		printable.Fprintf(w, "  %s: %s\n", t.Name, status)
		for _, why := range t.Why {
			printable.Fprintf(w, "      - %s\n", why)
		}
		if slices.Contains(d.WouldHide, t.Name) {
			printable.Fprintf(w, "      - would hide (log-only rule, not enforced): a log-only policycheck.rules package hides it\n")
		}
	}
	printable.Fprintf(w, "  framework tools available: %s\n", list(framework(d.Available)))
	if len(x.Calls) > 0 {
		fmt.Fprintln(w, "\nCalls of the last response:")
	}
	for _, c := range x.Calls {
		id := "<no id>"
		if c.ToolCallID != nil {
			id = *c.ToolCallID
		}
		printable.Fprintf(w, "  %s %s -> %s\n", id, c.Tool, c.Verdict)
		switch {
		case c.Verdict == engine.ApprovalRequired:
			args, _ := json.Marshal(c.Args)
			printable.Fprintf(w, "      approver is asked: %s\n      arguments: %s\n      digest: %s\n", c.Message, args, c.Digest)
		case c.Message != "":
			printable.Fprintf(w, "      model is told: %s\n", c.Message)
		case c.Args != nil:
			args, _ := json.Marshal(c.Args)
			printable.Fprintf(w, "      executes with: %s\n", args)
		}
		for _, why := range c.Why {
			printable.Fprintf(w, "      - %s\n", why)
		}
		for _, why := range c.WouldDeny {
			printable.Fprintf(w, "      - would deny (log-only rule, not enforced): %s\n", why)
		}
	}
	if len(d.UnverifiedEvidence) > 0 {
		fmt.Fprintln(w)
		printUnverified(w, d)
	}
	if len(d.Approvals) > 0 {
		fmt.Fprintln(w, "\nApprovals:")
	}
	for _, a := range d.Approvals {
		who := list(a.Approvers)
		printable.Fprintf(w, "  %s %s by %s: %s\n", a.ToolCallID, a.Kind, who, a.Why)
	}
	fmt.Fprintln(w, "\nPolicies:")
	for _, p := range x.Policies {
		printable.Fprintf(w, "  %s (%s): %s\n", p.File, p.Package, p.Role)
	}
}

func framework(names []string) []string {
	var out []string
	for _, n := range names {
		if n == "load_capability" || n == "search_tools" {
			out = append(out, n)
		}
	}
	return out
}

func list(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}
