package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/policycheck/policycheck/internal/conformance"
)

// hostile are strings a history, a policy or a file name can carry that
// a terminal acts on: erase the line, return to its start, hide what
// follows, start a new (fake) line, reverse the text, ring, a C1 CSI.
var hostile = []struct{ note, s, shown string }{
	{"erase line", "\x1b[2K", `\x1b[2K`},
	{"carriage return", "x\rc0 get_time -> execute", `x\rc0 get_time -> execute`},
	{"conceal", "\x1b[8m", `\x1b[8m`},
	{"new line", "x\n  c0 get_time -> execute", `x\n  c0 get_time -> execute`},
	{"bidi override", "a\u202eb", `a\u202eb`},
	{"bell", "a\x07", `a\x07`},
	{"C1 CSI", "a\u009b2K", `a\x9b2K`},
	{"tab", "a\tb", `a\tb`},
}

// requireTerminalSafe fails when out holds a character a terminal would
// act on other than the line feeds that end its lines.
func requireTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: output is not UTF-8:\n%q", what, out)
	}
	for i, r := range out {
		if r != '\n' && !unicode.IsPrint(r) {
			t.Errorf("%s: %U reaches the terminal at byte %d:\n%q", what, r, i, out)
			return
		}
	}
}

// TestPrettyOutputEscapesInput: in every format meant for people (eval
// --format pretty, explain, replay --format pretty, check), a string that
// came from input (a tool_call_id, a tool name, a policy's message and
// reason, a run's name, a policy file's name) is printed escaped, as the
// model-facing messages quote names: nothing in it can move the cursor,
// erase or hide the verdict line, or add a line of its own.
func TestPrettyOutputEscapesInput(t *testing.T) {
	reg := filepath.Join("testdata", "registry.yaml")
	for _, h := range hostile {
		t.Run(h.note, func(t *testing.T) {
			dir := t.TempDir()
			lit, err := json.Marshal(h.s)
			if err != nil {
				t.Fatal(err)
			}
			call := func(name, id string) string {
				return `{"part_kind":"tool-call","tool_name":` + name + `,"tool_call_id":` + id + `,"args":{}}`
			}
			history := writeFile(t, dir, "history.json", hist(req(userPrompt),
				resp(call(`"get_time"`, string(lit)), call(string(lit), `"c2"`))))
			rule := writeFile(t, dir, "deny.rego", `package policycheck.rules.hostile

deny contains {"reason": `+string(lit)+`, "message": `+string(lit)+`} if input.call.tool == "get_time"
`)
			// get_time is denied with the hostile message; the hostile
			// name is an unknown tool.
			for _, args := range [][]string{
				{"eval", "--format", "pretty"},
				{"explain"},
				{"explain", "--format", "text"},
			} {
				args = append(args, "--registry", reg, "--history", history, "--policy", rule)
				code, out, errs := runCLI(args...)
				what := strings.Join(args[:len(args)-6], " ")
				if code != 0 {
					t.Fatalf("%s: exit %d: %s", what, code, errs)
				}
				requireTerminalSafe(t, what, out)
				for _, line := range []string{
					"  " + h.shown + " get_time -> denied\n",
					"  c2 " + h.shown + " -> unknown_tool\n",
					"      model is told: " + h.shown + "\n",
				} {
					if !strings.Contains(out, line) {
						t.Errorf("%s: no line %q in\n%s", what, line, out)
					}
				}
			}
			code, _, errs := runCLI("eval", "--registry", reg, "--history", history, "--policy", rule, "--fail-on-refusal")
			requireTerminalSafe(t, "eval --fail-on-refusal's error", errs)
			if code != 3 {
				t.Errorf("eval --fail-on-refusal: exit %d: %s", code, errs)
			}

			// replay: the candidate denies the call the baseline executes;
			// the run is named by its file, whose name is hostile too.
			runs := t.TempDir()
			writeFile(t, runs, "run"+h.s+".json", hist(req(userPrompt), resp(call(`"get_time"`, string(lit)))))
			code, out, errs := runCLI("replay", "--registry", reg, "--baseline", t.TempDir(), "--candidate", rule, runs)
			if code != 0 {
				t.Fatalf("replay: exit %d: %s", code, errs)
			}
			requireTerminalSafe(t, "replay", out)
			for _, line := range []string{
				"call " + h.shown + " get_time: execute -> denied\n",
				"deny.rego:3:1): " + h.shown + "\n",
				"             message: " + h.shown + "\n",
				"run" + h.shown + ".json  message 1",
			} {
				if !strings.Contains(out, line) {
					t.Errorf("replay: no %q in\n%s", line, out)
				}
			}

			// An error names the file it could not read: escaped too
			// (errors of several lines, OPA's, keep their line feeds and
			// the tabs that indent their source).
			keep := strings.NewReplacer("\n", "", "\t", "")
			missing := filepath.Join(dir, "gone"+keep.Replace(h.s)+".json")
			code, _, errs = runCLI("eval", "--registry", reg, "--history", missing)
			requireTerminalSafe(t, "eval's error", errs)
			if shown := strings.NewReplacer(`\n`, "", `\t`, "").Replace(h.shown); code != 2 || !strings.Contains(errs, "gone"+shown+".json") {
				t.Errorf("eval with a missing history: exit %d, stderr %q", code, errs)
			}

			// check: a policy file named with the string, and broken.
			broken := writeFile(t, t.TempDir(), "p"+h.s+".rego", "package policycheck.rules.x\n\ndeny contains {\n")
			code, out, _ = runCLI("check", broken)
			if code != 2 {
				t.Errorf("check: exit %d:\n%s", code, out)
			}
			requireTerminalSafe(t, "check", out)
			if !strings.Contains(out, "p"+h.shown+".rego:") {
				t.Errorf("check: the file is not named escaped in\n%s", out)
			}
		})
	}
}

