package cli_test

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// update rewrites the golden files from the current output:
//
//	go test ./internal/cli -run TestGoldenOutput -update
//
// Review the diff before committing it: a golden file changes only with
// an intended change of the output.
var update = flag.Bool("update", false, "rewrite testdata/golden/* from the current output")

// TestGoldenOutput holds every format of eval, explain, facts and replay
// on the shipped examples to the bytes in testdata/golden, one file per
// command and format (its extension is the format). The outputs name the
// examples by their paths relative to this package, and their revisions
// follow the example policies: a change there is an -update away.
func TestGoldenOutput(t *testing.T) {
	const ex = "../../examples/"
	in := func(history string, more ...string) []string {
		return append([]string{"--registry", ex + "registry.yaml", "--policy", ex + "policies",
			"--context", ex + "context/support.json", "--history", ex + "histories/" + history}, more...)
	}
	// A policy that errs: the decision fails closed.
	failing := filepath.Join("testdata", "policy_failclosed", "docs.rego")
	// The README's approvals example: the transfers policy alone.
	transfer := func(cmd string, more ...string) []string {
		return append([]string{cmd, "--registry", ex + "registry.yaml", "--history", ex + "histories/transfer.json",
			"--policy", ex + "policies/transfers"}, more...)
	}
	replay := []string{"replay", "--registry", ex + "registry.yaml", "--baseline", ex + "policies",
		"--candidate", ex + "policies", "--candidate", ex + "candidate", "--context", ex + "context/support.json", ex + "histories"}
	cases := []struct {
		golden string
		args   []string
		code   int
	}{
		{"eval-refund.json", append([]string{"eval"}, in("refund.json")...), 0},
		{"eval-refund.pretty", append([]string{"eval"}, in("refund.json", "--format", "pretty")...), 0},
		{"eval-transfer.json", transfer("eval"), 0},
		{"eval-transfer.pretty", transfer("eval", "--format", "pretty"), 0},
		{"eval-transfer-approvals.json", transfer("eval", "--approvals", ex+"approvals/transfer.json"), 0},
		{"eval-failclosed.pretty", append([]string{"eval"}, in("refund.json", "--policy", failing, "--format", "pretty")...), 0},
		{"explain-failclosed.json", append([]string{"explain"}, in("refund.json", "--policy", failing, "--format", "json")...), 0},
		{"explain-refund.pretty", append([]string{"explain"}, in("refund.json")...), 0},
		{"explain-refund.json", append([]string{"explain"}, in("refund.json", "--format", "json")...), 0},
		{"explain-refund.html", append([]string{"explain"}, in("refund.json", "--format", "html")...), 0},
		{"explain-after-compaction.pretty", append([]string{"explain"}, in("after-compaction.json")...), 0},
		{"explain-after-compaction.html", append([]string{"explain"}, in("after-compaction.json", "--format", "html")...), 0},
		{"explain-transfer.pretty", transfer("explain"), 0},
		{"explain-transfer.json", transfer("explain", "--format", "json"), 0},
		{"explain-transfer-approvals.pretty", transfer("explain", "--approvals", ex+"approvals/transfer.json"), 0},
		{"facts-refund.json", append([]string{"facts"}, in("refund.json")...), 0},
		{"facts-after-compaction.json", append([]string{"facts"}, in("after-compaction.json")...), 0},
		{"facts-refund.input.json", append([]string{"facts"}, in("refund.json", "--format", "input")...), 0},
		{"replay-histories.pretty", replay, 0},
		{"replay-histories.json", append(replay[:len(replay):len(replay)], "--format", "json"), 0},
		{"replay-histories.html", append(replay[:len(replay):len(replay)], "--format", "html"), 0},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			res := run(t, "", c.args...)
			if res.code != c.code {
				t.Fatalf("policycheck %s: exit %d, want %d\n%s", strings.Join(c.args, " "), res.code, c.code, res.stderr)
			}
			path := filepath.Join("testdata", "golden", c.golden)
			if *update {
				if err := os.WriteFile(path, []byte(res.stdout), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if res.stdout != string(want) {
				t.Errorf("policycheck %s differs from %s (-update rewrites it; review the diff):\n%s",
					strings.Join(c.args, " "), path, firstDifference(string(want), res.stdout))
			}
		})
	}
}

// firstDifference shows the first line where got departs from want.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n want " + strconv.Quote(wl) + "\n  got " + strconv.Quote(gl)
		}
	}
	return "(same lines)"
}
