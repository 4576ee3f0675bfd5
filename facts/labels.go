package facts

import (
	"fmt"
	"slices"
	"strings"
)

// Flow labels (docs/registry.md, "Integrity and confidentiality"): what
// a tool's returns are worth trusting and how far they may travel, and
// how far a value may travel into a tool's arguments. A value's label is
// the join of its sources' labels: the highest confidentiality and the
// lowest integrity.

// Integrity levels of a tool's returns.
const (
	// IntegrityTrusted: the returns are the operator's or the user's
	// own data (a database the agent's owner writes, a clock).
	IntegrityTrusted = "trusted"
	// IntegrityUntrusted: a third party may have written some of the
	// returns (a web page, an email, a review, a shared file). The
	// default.
	IntegrityUntrusted = "untrusted"
)

// ConfidentialityLevels are the confidentiality levels, from the lowest:
// public < internal < confidential < secret. A tool's clearance takes the
// same values.
var ConfidentialityLevels = []string{"public", "internal", "confidential", "secret"}

// The defaults of a tool that sets no flow label, nor its capability:
// fail closed for a policy that uses labels. Its returns are untrusted
// (who wrote them is not known) and internal (not for a public sink, but
// free between the operator's own tools); its clearance is internal (a
// confidential or secret value does not go into it). A tool is not
// consequential unless marked.
const (
	DefaultIntegrity       = IntegrityUntrusted
	DefaultConfidentiality = "internal"
	DefaultClearance       = "internal"
)

// FlowLabels are a tool's or a capability's flow labels as the registry
// sets them; "" (false) for one it does not set.
type FlowLabels struct {
	// Integrity of the tool's returns: "trusted" or "untrusted".
	Integrity string `json:"integrity,omitempty"`
	// Confidentiality of the tool's returns, one of
	// ConfidentialityLevels.
	Confidentiality string `json:"confidentiality,omitempty"`
	// Clearance is the highest confidentiality a value may have to go
	// into the tool's arguments, one of ConfidentialityLevels.
	Clearance string `json:"clearance,omitempty"`
	// Consequential: a call of the tool acts on the world (pays, sends,
	// deletes, shares); the stock library's trusted action asks its
	// arguments to be trusted (policies/lib/integrity.rego).
	Consequential bool `json:"consequential,omitempty"`
}

// ConfidentialityRank is the rank of a confidentiality level (0 for
// public, 3 for secret), -1 for a value that is not one.
func ConfidentialityRank(level string) int { return slices.Index(ConfidentialityLevels, level) }

// errors refuses a value that is not a level, at the object at ptr.
func (l FlowLabels) errors(ptr string) []error {
	var errs []error
	if l.Integrity != "" && l.Integrity != IntegrityTrusted && l.Integrity != IntegrityUntrusted {
		errs = append(errs, &RegistryError{ptr + "/integrity", fmt.Sprintf("integrity %q is not one of \"trusted\", \"untrusted\"", l.Integrity)})
	}
	levels := `"` + strings.Join(ConfidentialityLevels, `", "`) + `"`
	if l.Confidentiality != "" && ConfidentialityRank(l.Confidentiality) < 0 {
		errs = append(errs, &RegistryError{ptr + "/confidentiality", fmt.Sprintf("confidentiality %q is not one of %s", l.Confidentiality, levels)})
	}
	if l.Clearance != "" && ConfidentialityRank(l.Clearance) < 0 {
		errs = append(errs, &RegistryError{ptr + "/clearance", fmt.Sprintf("clearance %q is not one of %s", l.Clearance, levels)})
	}
	return errs
}

// inherit joins a tool's own labels with its capability's, as labels are
// inherited: the lower integrity, the higher confidentiality, the lower
// clearance (each only where one of them sets it), consequential when
// either is.
func (l FlowLabels) inherit(c FlowLabels) FlowLabels {
	out := l
	if l.Integrity == "" || c.Integrity == IntegrityUntrusted {
		out.Integrity = orElse(c.Integrity, l.Integrity)
	}
	if ConfidentialityRank(c.Confidentiality) > ConfidentialityRank(l.Confidentiality) {
		out.Confidentiality = c.Confidentiality
	}
	if l.Clearance == "" || c.Clearance != "" && ConfidentialityRank(c.Clearance) < ConfidentialityRank(l.Clearance) {
		out.Clearance = orElse(c.Clearance, l.Clearance)
	}
	out.Consequential = l.Consequential || c.Consequential
	return out
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Label is the label of a value or of a tool's returns: its integrity and
// confidentiality, both set.
type Label struct {
	Integrity       string
	Confidentiality string
}

// Join is the label of a value made of both: the lower integrity, the
// higher confidentiality.
func (l Label) Join(o Label) Label {
	out := l
	if o.Integrity == IntegrityUntrusted {
		out.Integrity = IntegrityUntrusted
	}
	if ConfidentialityRank(o.Confidentiality) > ConfidentialityRank(l.Confidentiality) {
		out.Confidentiality = o.Confidentiality
	}
	return out
}

// Bottom is the label of nothing: trusted and public (Join's identity).
var Bottom = Label{IntegrityTrusted, ConfidentialityLevels[0]}

// UsesFlowLabels reports whether some tool or capability of the registry
// sets a flow label (integrity, confidentiality, clearance,
// consequential): only then do the policies' data and the flows carry
// them, so that a registry without them keeps its revision.
func (r *Registry) UsesFlowLabels() bool { return r.usesFlowLabels }

// LabelsOf returns the effective flow labels of the named tool with the
// defaults filled in (DefaultIntegrity, DefaultConfidentiality,
// DefaultClearance). The framework tools (load_capability, search_tools)
// return what the registry itself wrote: trusted and public. A tool the
// registry does not have (a provider-side builtin tool, say) has the
// defaults.
func (r *Registry) LabelsOf(tool string) FlowLabels {
	if tool == LoadCapabilityTool || tool == SearchTool {
		return FlowLabels{Integrity: IntegrityTrusted, Confidentiality: ConfidentialityLevels[0], Clearance: DefaultClearance}
	}
	var l FlowLabels
	if i, ok := r.toolIndex[tool]; ok {
		l = r.tools[i].FlowLabels
	}
	l.Integrity = orElse(l.Integrity, DefaultIntegrity)
	l.Confidentiality = orElse(l.Confidentiality, DefaultConfidentiality)
	l.Clearance = orElse(l.Clearance, DefaultClearance)
	return l
}

// ReturnLabel is the label of the named tool's returns (LabelsOf).
func (r *Registry) ReturnLabel(tool string) Label {
	l := r.LabelsOf(tool)
	return Label{l.Integrity, l.Confidentiality}
}