// TestJSONOutputsDoNotEscapeHTML: every JSON output (eval, explain,
// facts, replay) writes <, > and & as themselves, as internal/ground/jsonout
// writes JSON and as the sidecar answers: one string reads the same in
// every output and in every part of one (explain's decision and its
// calls), and replay's transitions read "execute->denied". JSON is not
// HTML; the HTML formats escape for HTML.
func TestJSONOutputsDoNotEscapeHTML(t *testing.T) {
	const id = "c<1>&"
	reg := filepath.Join("testdata", "registry.yaml")
	dir := t.TempDir()
	call := `{"part_kind":"tool-call","tool_name":"get_time","tool_call_id":"` + id + `","args":{}}`
	history := writeFile(t, dir, "history.json", hist(req(userPrompt), resp(call)))
	rule := writeFile(t, dir, "deny.rego", "package policycheck.rules.html\n\n"+
		`deny contains {"reason": "a <b> & c", "message": "no <b>"} if input.call.tool == "get_time"`+"\n")
	runs := t.TempDir()
	writeFile(t, runs, "run<1>.json", hist(req(userPrompt), resp(call)))
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"eval", "--registry", reg, "--history", history, "--policy", rule},
			[]string{`"tool_call_id": "` + id + `"`, `"message": "no <b>"`}},
		{[]string{"explain", "--format", "json", "--registry", reg, "--history", history, "--policy", rule},
			[]string{`"tool_call_id": "` + id + `"`, `"message": "no <b>"`}},
		{[]string{"facts", "--registry", reg, "--history", history}, nil},
		{[]string{"facts", "--format", "input", "--registry", reg, "--history", history},
			[]string{`"tool_call_id": "` + id + `"`}},
		{[]string{"replay", "--format", "json", "--registry", reg, "--baseline", t.TempDir(), "--candidate", rule, runs},
			[]string{`"execute->denied": 1`, `"tool_call_id": "` + id + `"`, `run<1>.json"`, `a <b> & c`}},
	} {
		what := strings.Join(tc.args[:3], " ")
		code, out, errs := runCLI(tc.args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", what, code, errs)
		}
		if strings.Contains(out, `\u003c`) || strings.Contains(out, `\u003e`) || strings.Contains(out, `\u0026`) {
			t.Errorf("%s escapes HTML characters:\n%s", what, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: no %q in\n%s", what, w, out)
			}
		}
	}
}

// TestConformanceOutputEscapesInput: conformance's pretty lines name each
// case by its file, which is input too: escaped as every pretty output
// escapes.
func TestConformanceOutputEscapesInput(t *testing.T) {
	shared, err := conformance.SharedDir()
	if err != nil {
		t.Skip(err)
	}
	matches, err := filepath.Glob(filepath.Join(shared, "conformance", "cases", "*.json"))
	if err != nil || len(matches) == 0 {
		t.Fatalf("no conformance cases in %s: %v", shared, err)
	}
	raw, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	// An expectation that cannot hold: the case fails, and is named.
	c["expect"].(map[string]any)["window"] = map[string]any{"message": 99, "part": 0}
	broken, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hostile {
		dir := t.TempDir()
		writeFile(t, dir, "case"+h.s+".json", string(broken))
		code, out, errs := runCLI("conformance", dir)
		if code != 1 {
			t.Fatalf("%s: exit %d: %s\n%s", h.note, code, errs, out)
		}
		requireTerminalSafe(t, "conformance ("+h.note+")", out)
		if !strings.Contains(out, "FAIL case"+h.shown+".json\n") {
			t.Errorf("%s: the case is not named escaped in\n%s", h.note, out)
		}
	}
}

// TestPrettyArgumentsAreJSON: the arguments explain shows an approver
// (and an execute's) are the call's JSON, written as every JSON output
// writes it: "<" and "&" as themselves, then escaped for the terminal
// like any input string.
func TestPrettyArgumentsAreJSON(t *testing.T) {
	const ex = "../../examples/"
	raw, err := os.ReadFile(ex + "histories/transfer.json")
	if err != nil {
		t.Fatal(err)
	}
	history := writeFile(t, t.TempDir(), "transfer.json", strings.ReplaceAll(string(raw), `"savings"`, `"sav<ings>&\u001b"`))
	code, out, errs := runCLI("explain", "--registry", ex+"registry.yaml", "--history", history, "--policy", ex+"policies/transfers")
	if code != 0 {
		t.Fatalf("explain: exit %d: %s", code, errs)
	}
	requireTerminalSafe(t, "explain", out)
	if want := `      arguments: {"amount":5000,"from":"ops","to":"sav<ings>&\u001b"}` + "\n"; !strings.Contains(out, want) {
		t.Errorf("no %q in\n%s", want, out)
	}
}
