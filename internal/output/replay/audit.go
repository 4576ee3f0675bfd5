package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/facts"
	"github.com/policycheck/policycheck/loader"
	"github.com/policycheck/policycheck/trust"
)

// Recorded is what a decision-log event recorded of the receipts its
// decision handed out and of its approvals' signature checks (the
// sidecar writes them with a receipt key or approver keys: server's
// recordSignatures), read back so that replay can verify them again.
type Recorded struct {
	// DecisionID is the event's decision_id.
	DecisionID string
	// Time is the event's timestamp: when the decision was made, as of
	// which the expiry of its receipts and approval signatures is judged.
	Time time.Time
	// Run is the run the decision was a step of (input.run; "" for a
	// stateless decision): the run_id its receipts must name.
	Run string
	// PolicyRevision is the event's custom.policy_revision.
	PolicyRevision string
	// Calls are the decision's calls, as its input document gives them
	// (tool_call_id, tool and the arguments each would execute with) and
	// as its result judged them (verdict, receipt).
	Calls []RecordedCall
	// Receipts is custom.receipts: the id and kid of each receipt, by
	// call, as the sidecar noted them.
	Receipts []RecordedReceipt
	// Keys is custom.receipt_keys, the JWKS the sidecar served (GET
	// /v1/keys) when it decided; nil when the event records none.
	Keys jwk.Set
	// Approvals is custom.approvals: what the sidecar's signature check
	// made of each approval the request carried.
	Approvals []trust.SignatureOutcome
}

// RecordedCall is one call of a logged decision.
type RecordedCall struct {
	ToolCallID *string
	Tool       string
	// Args are the arguments the call would execute with (the input
	// document's: an applied approval's override_args), as JSON.
	Args    json.RawMessage
	Verdict string
	Receipt string
}

// RecordedReceipt names one receipt in an event's custom.receipts.
type RecordedReceipt struct {
	Call  int    `json:"call"`
	ID    string `json:"jti"`
	KeyID string `json:"kid"`
}

// readRecorded reads what an event recorded for the audit: nil when it
// recorded no receipt and no approval outcome (a log written without a
// receipt key and approver keys). Errors are *loader.Error with the
// pointer inside the event.
func readRecorded(decisionID string, in map[string]any, ts string, result json.RawMessage, custom map[string]json.RawMessage) (*Recorded, error) {
	hasReceipt := bytes.Contains(result, []byte(`"receipt"`))
	_, hasReceipts := custom["receipts"]
	_, hasKeys := custom["receipt_keys"]
	_, hasApprovals := custom["approvals"]
	if !hasReceipt && !hasReceipts && !hasKeys && !hasApprovals {
		return nil, nil
	}
	bad := func(ptr, msg string) error { return &loader.Error{Pointer: ptr, Kind: loader.KindSchema, Msg: msg} }
	rec := &Recorded{DecisionID: decisionID}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return nil, bad("/timestamp", "an event that records receipts or approval signatures needs its timestamp (RFC 3339): their expiry is judged as of it")
	}
	rec.Time = t
	rec.Run, _ = in["run"].(string)
	if raw, ok := custom["policy_revision"]; ok {
		if json.Unmarshal(raw, &rec.PolicyRevision) != nil {
			return nil, bad("/custom/policy_revision", "want a string")
		}
	}
	var res struct {
		Calls []struct {
			Verdict string `json:"verdict"`
			Receipt string `json:"receipt"`
		} `json:"calls"`
	}
	var inCalls []any
	if hasReceipt || hasReceipts {
		if len(result) == 0 || string(result) == "null" {
			return nil, bad("/result", "the event records receipts (custom.receipts) and carries no result (erased by a mask rule?): they cannot be verified")
		}
		if err := json.Unmarshal(result, &res); err != nil {
			return nil, bad("/result", "want the decision document: "+err.Error())
		}
		if d, ok := in["dispatch"].(map[string]any); ok {
			inCalls, _ = d["calls"].([]any)
		}
		if len(res.Calls) != len(inCalls) {
			return nil, bad("/result/calls", fmt.Sprintf("the result judges %d call(s), the input document's dispatch holds %d", len(res.Calls), len(inCalls)))
		}
	}
	for i, v := range inCalls {
		c, _ := v.(map[string]any) // FactsFromInput checked the shape
		rc := RecordedCall{Verdict: res.Calls[i].Verdict, Receipt: res.Calls[i].Receipt}
		rc.Tool, _ = c["tool"].(string)
		if id, ok := c["tool_call_id"].(string); ok {
			rc.ToolCallID = &id
		}
		if rc.Args, err = json.Marshal(c["args"]); err != nil {
			return nil, bad(fmt.Sprintf("/input/dispatch/calls/%d/args", i), err.Error())
		}
		rec.Calls = append(rec.Calls, rc)
	}
	strict := func(raw json.RawMessage, v any) error {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		return dec.Decode(v)
	}
	if hasReceipts {
		if err := strict(custom["receipts"], &rec.Receipts); err != nil {
			return nil, bad("/custom/receipts", "want an array of {call, jti, kid}: "+err.Error())
		}
	}
	if hasKeys {
		if rec.Keys, err = trust.ParseKeys(custom["receipt_keys"]); err != nil {
			return nil, bad("/custom/receipt_keys", "want a JWKS: "+err.Error())
		}
	}
	if hasApprovals {
		if err := strict(custom["approvals"], &rec.Approvals); err != nil {
			return nil, bad("/custom/approvals", "want an array of approval signature outcomes: "+err.Error())
		}
	}
	return rec, nil
}

