//go:build !unix

package cputime

import "time"

// Process cannot read the process CPU time on this platform.
func Process() (time.Duration, bool) { return 0, false }
