package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/cli"
)

// runCLI runs the command line in-process and returns its exit status,
// stdout and stderr.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := cli.Run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// replayDenyRule is the one rule the candidate adds: refunds above 40
// are denied.
const replayDenyRule = `# METADATA
# title: Refund ceiling
# description: The candidate's one new rule.
package policycheck.rules.refund_ceiling

# METADATA
# title: deny
# description: Denies refunds above 40.
deny contains {"reason": "refund above 40", "message": "Refunds above 40 need a supervisor."} if {
	input.call.tool == "issue_refund"
	input.call.args.amount > 40
}
`

// replayCorpus writes a directory of recorded runs: the shipped example
// histories, a JSON Lines file holding two of them again, and a
// candidate policy directory (the example policies plus one deny rule).
// It returns the corpus directory, the candidate's extra file, and each
// run's name (as replay names it) with its history's JSON.
func replayCorpus(t *testing.T) (dir, rule string, runs map[string][]json.RawMessage) {
	t.Helper()
	root := t.TempDir()
	dir = filepath.Join(root, "runs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	runs = map[string][]json.RawMessage{}
	files, _ := filepath.Glob(filepath.Join(examplesDir, "histories", "*.json"))
	var lines [][]byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(dst, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		var msgs []json.RawMessage
		if err := json.Unmarshal(raw, &msgs); err != nil {
			t.Fatal(err)
		}
		runs[dst] = msgs
		if b := filepath.Base(f); b == "refund-after-lookup.json" || b == "after-compaction.json" {
			var compact bytes.Buffer
			if err := json.Compact(&compact, raw); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, compact.Bytes())
		}
		if filepath.Base(f) == "refund-after-lookup.json" {
			// The same run with a refund under the ceiling: unchanged.
			small := bytes.Replace(raw, []byte("42.5"), []byte("30"), 1)
			dst := filepath.Join(dir, "small-refund.json")
			if err := os.WriteFile(dst, small, 0o644); err != nil {
				t.Fatal(err)
			}
			var msgs []json.RawMessage
			_ = json.Unmarshal(small, &msgs)
			runs[dst] = msgs
		}
	}
	jsonl := filepath.Join(dir, "more.jsonl")
	if err := os.WriteFile(jsonl, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, l := range lines {
		var msgs []json.RawMessage
		_ = json.Unmarshal(l, &msgs)
		runs[fmt.Sprintf("%s:%d", jsonl, i+1)] = msgs
	}
	rule = filepath.Join(root, "refund_ceiling.rego")
	if err := os.WriteFile(rule, []byte(replayDenyRule), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, rule, runs
}

// changeKey is what identifies a change and both sides' account of it.
type changeKey struct {
	Run, Kind, ToolCallID, Tool, Transition string
	Message                                 int
	BaseReasons, CandReasons                string
}

func (k changeKey) String() string {
	return fmt.Sprintf("%s@%d %s %s/%s %s [%s | %s]", k.Run, k.Message, k.Kind, k.ToolCallID, k.Tool, k.Transition, k.BaseReasons, k.CandReasons)
}

// evalStep runs policycheck eval on a prefix written to a file.
func evalStep(t *testing.T, prefixFile string, policies []string) map[string]any {
	t.Helper()
	args := []string{"eval", "--registry", filepath.Join(examplesDir, "registry.yaml"), "--history", prefixFile,
		"--context", filepath.Join(examplesDir, "context", "support.json")}
	for _, p := range policies {
		args = append(args, "--policy", p)
	}
	code, out, errs := runCLI(args...)
	if code != 0 {
		t.Fatalf("eval %s: exit %d: %s", prefixFile, code, errs)
	}
	return decodeJSON(t, "eval", out)
}

func strList(v any) []string {
	var out []string
	for _, e := range v.([]any) {
		out = append(out, e.(string))
	}
	return out
}

func reasons(v any) string {
	if v == nil {
		return ""
	}
	return strings.Join(strList(v), "; ")
}

// TestReplayReportsExactlyWhatTheNewRuleChanges is issue 13's first
// "done means": with a candidate that adds one deny rule, replay reports
// exactly the calls that rule changes and nothing else. The expected set
// is built independently: policycheck eval on every prefix of every run,
// with each policy set.
func TestReplayReportsExactlyWhatTheNewRuleChanges(t *testing.T) {
	t.Parallel() // hundreds of in-process evals; slow, and independent of the other tests
	dir, rule, runs := replayCorpus(t)
	base := []string{filepath.Join(examplesDir, "policies")}
	cand := append(slices.Clone(base), rule)

	tmp := t.TempDir()
	want := map[string]changeKey{}
	steps := 0
	for name, msgs := range runs {
		for n := 1; n <= len(msgs); n++ {
			prefix, _ := json.Marshal(msgs[:n])
			pf := filepath.Join(tmp, fmt.Sprintf("prefix-%d.json", n))
			if err := os.WriteFile(pf, prefix, 0o644); err != nil {
				t.Fatal(err)
			}
			b, c := evalStep(t, pf, base), evalStep(t, pf, cand)
			steps++
			var kind struct {
				Kind string `json:"kind"`
			}
			_ = json.Unmarshal(msgs[n-1], &kind)
			if kind.Kind == "response" {
				bc, cc := b["calls"].([]any), c["calls"].([]any)
				for i := range bc {
					x, y := bc[i].(map[string]any), cc[i].(map[string]any)
					if x["verdict"] == y["verdict"] {
						continue
					}
					k := changeKey{Run: name, Message: n - 1, Kind: "call", ToolCallID: fmt.Sprint(x["tool_call_id"]), Tool: x["tool"].(string),
						Transition: fmt.Sprintf("%s->%s", x["verdict"], y["verdict"]), BaseReasons: reasons(x["reasons"]), CandReasons: reasons(y["reasons"])}
					want[k.String()] = k
				}
				continue
			}
			for _, field := range []string{"available", "advertised"} {
				if !reflect.DeepEqual(b[field], c[field]) {
					k := changeKey{Run: name, Message: n - 1, Kind: field, Transition: fmt.Sprint(b[field], "->", c[field])}
					want[k.String()] = k
				}
			}
		}
	}
	if len(want) < 2 {
		t.Fatalf("the oracle found %d changes: the corpus does not exercise the rule", len(want))
	}

	code, out, errs := runCLI("replay", "--registry", filepath.Join(examplesDir, "registry.yaml"),
		"--baseline", base[0], "--candidate", base[0], "--candidate", rule,
		"--context", filepath.Join(examplesDir, "context", "support.json"), "--format", "json", dir)
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, errs)
	}
	if errs != "" {
		t.Errorf("replay wrote to stderr though it is not a terminal: %q", errs)
	}
	var rep struct {
		Runs, Decisions int
		Transitions     map[string]int
		Changes         []struct {
			Run        string  `json:"run"`
			Message    int     `json:"message"`
			Kind       string  `json:"kind"`
			ToolCallID *string `json:"tool_call_id"`
			Tool       string  `json:"tool"`
			Transition string  `json:"transition"`
			Baseline   struct {
				Reasons []any `json:"reasons"`
			} `json:"baseline"`
			Candidate struct {
				Reasons []any `json:"reasons"`
			} `json:"candidate"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("replay --format json: %v\n%s", err, out)
	}
	if rep.Runs != len(runs) || rep.Decisions != steps {
		t.Errorf("replay decided %d runs, %d steps; want %d runs, %d steps", rep.Runs, rep.Decisions, len(runs), steps)
	}
	got := map[string]changeKey{}
	for _, c := range rep.Changes {
		id := "<nil>"
		if c.ToolCallID != nil {
			id = *c.ToolCallID
		}
		k := changeKey{Run: c.Run, Message: c.Message, Kind: c.Kind, ToolCallID: id, Tool: c.Tool, Transition: c.Transition}
		if c.Baseline.Reasons != nil {
			k.BaseReasons = reasons(c.Baseline.Reasons)
		}
		if c.Candidate.Reasons != nil {
			k.CandReasons = reasons(c.Candidate.Reasons)
		}
		got[k.String()] = k
	}
	if !reflect.DeepEqual(sortedKeys(got), sortedKeys(want)) {
		t.Fatalf("replay's changes differ from eval's:\n got  %s\n want %s", strings.Join(sortedKeys(got), "\n      "), strings.Join(sortedKeys(want), "\n      "))
	}
	for _, k := range got {
		if !strings.Contains(k.CandReasons, "refund_ceiling") {
			t.Errorf("change %s does not name the new rule", k)
		}
	}
	changed := 0
	for tr, n := range rep.Transitions {
		if from, to, _ := strings.Cut(tr, "->"); from != to {
			changed += n
		}
	}
	if changed != len(want) {
		t.Errorf("transition counts hold %d changed calls, want %d: %v", changed, len(want), rep.Transitions)
	}
}

func sortedKeys(m map[string]changeKey) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestReplayFailOnGates checks --fail-on: exit 1 when a named transition
// occurs, 0 when none does, 2 for a transition that names no state.
func TestReplayFailOnGates(t *testing.T) {
	dir, rule, _ := replayCorpus(t)
	pols := filepath.Join(examplesDir, "policies")
	args := func(extra ...string) []string {
		return append([]string{"replay", "--registry", filepath.Join(examplesDir, "registry.yaml"), "--baseline", pols,
			"--candidate", pols, "--candidate", rule, "--context", filepath.Join(examplesDir, "context", "support.json"), dir}, extra...)
	}
	for _, c := range []struct {
		failOn []string
		code   int
		stderr string
	}{
		{nil, 0, ""},
		{[]string{"--fail-on", "execute->denied"}, 1, "--fail-on matched: execute->denied (3)"},
		{[]string{"--fail-on", "denied->execute,*->fail_closed"}, 0, ""},
		{[]string{"--fail-on", "denied->execute", "--fail-on", "*->denied"}, 1, "*->denied (3)"},
		{[]string{"--fail-on", "*->*"}, 1, "*->* (3)"},
		{[]string{"--fail-on", "available->unavailable,unadvertised->advertised"}, 0, ""},
		{[]string{"--fail-on", "execute->available"}, 2, "not states of one kind"},
		{[]string{"--fail-on", "denied"}, 2, "want FROM->TO"},
		{[]string{"--workers", "-3"}, 2, "--workers must be 0 (one per core) or more, not -3"},
	} {
		code, out, errs := runCLI(args(c.failOn...)...)
		if code != c.code || !strings.Contains(errs, c.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.failOn, code, errs, c.code, c.stderr)
		}
		if c.code != 2 && !strings.Contains(out, "3 changes") {
			t.Errorf("%v: the report is missing or wrong:\n%s", c.failOn, out)
		}
	}
	// The reverse change: the candidate drops the rule.
	code, _, errs := runCLI("replay", "--registry", filepath.Join(examplesDir, "registry.yaml"), "--baseline", pols, "--baseline", rule,
		"--candidate", pols, "--context", filepath.Join(examplesDir, "context", "support.json"), "--fail-on", "denied->execute", dir)
	if code != 1 || !strings.Contains(errs, "denied->execute (3)") {
		t.Errorf("reverse: exit %d, %q", code, errs)
	}
}

// TestReplayRefusesBadInput: a bad history in a JSON Lines file is
// refused with its file, line and JSON pointer, exit 2, and no report.
func TestReplayRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	good := `[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}]`
	bad := `[{"kind":"request","parts":[{"part_kind":"tool-call","tool_name":"x","args":{},"tool_call_id":"c"}]}]`
	if err := os.WriteFile(filepath.Join(dir, "runs.jsonl"), []byte(good+"\n"+bad+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("replay", "--registry", filepath.Join(examplesDir, "registry.yaml"), "--candidate", filepath.Join(examplesDir, "policies"), dir)
	if code != 2 || out != "" || !strings.Contains(errs, "runs.jsonl:2: /0/parts/0/part_kind") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	event := `{"decision_id":"d1","path":"policycheck/availability/decision","input":{"context":{},"messages":1}}`
	if err := os.WriteFile(filepath.Join(dir, "runs.jsonl"), []byte(event+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCLI("replay", "--registry", filepath.Join(examplesDir, "registry.yaml"), "--candidate", filepath.Join(examplesDir, "policies"), dir)
	if code != 2 || !strings.Contains(errs, "runs.jsonl:1: /input: input document /facts") {
		t.Errorf("old event: exit %d, stderr %q", code, errs)
	}

	// serve's text log: a decision record whose input is Go's map[...]
	// notation (a serve that did not write it as JSON), and a record cut
	// in the middle of a quoted value, are refused with their line; the
	// records that are not decisions are skipped.
	for _, tc := range []struct{ log, want string }{
		{"time=2026-01-01T00:00:00Z level=INFO msg=\"policycheck serving\" addr=127.0.0.1:8181\n" +
			"time=2026-01-01T00:00:01Z level=INFO msg=\"Decision Log\" decision_id=d1 input=\"map[context:map[] messages:1]\" path=policycheck/availability/decision\n",
			"serve.log:2: (root): invalid decision-log event"},
		{"time=2026-01-01T00:00:00Z level=INFO msg=\"Decision Log\" decision_id=d1 input=\"{\\\"messages\n",
			"serve.log:1: (root): a record of serve's text log: the value of input is not a quoted string"},
	} {
		if err := os.WriteFile(filepath.Join(dir, "runs.jsonl"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "serve.log"), []byte(tc.log), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errs = runCLI("replay", "--registry", filepath.Join(examplesDir, "registry.yaml"), "--candidate", filepath.Join(examplesDir, "policies"), dir)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("text log: exit %d, stderr %q, want %q", code, errs, tc.want)
		}
	}
}

// TestReplayDocExample runs the command docs/replay.md shows, from the
// module root as the doc does, and compares its output with the doc's.
func TestReplayDocExample(t *testing.T) {
	// A policy set's revision is a digest of its files, shipped policies
	// included: it changes with every policy edit, so it is compared as
	// a digest only.
	revision := regexp.MustCompile(`\(revision [0-9a-f]+\)`)
	examples := 0
	for _, ex := range replayDocExamples(t, "```console\n") {
		cmdline, want := ex.cmdline, ex.want
		examples++
		code, out, errs := runCLI(strings.Fields(cmdline)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", cmdline, code, errs)
		}
		want = revision.ReplaceAllString(want, "(revision <digest>)")
		if got := revision.ReplaceAllString(out, "(revision <digest>)"); got != want {
			t.Errorf("docs/replay.md shows:\n%s\n%s prints:\n%s", want, cmdline, got)
		}
	}
	if examples < 2 {
		t.Fatalf("docs/replay.md shows %d console examples, want the report's and the registry change's", examples)
	}
}

