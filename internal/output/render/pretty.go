package render

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/internal/ground/jsonout"
	"github.com/policycheck/policycheck/internal/ground/printable"
	"github.com/policycheck/policycheck/internal/output/explainpage"
	"github.com/policycheck/policycheck/internal/output/replay"
)

// prettyRenderer writes a document for a person at a terminal; every
// string that came from input is escaped (internal/ground/printable).
type prettyRenderer struct{}

func (prettyRenderer) Render(w io.Writer, d *Doc) error {
	v, err := d.section()
	if err != nil {
		return err
	}
	switch v := v.(type) {
	case *engine.Decision:
		prettyDecision(w, v)
		return nil
	case *engine.Explanation:
		prettyExplanation(w, v)
		return nil
	case *replay.Report:
		return prettyReplay(w, v)
	}
	return noForm(Pretty, v)
}

const noCalls = "none (the history ends with a request)"

// fingerprintLine names the decision's fingerprint, in eval's and
// explain's pretty output.
const fingerprintLine = "Filter-cache fingerprint (active capabilities, context, policy and registry revisions; not the history): %s\n"

// failedClosed writes why a decision failed closed, if it did.
func failedClosed(w io.Writer, d *engine.Decision) {
	for _, e := range d.Errors {
		printable.Fprintf(w, "FAILED CLOSED: %s\n", e)
	}
}

// callLine writes a call's heading: its tool_call_id, tool and verdict.
func callLine(w io.Writer, c *engine.CallVerdict) {
	id := "<no id>"
	if c.ToolCallID != nil {
		id = *c.ToolCallID
	}
	printable.Fprintf(w, "  %s %s -> %s\n", id, c.Tool, c.Verdict)
}

// prettyDecision is eval --format pretty: the decision, without the why;
// strings from the input are escaped (internal/ground/printable).
func prettyDecision(w io.Writer, d *engine.Decision) {
	failedClosed(w, d)
	printable.Fprintf(w, "Available (%d): %s\n", len(d.Available), list(d.Available))
	printable.Fprintf(w, "Advertised (%d): %s\n", len(d.Advertised), list(d.Advertised))
	printable.Fprintf(w, "Active capabilities: %s\n", list(d.Facts.ActiveCapabilities))
	if d.Dispatch == nil {
		fmt.Fprintln(w, "Calls: "+noCalls)
	} else {
		printable.Fprintf(w, "Calls (%d):\n", len(d.Calls))
		for _, c := range d.Calls {
			callLine(w, &c)
			if c.Message != "" {
				printable.Fprintf(w, "      %s: %s\n", told(&c), c.Message)
			}
			if c.Receipt != "" {
				printable.Fprintf(w, "      receipt: %s\n", c.Receipt)
			}
		}
	}
	prettyUnverified(w, d)
	prettyApprovals(w, d)
	printable.Fprintf(w, fingerprintLine, d.Fingerprint)
}

// told names who reads a call's message: the approver of an
// approval_required call, the model of any other refusal.
func told(c *engine.CallVerdict) string {
	if c.Verdict == engine.ApprovalRequired {
		return "approver is asked"
	}
	return "model is told"
}

// prettyApprovals lists what became of the request's approvals, each
// with why, if it carried any.
func prettyApprovals(w io.Writer, d *engine.Decision) {
	if len(d.Approvals) == 0 {
		return
	}
	printable.Fprintf(w, "Approvals (%d):\n", len(d.Approvals))
	for _, a := range d.Approvals {
		printable.Fprintf(w, "  %s %s by %s: %s\n", a.ToolCallID, a.Kind, list(a.Approvers), a.Why)
	}
}

// prettyUnverified lists the evidence that did not count (--evidence
// verified), if any.
func prettyUnverified(w io.Writer, d *engine.Decision) {
	if len(d.UnverifiedEvidence) == 0 {
		return
	}
	printable.Fprintf(w, "Unverified evidence, ignored (%d):\n", len(d.UnverifiedEvidence))
	for _, u := range d.UnverifiedEvidence {
		printable.Fprintf(w, "  message %d, part %d: %s\n", u.Message, u.Part, u.Why)
	}
}

func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

