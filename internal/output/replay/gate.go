package replay

import (
	"fmt"
	"slices"
	"strings"
)

// states are the states each kind of change moves between: the
// vocabulary of transitions and of --fail-on.
var states = map[string][]string{
	KindCall:       {"execute", "not_available_yet", "unknown_tool", "invalid_args", "denied", "approval_required"},
	KindAvailable:  {StateAvailable, StateUnavailable},
	KindAdvertised: {StateAdvertised, StateUnadvertised},
	KindFailClosed: {StateOK, StateFailClosed},
	KindWouldDeny:  {StateNoWouldDeny, StateWouldDeny},
	KindWouldHide:  {StateNoWouldHide, StateWouldHide},
}

// Directions of a change (Direction): toward a call executing, or away
// from it. Loosening is also a --fail-on preset.
const (
	Loosening  = "loosening"
	Tightening = "tightening"
)

// openness ranks the states of each kind by how near they bring a call
// to executing: a verdict of execute over approval_required (a person
// stands between), over not_available_yet (a load away), over a refusal;
// a tool available or advertised over one that is not; a decision over
// one that failed closed. Log-only rules (would_deny, would_hide) change
// nothing that executes and have no direction.
var openness = map[string]map[string]int{
	KindCall:       {"execute": 3, "approval_required": 2, "not_available_yet": 1, "denied": 0, "unknown_tool": 0, "invalid_args": 0},
	KindAvailable:  {StateAvailable: 1, StateUnavailable: 0},
	KindAdvertised: {StateAdvertised: 1, StateUnadvertised: 0},
	KindFailClosed: {StateOK: 1, StateFailClosed: 0},
}

// Direction is Loosening when a change of kind from state from to state
// to moves toward a call executing (denied->execute,
// denied->approval_required, unavailable->available,
// fail_closed->ok, ...), Tightening when it moves away, and "" when it
// does neither (denied->invalid_args, a log-only rule's change).
func Direction(kind, from, to string) string {
	rank := openness[kind]
	f, okf := rank[from]
	g, okt := rank[to]
	switch {
	case !okf || !okt || f == g:
		return ""
	case g > f:
		return Loosening
	default:
		return Tightening
	}
}

// Direction is the change's direction (see the function Direction).
func (c *Change) Direction() string {
	from, to, _ := strings.Cut(c.Transition, "->")
	return Direction(c.Kind, from, to)
}

// Direction is the direction of a row's call verdict transition.
func (r TransitionRow) Direction() string { return Direction(KindCall, r.From, r.To) }

// Gate is a parsed --fail-on: transitions that fail the replay.
type Gate struct{ patterns []pattern }

type pattern struct {
	text     string
	preset   string // Loosening: any change in that direction
	kind     string // "" for *->*
	from, to string // "*" matches any state of kind
}

// ParseGate parses a comma-separated list of transitions FROM->TO, where
// each side is a state of one kind of change (see Change.Transition) or
// *, which matches any: "denied->execute", "*->execute",
// "unadvertised->advertised", "ok->fail_closed", "*->*" (any change); or
// the preset "loosening", any change toward execute (Direction).
func ParseGate(specs []string) (*Gate, error) {
	g := &Gate{}
	for _, spec := range specs {
		for _, t := range strings.Split(spec, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				continue
			}
			if t == Loosening {
				g.patterns = append(g.patterns, pattern{text: t, preset: Loosening})
				continue
			}
			from, to, ok := strings.Cut(t, "->")
			if !ok {
				return nil, fmt.Errorf("--fail-on %q: want FROM->TO, for example denied->execute, or the preset loosening", t)
			}
			p := pattern{text: t, from: strings.TrimSpace(from), to: strings.TrimSpace(to)}
			for kind, st := range states {
				if (p.from == "*" || slices.Contains(st, p.from)) && (p.to == "*" || slices.Contains(st, p.to)) && (p.from != "*" || p.to != "*") {
					p.kind = kind
				}
			}
			if p.kind == "" && (p.from != "*" || p.to != "*") {
				return nil, fmt.Errorf("--fail-on %q: %s and %s are not states of one kind of change (verdicts %s; %s; %s; %s; %s; %s)", t, p.from, p.to,
					strings.Join(states[KindCall], ", "), strings.Join(states[KindAvailable], "/"), strings.Join(states[KindAdvertised], "/"),
					strings.Join(states[KindFailClosed], "/"), strings.Join(states[KindWouldDeny], "/"), strings.Join(states[KindWouldHide], "/"))
			}
			g.patterns = append(g.patterns, p)
		}
	}
	return g, nil
}

// Empty reports whether the gate has no transitions.
func (g *Gate) Empty() bool { return len(g.patterns) == 0 }

// Matches returns, for each pattern that matches a change of r, the
// pattern and the number of changes it matched, in the gate's order.
func (g *Gate) Matches(r *Report) []string {
	var out []string
	for _, p := range g.patterns {
		n := 0
		for i := range r.Changes {
			if p.matches(&r.Changes[i]) {
				n++
			}
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("%s (%d)", p.text, n))
		}
	}
	return out
}

// Match returns the first of the gate's transitions that matches c (as
// --fail-on wrote it), or "" when none does: c fails the replay. A nil
// gate matches nothing.
func (g *Gate) Match(c *Change) string {
	if g == nil {
		return ""
	}
	for _, p := range g.patterns {
		if p.matches(c) {
			return p.text
		}
	}
	return ""
}

func (p pattern) matches(c *Change) bool {
	if p.preset != "" {
		return c.Direction() == p.preset
	}
	from, to, _ := strings.Cut(c.Transition, "->")
	return (p.kind == "" || p.kind == c.Kind) && (p.from == "*" || p.from == from) && (p.to == "*" || p.to == to)
}
