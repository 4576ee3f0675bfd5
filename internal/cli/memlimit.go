package cli

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// minMemoryLimit is the smallest --memory-limit taken: below it the
// compiled policies and a few sessions alone would keep the collector
// running all the time.
const minMemoryLimit = 64 << 20

// memoryLimitFlag is --memory-limit: the garbage collector runs as the
// heap nears the limit instead of each time the live heap doubles
// (GOGC=100). A call that overlaps a collection waits for it, so fewer
// collections mean a shorter tail (BENCHMARKS.md, the MCP gateway), at
// the price of a heap that grows to the limit before it is collected.
type memoryLimitFlag struct{ value string }

func (m *memoryLimitFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&m.value, "memory-limit", "", "run the garbage collector only as the heap nears this size (e.g. 512MiB; units B, KiB, MiB, GiB, TiB; at least 64MiB) instead of each time the live heap doubles: a shorter latency tail for a heap that grows to the limit (docs/gateway.md, Performance); unset, GOGC and GOMEMLIMIT apply")
}

// apply sets the collector for the command's run, as GOGC=off with
// GOMEMLIMIT would, and returns what restores the settings before it.
// Unset, it changes nothing. The environment's GOGC or GOMEMLIMIT and
// the flag together are refused: one of them would be ignored (an empty
// variable sets nothing, for the runtime as here).
func (m *memoryLimitFlag) apply(stderr io.Writer, command string) (restore func(), err error) {
	if m.value == "" {
		return func() {}, nil
	}
	limit, err := parseByteSize(m.value)
	if err != nil {
		return nil, fmt.Errorf("--memory-limit %q: %w", m.value, err)
	}
	if limit < minMemoryLimit {
		return nil, fmt.Errorf("--memory-limit %q: want at least 64MiB", m.value)
	}
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		if v := os.Getenv(env); v != "" {
			return nil, fmt.Errorf("--memory-limit and the environment's %s=%s both set the garbage collector: unset one", env, v)
		}
	}
	pct := debug.SetGCPercent(-1)
	old := debug.SetMemoryLimit(limit)
	fmt.Fprintf(stderr, "policycheck %s: the garbage collector runs as the heap nears %s (--memory-limit)\n", command, m.value)
	return func() {
		debug.SetMemoryLimit(old)
		debug.SetGCPercent(pct)
	}, nil
}

// parseByteSize reads a size as GOMEMLIMIT writes one: a non-negative
// integer with an optional unit B, KiB, MiB, GiB or TiB.
func parseByteSize(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	num, shift := s, uint(0)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, shift = strings.TrimSuffix(s, u.suffix), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || num == "" || num[0] == '+' {
		return 0, errors.New("want a whole number of bytes with an optional unit B, KiB, MiB, GiB or TiB, such as 512MiB")
	}
	if n > math.MaxInt64>>shift {
		return 0, errors.New("too large")
	}
	return n << shift, nil
}
