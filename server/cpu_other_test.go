//go:build !unix

package server_test

import "time"

// processCPU is unknown here.
func processCPU() time.Duration { return 0 }
