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

// WithCgroupRoot returns ctx under which gateway --memory-limit auto
// reads /proc/self and the cgroup files below root (a fake tree).
func WithCgroupRoot(ctx context.Context, root string) context.Context {
	return withCgroupRoot(ctx, root)
}