// Audit is what replay verified of what the logged decisions recorded:
// the receipts they handed out, checked against their calls and the
// keys, and the signatures of the approvals they were decided with.
type Audit struct {
	// ReceiptKeys says which keys verified the receipts: "recorded" (the
	// JWKS each event records) or the --receipt-keys source.
	ReceiptKeys string        `json:"receipt_keys"`
	Receipts    ReceiptAudit  `json:"receipts"`
	Approvals   ApprovalAudit `json:"approvals"`
	// Findings are the receipts and approval signatures that did not
	// verify, each saying why.
	Findings []Finding `json:"findings"`
}

// ReceiptAudit counts the recorded receipts checked and those found
// valid for their call.
type ReceiptAudit struct {
	Checked int `json:"checked"`
	Valid   int `json:"valid"`
}

func (r *ReceiptAudit) add(o ReceiptAudit) {
	r.Checked += o.Checked
	r.Valid += o.Valid
}

// ApprovalAudit counts the approval signature outcomes the logs record
// (and of them those the sidecar refused), the approvals a logged
// decision was decided with that replay judged again with
// --approver-keys (and of them those verified), and those recorded as
// signed that were not judged again for want of --approver-keys.
type ApprovalAudit struct {
	Recorded        int `json:"recorded"`
	RecordedRefused int `json:"recorded_refused"`
	Checked         int `json:"checked"`
	Verified        int `json:"verified"`
	NotChecked      int `json:"not_checked"`
}

func (a *ApprovalAudit) add(o ApprovalAudit) {
	a.Recorded += o.Recorded
	a.RecordedRefused += o.RecordedRefused
	a.Checked += o.Checked
	a.Verified += o.Verified
	a.NotChecked += o.NotChecked
}

// Finding kinds.
const (
	FindingReceipt  = "receipt"
	FindingApproval = "approval"
)

// Finding is a recorded receipt or approval signature that does not
// verify.
type Finding struct {
	Run     string `json:"run"`
	Message int    `json:"message"`
	// Kind is "receipt" or "approval".
	Kind       string  `json:"kind"`
	ToolCallID *string `json:"tool_call_id"`
	Tool       string  `json:"tool,omitempty"`
	// ID is the receipt's id (jti), when it has one; KeyID the kid its
	// signature names.
	ID     string `json:"jti,omitempty"`
	KeyID  string `json:"kid,omitempty"`
	Reason string `json:"reason"`
	// Source is the event's file and pointer.
	Source string `json:"source"`
}

