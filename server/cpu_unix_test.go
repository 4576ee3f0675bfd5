//go:build unix

package server_test

import (
	"syscall"
	"time"
)

// processCPU returns the user and system CPU time of this process (0 where
// unknown).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
