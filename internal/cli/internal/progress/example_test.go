package progress_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/policycheck/policycheck/internal/cli/internal/progress"
)

func Example() {
	// A fixed clock makes the example's output stable; real callers use
	// progress.Stderr(label, total), which draws only on a terminal.
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	var screen strings.Builder
	r := progress.New(progress.Options{
		Label:    "conformance",
		Total:    120,
		Writer:   &screen,
		Terminal: true,
		Now:      func() time.Time { return now },
	})
	now = start.Add(3 * time.Second)
	r.Add(30)
	fmt.Println(r.Line(now))
	r.Finish()
	// Output: conformance: 30/120 (25%), 10.0/s, ETA 9s
}
