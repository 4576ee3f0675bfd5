package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/policycheck/policycheck/internal/spectable"
)

// TestSpecTablesThroughEval runs every case of the rule-by-rule fact
// tables (facts/testdata/spec) through `policycheck eval`: the window,
// facts and dispatch facts it prints must be the ones the table states,
// which facts' TestSpecTables checks Derive and the Tracker against.
func TestSpecTablesThroughEval(t *testing.T) {
	cases, err := spectable.Load()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.Title(), func(t *testing.T) {
			hist := writeFile(t, dir, fmt.Sprintf("history-%d.json", i), string(c.History))
			res := run(t, "", "eval", "--registry", spectable.RegistryFile(), "--history", hist)
			if res.code != 0 {
				t.Fatalf("eval exited %d: %s", res.code, res.stderr)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
				t.Fatalf("eval printed no JSON: %v\n%s", err, res.stdout)
			}
			if errs, ok := got["errors"]; ok {
				t.Fatalf("the decision failed closed: %v", errs)
			}
			want, err := spectable.Normalize(c.Want)
			if err != nil {
				t.Fatal(err)
			}
			if diff := spectable.Mismatches(want, got); len(diff) > 0 {
				t.Errorf("eval disagrees with %s (%s):\n%s", c.Rule, c.Name, strings.Join(diff, "\n"))
			}
		})
	}
}