// replayDocExample is a command docs/replay.md shows: its arguments
// after "policycheck" and the output the doc shows.
type replayDocExample struct{ cmdline, want string }

// replayDocExamples moves to the module root, as docs/replay.md's commands
// are run from there, and returns the doc's `policycheck` commands in
// blocks that open with fence ("```console\n", "```console exit=1\n").
func replayDocExamples(t *testing.T, fence string) []replayDocExample {
	t.Helper()
	root := filepath.Dir(examplesDir)
	raw, err := os.ReadFile(filepath.Join(root, "docs", "replay.md"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	var out []replayDocExample
	rest := string(raw)
	for {
		var block string
		var ok bool
		if _, rest, ok = strings.Cut(rest, fence+"$ policycheck "); !ok {
			return out
		}
		block, rest, _ = strings.Cut(rest, "```\n")
		cmdline, want, _ := strings.Cut(block, "\n")
		out = append(out, replayDocExample{cmdline, want})
	}
}

// TestReplayRegistryChange: --candidate-registry replays a registry
// change on histories (the candidate keeps the baseline's policies
// unless --candidate says otherwise), names both registries in the
// report, gates on what the change lets through, and refuses logged
// decisions, whose facts were derived with the registry they were
// decided with.
func TestReplayRegistryChange(t *testing.T) {
	reg := filepath.Join(examplesDir, "registry.yaml")
	vaultOn := filepath.Join(examplesDir, "registries", "vault-always-on.yaml")
	pols := filepath.Join(examplesDir, "policies")
	admin := filepath.Join(examplesDir, "context", "admin.json")
	histories := filepath.Join(examplesDir, "histories")
	base := []string{"replay", "--registry", reg, "--candidate-registry", vaultOn, "--baseline", pols, "--context", admin}

	code, out, errs := runCLI(append(slices.Clone(base), "--format", "json", histories)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Baseline, Candidate struct {
			Policies         []string
			Registry         string
			RegistryRevision string `json:"registry_revision"`
		}
		RegistryChanges []string `json:"registry_changes"`
		Transitions     map[string]int
		Changes         []struct{ Kind, Tool, Transition string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Baseline.Registry != reg || rep.Candidate.Registry != vaultOn || rep.Baseline.RegistryRevision == rep.Candidate.RegistryRevision {
		t.Errorf("the sides' registries: %+v, %+v", rep.Baseline, rep.Candidate)
	}
	if !slices.Equal(rep.RegistryChanges, []string{"capability vault: defer_loading true -> false"}) {
		t.Errorf("registry changes: %q", rep.RegistryChanges)
	}
	if !slices.Equal(rep.Candidate.Policies, []string{pols}) {
		t.Errorf("without --candidate the candidate keeps the baseline's policies, not %v", rep.Candidate.Policies)
	}
	if rep.Transitions["not_available_yet->execute"] != 1 {
		t.Errorf("transitions: %v", rep.Transitions)
	}
	gained := map[string]bool{}
	for _, c := range rep.Changes {
		if c.Kind == "available" && c.Transition == "unavailable->available" {
			gained[c.Tool] = true
		}
	}
	if len(gained) != 2 || !gained["secret_op"] || !gained["rotate_key"] {
		t.Errorf("tools the vault's change makes available: %v", gained)
	}

	code, out, errs = runCLI(append(slices.Clone(base), "--format", "html", histories)...)
	if code != 0 || !strings.Contains(out, "registry <code>"+reg+"</code>") || !strings.Contains(out, "registry <code>"+vaultOn+"</code>") ||
		!strings.Contains(out, "<th>registry changes</th><td>capability vault: defer_loading true -&gt; false</td>") {
		t.Errorf("the HTML report names both registries: exit %d, stderr %q", code, errs)
	}
	// The same replay with the candidate's policies named, and gated.
	code, _, errs = runCLI(append(slices.Clone(base), "--candidate", pols, "--fail-on", "not_available_yet->execute", histories)...)
	if code != 1 || !strings.Contains(errs, "not_available_yet->execute (1)") {
		t.Errorf("gated: exit %d, stderr %q", code, errs)
	}
	// Support users are out of the vault's scope: nothing changes for them.
	code, out, _ = runCLI("replay", "--registry", reg, "--candidate-registry", vaultOn, "--baseline", pols,
		"--context", filepath.Join(examplesDir, "context", "support.json"), histories)
	if code != 0 || !strings.Contains(out, "\n0 changes\n") {
		t.Errorf("support: exit %d:\n%s", code, out)
	}

	// A logged decision among the inputs is refused, before any report.
	dir := t.TempDir()
	logged := loggedDecision(t, dir, reg, filepath.Join(histories, "vault-rotate.json"), 1)
	code, out, errs = runCLI("replay", "--registry", reg, "--candidate-registry", vaultOn, "--baseline", pols, logged, histories)
	if code != 2 || out != "" || !strings.Contains(errs, "a logged decision keeps the facts derived with the registry it was decided with") {
		t.Errorf("a logged decision: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// The same registry as the candidate's is no change: logs replay.
	if code, _, errs := runCLI("replay", "--registry", reg, "--candidate-registry", reg, "--baseline", pols, logged); code != 0 {
		t.Errorf("the same registry: exit %d, stderr %q", code, errs)
	}
	// A candidate registry that does not load is refused with its file.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("tools:\n  - capability: nowhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(append(slices.Clone(base[:3]), "--candidate-registry", bad, "--baseline", pols, histories)...); code != 2 || !strings.Contains(errs, "bad.yaml") {
		t.Errorf("a bad candidate registry: exit %d, stderr %q", code, errs)
	}
}

// replayLogOnlyRule is replayDenyRule marked log-only, with a hide.
const replayLogOnlyRule = `# METADATA
# title: Refund ceiling, observed
# description: Log-only while we watch what it would do.
# custom:
#   policycheck:
#     enforcement: log_only
package policycheck.rules.refund_watch

# METADATA
# title: deny
# description: Would deny refunds above 40.
deny contains {"reason": "refund above 40", "message": "Refunds above 40 need a supervisor."} if {
	input.call.tool == "issue_refund"
	input.call.args.amount > 40
}

# METADATA
# title: hide
# description: Would hide get_order.
hide contains "get_order"
`

// TestLogOnlyRuleInEvalExplainReplay: a log-only rule changes no verdict
// and shows in eval (would_deny, would_hide), explain ("would deny",
// "would hide") and replay (would_deny and would_hide changes, no verdict
// transition).
func TestLogOnlyRuleInEvalExplainReplay(t *testing.T) {
	dir, _, _ := replayCorpus(t)
	rule := filepath.Join(t.TempDir(), "refund_watch.rego")
	if err := os.WriteFile(rule, []byte(replayLogOnlyRule), 0o644); err != nil {
		t.Fatal(err)
	}
	pols := filepath.Join(examplesDir, "policies")
	ctxFile := filepath.Join(examplesDir, "context", "support.json")
	hist := filepath.Join(examplesDir, "histories", "refund-after-lookup.json")
	common := []string{"--registry", filepath.Join(examplesDir, "registry.yaml"), "--history", hist, "--context", ctxFile, "--policy", pols}

	_, plain, _ := runCLI(append([]string{"eval"}, common...)...)
	code, out, errs := runCLI(append([]string{"eval"}, append(common, "--policy", rule)...)...)
	if code != 0 {
		t.Fatalf("eval: %d %s", code, errs)
	}
	d := decodeJSON(t, "eval", out)
	p := decodeJSON(t, "eval", plain)
	calls := d["calls"].([]any)
	refund := calls[0].(map[string]any)
	if refund["verdict"] != "execute" || !strings.Contains(fmt.Sprint(refund["would_deny"]), "would be denied by policycheck.rules.refund_watch") {
		t.Errorf("eval's call: %v", refund)
	}
	if fmt.Sprint(d["would_hide"]) != "[get_order]" {
		t.Errorf("eval's would_hide: %v", d["would_hide"])
	}
	for _, k := range []string{"available", "advertised", "dispatch"} {
		if !reflect.DeepEqual(d[k], p[k]) {
			t.Errorf("the log-only rule changed %s: %v, want %v", k, d[k], p[k])
		}
	}
	code, out, _ = runCLI(append([]string{"explain"}, append(common, "--policy", rule)...)...)
	if code != 0 || !strings.Contains(out, "would deny (log-only rule, not enforced): would be denied by policycheck.rules.refund_watch") ||
		!strings.Contains(out, "would hide (log-only rule, not enforced)") {
		t.Errorf("explain: %d\n%s", code, out)
	}

	code, out, errs = runCLI("replay", "--registry", filepath.Join(examplesDir, "registry.yaml"), "--baseline", pols,
		"--candidate", pols, "--candidate", rule, "--context", ctxFile, "--format", "json", "--fail-on", "*->would_deny", dir)
	if code != 1 || !strings.Contains(errs, "*->would_deny (3)") {
		t.Fatalf("replay: exit %d, %s", code, errs)
	}
	var rep struct {
		Transitions map[string]int
		WouldDeny   struct{ Baseline, Candidate int } `json:"would_deny"`
		WouldHide   struct{ Gained, Lost int }        `json:"would_hide"`
		Changes     []struct{ Kind, Transition string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for tr := range rep.Transitions {
		if from, to, _ := strings.Cut(tr, "->"); from != to {
			t.Errorf("a log-only rule changed a verdict: %s", tr)
		}
	}
	kinds := map[string]int{}
	for _, c := range rep.Changes {
		kinds[c.Kind]++
	}
	if rep.WouldDeny.Candidate != 3 || rep.WouldDeny.Baseline != 0 || rep.WouldHide.Gained == 0 ||
		kinds["would_deny"] != 3 || kinds["would_hide"] != rep.WouldHide.Gained || len(kinds) != 2 {
		t.Errorf("replay: would_deny %+v, would_hide %+v, changes by kind %v", rep.WouldDeny, rep.WouldHide, kinds)
	}
}

// loggedDecision writes dir/log.jsonl, one decision-log event of the
// history's decision over messages messages (its input document as
// policycheck facts --format input gives it), and returns its path.
func loggedDecision(t *testing.T, dir, reg, history string, messages int) string {
	t.Helper()
	code, input, errs := runCLI("facts", "--registry", reg, "--history", history, "--format", "input")
	if code != 0 {
		t.Fatalf("facts: exit %d: %s", code, errs)
	}
	var in map[string]any
	if err := json.Unmarshal([]byte(input), &in); err != nil {
		t.Fatal(err)
	}
	in["messages"] = messages
	event, err := json.Marshal(map[string]any{"decision_id": "d1", "path": "policycheck/availability/decision", "input": in})
	if err != nil {
		t.Fatal(err)
	}
	logged := filepath.Join(dir, "log.jsonl")
	if err := os.WriteFile(logged, append(event, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return logged
}

// TestReplayRefusesFlagsNothingReads: --context and --approvals apply to
// history runs; given only logged decisions (which keep theirs) they are
// refused, exit 2, rather than ignored. With a history among the inputs
// they are read.
func TestReplayRefusesFlagsNothingReads(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(examplesDir, "registry.yaml")
	history := filepath.Join(examplesDir, "histories", "refund-after-lookup.json")
	logged := loggedDecision(t, dir, reg, history, 4)
	approvals := filepath.Join(dir, "approvals.json")
	if err := os.WriteFile(approvals, []byte(`{"approvals": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctxFile := filepath.Join(examplesDir, "context", "support.json")
	pols := filepath.Join(examplesDir, "policies")
	base := []string{"replay", "--registry", reg, "--baseline", pols, "--candidate", pols}
	for _, c := range []struct{ flag, file string }{{"--approvals", approvals}, {"--context", ctxFile}} {
		code, out, errs := runCLI(append(slices.Clone(base), c.flag, c.file, logged)...)
		if code != 2 || out != "" || !strings.Contains(errs, c.flag+" applies to history runs") {
			t.Errorf("%s with logged decisions only: exit %d, stdout %q, stderr %q", c.flag, code, out, errs)
		}
		code, _, errs = runCLI(append(slices.Clone(base), c.flag, c.file, logged, history)...)
		if code != 0 {
			t.Errorf("%s with a history among the inputs: exit %d, stderr %q", c.flag, code, errs)
		}
	}
	if code, _, errs := runCLI(append(slices.Clone(base), logged)...); code != 0 {
		t.Errorf("logged decisions alone: exit %d, stderr %q", code, errs)
	}
}

// TestReplayNeedsACandidate: without --candidate (or --candidate-registry)
// the candidate would be the shipped defaults alone; replay refuses
// rather than compare against them silently. -f is --format, as in the
// other commands.
func TestReplayNeedsACandidate(t *testing.T) {
	reg := filepath.Join(examplesDir, "registry.yaml")
	pols := filepath.Join(examplesDir, "policies")
	history := filepath.Join(examplesDir, "histories", "refund.json")
	code, out, errs := runCLI("replay", "--registry", reg, "--baseline", pols, history)
	if code != 2 || out != "" || !strings.Contains(errs, "replay needs --candidate") {
		t.Errorf("without --candidate: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = runCLI("replay", "--registry", reg, "--baseline", pols, "--candidate", pols, "-f", "json", history)
	if code != 0 || !json.Valid([]byte(out)) {
		t.Errorf("-f json: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestUsageNamesApprovals: explain's usage line lists --approvals, and
// serve's help gives approvals in the bodies of the endpoints that read
// them.
func TestUsageNamesApprovals(t *testing.T) {
	code, out, errs := runCLI("explain", "--help")
	if code != 0 || !strings.Contains(out, "explain --registry R --history H [--context C] [--approvals A]") {
		t.Errorf("explain --help: exit %d, stderr %q, usage:\n%s", code, errs, out)
	}
	code, out, errs = runCLI("serve", "--help")
	if code != 0 || !strings.Contains(out, `POST /v1/decide            {"registry"?, "history", "context"?, "approvals"?}`) ||
		!strings.Contains(out, `{"offset", "messages", "generation"?, "context"?, "registry"?, "approvals"?}`) {
		t.Errorf("serve --help: exit %d, stderr %q, help:\n%s", code, errs, out)
	}
}