// prettyExplanation is explain --format pretty; strings from the input are
// escaped (internal/ground/printable).
func prettyExplanation(w io.Writer, x *engine.Explanation) {
	d := x.Decision
	printable.Fprintf(w, fingerprintLine, d.Fingerprint)
	failedClosed(w, d)
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
	printable.Fprintf(w, "  framework tools available: %s\n", list(explainpage.FrameworkTools(d.Available)))
	if len(x.Calls) > 0 {
		fmt.Fprintln(w, "\nCalls of the last response:")
	}
	for _, c := range x.Calls {
		callLine(w, &c.CallVerdict)
		switch {
		case c.Verdict == engine.ApprovalRequired:
			args, _ := jsonout.Marshal(c.Args)
			printable.Fprintf(w, "      approver is asked: %s\n      arguments: %s\n      digest: %s\n", c.Message, args, c.Digest)
		case c.Message != "":
			printable.Fprintf(w, "      model is told: %s\n", c.Message)
		case c.Args != nil:
			args, _ := jsonout.Marshal(c.Args)
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
		prettyUnverified(w, d)
	}
	if len(x.NearMisses) > 0 {
		printable.Fprintf(w, "\nNear misses, not counted (%d):\n", len(x.NearMisses))
	}
	for _, nm := range x.NearMisses {
		printable.Fprintf(w, "  %s\n", nm.Why)
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

func list(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// prettyReplay is replay --format pretty: the summary table and then every change, for a
// person at a terminal: every string that came from the inputs (run
// names, tool_call_ids, tools, states, reasons, messages) is escaped
// (internal/ground/printable), so that none can move the cursor or hide a line.
func prettyReplay(w io.Writer, r *replay.Report) error {
	var b strings.Builder
	printable.Fprintf(&b, "replay: %d runs, %d decisions per side, %d calls judged\n", r.Runs, r.Decisions, r.Calls)
	// The registries are named when they differ: the sides' policies
	// alone do not say what changed then.
	registries := r.Baseline.RegistryRevision != r.Candidate.RegistryRevision
	side := func(name string, s replay.SideInfo) {
		pols := "(shipped defaults)"
		if len(s.Policies) > 0 {
			pols = strings.Join(s.Policies, " ")
		}
		if registries {
			pols += ", registry " + s.Registry
		}
		printable.Fprintf(&b, "%-10s %s\n", name+":", pols)
	}
	side("baseline", r.Baseline)
	side("candidate", r.Candidate)
	for i, c := range r.RegistryChanges {
		label := ""
		if i == 0 {
			label = "registry:"
		}
		printable.Fprintf(&b, "%-10s %s\n", label, c)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "VERDICT (BASELINE -> CANDIDATE)\tCALLS")
	for _, row := range r.TransitionRows() {
		if row.Changed {
			printable.Fprintf(tw, "%s -> %s\t%d\tchanged\n", row.From, row.To, row.Count)
		} else {
			printable.Fprintf(tw, "%s -> %s\t%d\n", row.From, row.To, row.Count)
		}
	}
	printable.Fprintf(tw, "available\t+%d -%d\n", r.Available.Gained, r.Available.Lost)
	printable.Fprintf(tw, "advertised\t+%d -%d\n", r.Advertised.Gained, r.Advertised.Lost)
	printable.Fprintf(tw, "fail-closed decisions\tbaseline %d, candidate %d\n", r.FailClosed.Baseline, r.FailClosed.Candidate)
	if r.WouldDeny != (replay.FailClosed{}) || r.WouldHide != (replay.Delta{}) {
		printable.Fprintf(tw, "would deny (log-only)\tbaseline %d, candidate %d\n", r.WouldDeny.Baseline, r.WouldDeny.Candidate)
		printable.Fprintf(tw, "would hide (log-only)\t+%d -%d\n", r.WouldHide.Gained, r.WouldHide.Lost)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	prettyAudit(&b, r.Audit)
	if len(r.Changes) == 1 {
		b.WriteString("\n1 change\n")
	} else {
		printable.Fprintf(&b, "\n%d changes\n", len(r.Changes))
	}
	for _, c := range r.Changes {
		printable.Fprintf(&b, "\n%s  message %d  %s\n", c.Run, c.Message, c.Headline())
		outcome := func(name string, o replay.Outcome) {
			printable.Fprintf(&b, "  %-10s %s\n", name+":", o.State)
			for _, reason := range o.Reasons {
				printable.Fprintf(&b, "             reason: %s\n", reason)
			}
			if o.Message != "" {
				printable.Fprintf(&b, "             message: %s\n", o.Message)
			}
		}
		outcome("baseline", c.Baseline)
		outcome("candidate", c.Candidate)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// prettyAudit writes the audit's summary and findings (nothing when a is
// nil), escaped as the rest of the pretty report.
func prettyAudit(b *strings.Builder, a *replay.Audit) {
	if a == nil {
		return
	}
	keys := "the keys each event records"
	if a.ReceiptKeys != "recorded" {
		keys = "--receipt-keys " + a.ReceiptKeys
	}
	b.WriteString("\n")
	ap := a.Approvals
	if a.Receipts.Checked > 0 || ap == (replay.ApprovalAudit{}) {
		printable.Fprintf(b, "recorded receipts:  %d checked, %d valid (verified with %s)\n", a.Receipts.Checked, a.Receipts.Valid, keys)
	}
	if ap != (replay.ApprovalAudit{}) {
		printable.Fprintf(b, "recorded approvals: %d signature outcome(s) recorded, %d of them refused by the sidecar; %d judged again with --approver-keys, %d verified",
			ap.Recorded, ap.RecordedRefused, ap.Checked, ap.Verified)
		if ap.NotChecked > 0 {
			printable.Fprintf(b, "; %d applied under approver keys and not judged again (give --approver-keys)", ap.NotChecked)
		}
		b.WriteString("\n")
	}
	if len(a.Findings) == 1 {
		b.WriteString("1 finding\n")
	} else {
		printable.Fprintf(b, "%d findings\n", len(a.Findings))
	}
	for _, f := range a.Findings {
		printable.Fprintf(b, "\n%s  message %d  %s\n  source: %s\n", f.Run, f.Message, f.Headline(), f.Source)
	}
}
