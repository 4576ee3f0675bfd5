package runner_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/conformance/runner"
)

// TestConformance runs every shared conformance case through the engine.
func TestConformance(t *testing.T) {
	ctx := context.Background()
	for _, c := range conformance.Cases(t) {
		t.Run(filepath.Base(c.File), func(t *testing.T) {
			res, err := runner.Run(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range res.Failures {
				t.Error(f)
			}
		})
	}
}
