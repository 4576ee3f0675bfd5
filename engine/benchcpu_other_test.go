//go:build !unix

package engine_test

import "time"

// processCPU cannot read the process CPU time on this platform.
func processCPU() (time.Duration, bool) { return 0, false }
