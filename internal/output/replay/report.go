package replay

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Report is what a replay found. Its JSON form is what
// `policycheck replay --format json` prints.
type Report struct {
	Baseline  SideInfo `json:"baseline"`
	Candidate SideInfo `json:"candidate"`
	// RegistryChanges says what the candidate's registry changes, when
	// the sides' registries differ (RegistryChanges).
	RegistryChanges []string `json:"registry_changes,omitempty"`
	// Runs is the number of runs replayed; Decisions the number of steps
	// each side decided; Calls the number of calls each side judged.
	Runs      int `json:"runs"`
	Decisions int `json:"decisions"`
	Calls     int `json:"calls"`
	// Transitions counts every judged call by "BASELINE->CANDIDATE"
	// verdicts, unchanged pairs (execute->execute) included.
	Transitions map[string]int `json:"transitions"`
	// Available and Advertised count the (step, tool) pairs the candidate
	// gained or lost, on steps that end with a request.
	Available  Delta      `json:"available"`
	Advertised Delta      `json:"advertised"`
	FailClosed FailClosed `json:"fail_closed"`
	// WouldDeny counts, per side, the calls a log-only rule would deny;
	// WouldHide the (step, tool) pairs a log-only rule would hide that the
	// candidate gained or lost.
	WouldDeny FailClosed `json:"would_deny"`
	WouldHide Delta      `json:"would_hide"`
	// Changes lists every difference, by run, message and kind.
	Changes []Change `json:"changes"`
	// Audit is what replay verified of the receipts and approval
	// signatures the logged decisions recorded; absent when none recorded
	// any.
	Audit *Audit `json:"audit,omitempty"`
}

// SideInfo names a side's policies, its registry file and their
// revisions.
type SideInfo struct {
	Policies         []string `json:"policies"`
	PolicyRevision   string   `json:"policy_revision"`
	Registry         string   `json:"registry,omitempty"`
	RegistryRevision string   `json:"registry_revision"`
}

// Delta counts names gained and lost by the candidate.
type Delta struct {
	Gained int `json:"gained"`
	Lost   int `json:"lost"`
}

func (d *Delta) add(o Delta) {
	d.Gained += o.Gained
	d.Lost += o.Lost
}

// FailClosed counts the decisions of each side that failed closed.
type FailClosed struct {
	Baseline  int `json:"baseline"`
	Candidate int `json:"candidate"`
}

func (f *FailClosed) add(o FailClosed) {
	f.Baseline += o.Baseline
	f.Candidate += o.Candidate
}

// Change is one difference between the sides' decisions of a step.
type Change struct {
	Run string `json:"run"`
	// Message is the index of the step's last message.
	Message int `json:"message"`
	// Kind is call, available, advertised, fail_closed, or, for log-only
	// rules, would_deny and would_hide.
	Kind string `json:"kind"`
	// ToolCallID and Part identify a call (kind call); Tool names the
	// call's tool or the tool gained or lost.
	ToolCallID *string `json:"tool_call_id,omitempty"`
	Tool       string  `json:"tool,omitempty"`
	Part       int     `json:"part,omitempty"`
	// Transition is "BASELINE->CANDIDATE" of the states below: verdicts
	// for a call; available/unavailable, advertised/unadvertised,
	// ok/fail_closed for the other kinds. --fail-on matches it.
	Transition string  `json:"transition"`
	Baseline   Outcome `json:"baseline"`
	Candidate  Outcome `json:"candidate"`
}

// Outcome is one side's part of a change.
type Outcome struct {
	State string `json:"state"`
	// Message is a refusal's model-facing retry text.
	Message string `json:"message,omitempty"`
	// Reasons are the operator-facing explanations: the verdict's
	// reasons, what removed a tool, or the errors of a fail-closed
	// decision.
	Reasons []string `json:"reasons,omitempty"`
	// Receipt, with replay --receipt-key, is the execution receipt the
	// candidate signs for a call whose verdict changed to execute.
	Receipt string `json:"receipt,omitempty"`
}

// Anchor is the change's place in the HTML report ("RUN#MESSAGE" made
// safe for an id).
func (c *Change) Anchor() string { return stepAnchor(c.Run, c.Message) }

func newReport(s Sides) *Report {
	info := func(pols []string, reg string, e interface{ Revision() (string, string) }) SideInfo {
		p, r := e.Revision()
		if pols == nil {
			pols = []string{}
		}
		return SideInfo{Policies: pols, PolicyRevision: p, Registry: reg, RegistryRevision: r}
	}
	r := &Report{
		Baseline:    info(s.BaselinePolicies, s.BaselineRegistry, s.Baseline),
		Candidate:   info(s.CandidatePolicies, s.CandidateRegistry, s.Candidate),
		Transitions: map[string]int{},
		Changes:     []Change{},
	}
	if r.Baseline.RegistryRevision != r.Candidate.RegistryRevision {
		r.RegistryChanges = RegistryChanges(s.Baseline.Registry(), s.Candidate.Registry())
	}
	return r
}

func (r *Report) add(t *tally) {
	r.Decisions += t.decisions
	r.Calls += t.calls
	for k, v := range t.transitions {
		r.Transitions[k] += v
	}
	r.Available.add(t.available)
	r.Advertised.add(t.advertise)
	r.FailClosed.add(t.failClosed)
	r.WouldDeny.add(t.wouldDeny)
	r.WouldHide.add(t.wouldHide)
	r.Changes = append(r.Changes, t.changes...)
}

// TransitionRow is one row of the transition table.
type TransitionRow struct {
	From, To string
	Count    int
	Changed  bool
}

// TransitionRows returns the call transitions, changed ones first, each
// group by count (descending) then name.
func (r *Report) TransitionRows() []TransitionRow {
	rows := make([]TransitionRow, 0, len(r.Transitions))
	for _, k := range slices.Sorted(maps.Keys(r.Transitions)) {
		from, to, _ := strings.Cut(k, "->")
		rows = append(rows, TransitionRow{From: from, To: to, Count: r.Transitions[k], Changed: from != to})
	}
	slices.SortStableFunc(rows, func(a, b TransitionRow) int {
		if a.Changed != b.Changed {
			if a.Changed {
				return -1
			}
			return 1
		}
		return b.Count - a.Count
	})
	return rows
}

// Headline is the change in one line: what changed and how.
func (c *Change) Headline() string {
	switch c.Kind {
	case KindCall:
		id := "(no tool_call_id)"
		if c.ToolCallID != nil {
			id = *c.ToolCallID
		}
		return fmt.Sprintf("call %s %s: %s -> %s", id, c.Tool, c.Baseline.State, c.Candidate.State)
	case KindWouldDeny:
		id := "(no tool_call_id)"
		if c.ToolCallID != nil {
			id = *c.ToolCallID
		}
		return fmt.Sprintf("call %s %s (log-only): %s -> %s", id, c.Tool, c.Baseline.State, c.Candidate.State)
	case KindFailClosed:
		return fmt.Sprintf("decision: %s -> %s", c.Baseline.State, c.Candidate.State)
	}
	return fmt.Sprintf("%s %s: %s -> %s", c.Kind, c.Tool, c.Baseline.State, c.Candidate.State)
}

// stepAnchor is the HTML id of a run's step.
func stepAnchor(run string, msg int) string {
	var b strings.Builder
	b.WriteString("step-")
	for _, r := range run {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, ".%x.", r)
		}
	}
	fmt.Fprintf(&b, "-m%d", msg)
	return b.String()
}
