package cli

import (
	"context"
	"io"
)

// RunContext is Run under ctx: a test carries faults in it
// (internal/ground/faults).
func RunContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(ctx, args, stdin, stdout, stderr)
}