// Headline is the finding in one line.
func (f Finding) Headline() string {
	id := "(no tool_call_id)"
	if f.ToolCallID != nil {
		id = *f.ToolCallID
	}
	var names []string
	if f.ID != "" {
		names = append(names, "jti "+f.ID)
	}
	if f.KeyID != "" {
		names = append(names, "kid "+f.KeyID)
	}
	what := fmt.Sprintf("%s of call %s %s", f.Kind, id, f.Tool)
	if names != nil {
		what += " (" + strings.Join(names, ", ") + ")"
	}
	return what + ": " + f.Reason
}

// seenReceipt is a receipt id met in a run, to find one handed out twice.
type seenReceipt struct {
	id, decision string
	finding      Finding
	valid        bool // it verified
}

// audit is one run's part of the audit.
type audit struct {
	recorded  bool // some step recorded receipts or approval outcomes
	receipts  ReceiptAudit
	approvals ApprovalAudit
	findings  []Finding
	seen      []seenReceipt
}

// judgeApprovals returns the approvals a logged step is to be decided
// with. With approver keys, each is judged again as the sidecar judged
// it, with the signature the event recorded, as of the event's time: one
// that does not verify is decided as not applied, and is a finding.
// Without them, those the event records as checked by approver keys are
// counted as not judged again.
func (a *audit) judgeApprovals(run string, st Step, keys jwk.Set) (facts.Approvals, error) {
	rec := st.Recorded
	outcomes := map[string]trust.SignatureOutcome{}
	if rec != nil {
		for _, o := range rec.Approvals {
			outcomes[o.ToolCallID] = o
			a.approvals.Recorded++
			if o.Result != trust.Verified {
				a.approvals.RecordedRefused++
			}
		}
	}
	if len(st.Approvals) == 0 {
		return st.Approvals, nil
	}
	if keys == nil {
		for id := range st.Approvals {
			if _, ok := outcomes[id]; ok {
				a.approvals.NotChecked++
			}
		}
		return st.Approvals, nil
	}
	at := time.Now
	if rec != nil {
		at = func() time.Time { return rec.Time }
	}
	// The sidecar's --approval-max-ttl is not in the log: the exp is
	// required, and judged as of the event's time, but not bounded.
	v, err := trust.NewApprovalVerifier(keys, trust.Clock(at), trust.MaxTTL(0))
	if err != nil {
		return nil, err
	}
	given := make(facts.Approvals, len(st.Approvals))
	for id, ap := range st.Approvals {
		ap.Signature = outcomes[id].Signature
		given[id] = ap
	}
	var runID string
	if rec != nil {
		runID = rec.Run
	}
	judged := v.Check(given, runID)
	for _, id := range slices.Sorted(maps.Keys(judged)) {
		ap := judged[id]
		a.approvals.Checked++
		f := Finding{Run: run, Message: st.Message, Kind: FindingApproval, ToolCallID: &id, Tool: toolOf(st.Facts, id), KeyID: ap.KeyID, Source: st.Source}
		switch {
		case ap.Verification != trust.Verified:
			f.Reason = "the logged decision was made with it applied, and --approver-keys refuses it: " + ap.Refused
		case !slices.Equal(ap.Approvers, st.Approvals[id].Approvers):
			f.Reason = fmt.Sprintf("the logged decision names the approvers %q, the signing key is %q's", st.Approvals[id].Approvers, ap.Approvers)
		default:
			a.approvals.Verified++
			continue
		}
		a.findings = append(a.findings, f)
	}
	return judged, nil
}

func toolOf(f *facts.Facts, id string) string {
	if f == nil || f.Dispatch == nil {
		return ""
	}
	for _, c := range f.Dispatch.Calls {
		if c.ToolCallID != nil && *c.ToolCallID == id {
			return c.Tool
		}
	}
	return ""
}

// checkReceipts verifies every receipt a logged step recorded against
// the call it was handed out with (run, tool_call_id, tool, the
// arguments it would execute with), as of the event's time, with keys
// (--receipt-keys) or, when nil, the keys the event records; and that
// the call executed, the receipt names the policy revision that decided,
// and custom.receipts names it.
func (a *audit) checkReceipts(run string, st Step, keys jwk.Set) {
	rec := st.Recorded
	if rec == nil {
		return
	}
	a.recorded = true
	listed := map[int]RecordedReceipt{}
	for _, r := range rec.Receipts {
		listed[r.Call] = r
		if r.Call < 0 || r.Call >= len(rec.Calls) {
			a.findings = append(a.findings, Finding{Run: run, Message: st.Message, Kind: FindingReceipt, ID: r.ID, KeyID: r.KeyID, Source: st.Source,
				Reason: fmt.Sprintf("custom.receipts names call %d, and the decision has %d call(s)", r.Call, len(rec.Calls))})
		}
	}
	if keys == nil {
		keys = rec.Keys
	}
	for i, c := range rec.Calls {
		l, isListed := listed[i]
		f := Finding{Run: run, Message: st.Message, Kind: FindingReceipt, ToolCallID: c.ToolCallID, Tool: c.Tool, Source: st.Source}
		if c.Receipt == "" {
			if isListed {
				f.ID, f.KeyID = l.ID, l.KeyID
				f.Reason = "custom.receipts names a receipt for this call, and the call carries none"
				a.findings = append(a.findings, f)
			}
			continue
		}
		a.receipts.Checked++
		kid, peeked, _ := trust.Peek(c.Receipt)
		f.KeyID = kid
		if peeked != nil {
			f.ID = peeked.ID
		}
		var reason string
		if keys == nil {
			reason = "no key to verify it with: the event records no receipt_keys, and no --receipt-keys was given"
		} else if cl, err := trust.Verify(c.Receipt, keys, trust.Call{RunID: rec.Run, ToolCallID: c.ToolCallID, Tool: c.Tool, Args: c.Args},
			trust.Clock(func() time.Time { return rec.Time })); err != nil {
			reason = err.Error()
		} else {
			switch {
			case c.Verdict != engine.Execute:
				reason = fmt.Sprintf("a receipt on a call the logged decision judged %s", c.Verdict)
			case rec.PolicyRevision != "" && cl.PolicyRevision != rec.PolicyRevision:
				reason = fmt.Sprintf("issued by policy revision %s, the event's decision was made by %s", cl.PolicyRevision, rec.PolicyRevision)
			case rec.Receipts != nil && !isListed:
				reason = "custom.receipts does not name it"
			case isListed && (l.ID != cl.ID || l.KeyID != kid):
				reason = fmt.Sprintf("custom.receipts names jti %q kid %q, the receipt is jti %q kid %q", l.ID, l.KeyID, cl.ID, kid)
			}
		}
		if f.ID != "" {
			a.seen = append(a.seen, seenReceipt{id: f.ID, decision: rec.DecisionID, finding: f, valid: reason == ""})
		}
		if reason != "" {
			f.Reason = reason
			a.findings = append(a.findings, f)
			continue
		}
		a.receipts.Valid++
	}
}

// finishAudit sums the runs' audits into the report: nil when no logged
// decision recorded anything and nothing was judged (the report is then
// what it was before receipts existed). A valid receipt whose id an
// earlier decision handed out too is a finding: a receipt copied, with
// its call, into another decision (one that does not verify is a finding
// already).
func finishAudit(audits []*audit, keysFrom string) *Audit {
	out := &Audit{ReceiptKeys: keysFrom, Findings: []Finding{}}
	found := false
	first := map[string]seenReceipt{}
	for _, a := range audits {
		if a == nil {
			continue
		}
		if a.recorded || a.approvals != (ApprovalAudit{}) || len(a.findings) > 0 {
			found = true
		}
		out.Receipts.add(a.receipts)
		out.Approvals.add(a.approvals)
		out.Findings = append(out.Findings, a.findings...)
		for _, s := range a.seen {
			p, dup := first[s.id]
			if !dup {
				first[s.id] = s
				continue
			}
			if p.decision == s.decision || !s.valid {
				continue // the same event logged twice, or found already
			}
			f := s.finding
			f.Reason = fmt.Sprintf("the same receipt (jti %s) was handed out in another decision, %s message %d (%s): a receipt copied into another decision",
				s.id, p.finding.Run, p.finding.Message, p.finding.Source)
			out.Findings = append(out.Findings, f)
			out.Receipts.Valid--
		}
	}
	if !found {
		return nil
	}
	return out
}
