package cli

import (
	"context"
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
	cmd.Flags().StringVar(&m.value, "memory-limit", "", "run the garbage collector only as the heap nears this size (e.g. 512MiB; units B, KiB, MiB, GiB, TiB; at least 64MiB) instead of each time the live heap doubles: a shorter latency tail for a heap that grows to the limit (docs/gateway.md, Performance); auto: 90% of the process's cgroup memory limit (a container's), refused if there is none; unset, GOGC and GOMEMLIMIT apply")
}

// autoMemoryPercent is the share of the cgroup's memory limit that
// --memory-limit auto gives the soft limit. The soft limit bounds the
// memory the Go runtime manages (the heap, goroutine stacks, the
// runtime's own); the cgroup's hard limit charges the rest of the
// process too (the binary's pages, socket buffers, page cache), and the
// heap overshoots a soft limit its live data needs: past the hard one the
// kernel kills the process (docs/gateway.md, Performance).
const autoMemoryPercent = 90

// apply sets the collector for the command's run, as GOGC=off with
// GOMEMLIMIT would, and returns what restores the settings before it.
// Unset, it changes nothing. auto derives the limit from the process's
// cgroup memory limit, read below the root ctx carries (cgroupRoot): no
// limit found, or one too small, is refused. The environment's GOGC or
// GOMEMLIMIT and the flag together are refused: one of them would be
// ignored (an empty variable sets nothing, for the runtime as here).
func (m *memoryLimitFlag) apply(ctx context.Context, stderr io.Writer, command string) (restore func(), err error) {
	if m.value == "" {
		return func() {}, nil
	}
	var (
		limit int64
		said  string // how the message names the limit
	)
	if m.value == "auto" {
		if limit, said, err = autoMemoryLimit(cgroupRoot(ctx)); err != nil {
			return nil, err
		}
	} else {
		if limit, err = parseByteSize(m.value); err != nil {
			return nil, fmt.Errorf("--memory-limit %q: %w", m.value, err)
		}
		if limit < minMemoryLimit {
			return nil, fmt.Errorf("--memory-limit %q: want at least 64MiB", m.value)
		}
		said = m.value + " (--memory-limit)"
	}
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		if v := os.Getenv(env); v != "" {
			return nil, fmt.Errorf("--memory-limit and the environment's %s=%s both set the garbage collector: unset one", env, v)
		}
	}
	pct := debug.SetGCPercent(-1)
	old := debug.SetMemoryLimit(limit)
	fmt.Fprintf(stderr, "policycheck %s: the garbage collector runs as the heap nears %s\n", command, said)
	return func() {
		debug.SetMemoryLimit(old)
		debug.SetGCPercent(pct)
	}, nil
}

// autoMemoryLimit is --memory-limit auto's limit below root:
// autoMemoryPercent of the cgroup's, rounded down to a whole MiB, and
// how the message names it (the cgroup's limit and its file).
func autoMemoryLimit(root string) (limit int64, said string, err error) {
	cg, err := readCgroupMemoryLimit(root)
	if err != nil {
		return 0, "", fmt.Errorf("--memory-limit auto: %w; give --memory-limit a SIZE instead, such as 512MiB, under the memory the process may use", err)
	}
	limit = cg.bytes / 100 * autoMemoryPercent &^ (1<<20 - 1)
	if limit < minMemoryLimit {
		return 0, "", fmt.Errorf("--memory-limit auto: %d%% of the cgroup memory limit %s (%s) is %s, under the 64MiB minimum: leave --memory-limit unset, or give the process more memory",
			autoMemoryPercent, formatByteSize(cg.bytes), cg.file, formatByteSize(limit))
	}
	return limit, fmt.Sprintf("%s, %d%% of the cgroup memory limit %s in %s (--memory-limit auto)",
		formatByteSize(limit), autoMemoryPercent, formatByteSize(cg.bytes), cg.file), nil
}

// byteUnits are the units of a size, as GOMEMLIMIT writes them, largest
// first.
func byteUnits() []struct {
	suffix string
	shift  uint
} {
	return []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
}

// formatByteSize writes n as parseByteSize reads it, in the largest unit
// that divides it.
func formatByteSize(n int64) string {
	for _, u := range byteUnits() {
		if n != 0 && n&(1<<u.shift-1) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// parseByteSize reads a size as GOMEMLIMIT writes one: a non-negative
// integer with an optional unit B, KiB, MiB, GiB or TiB.
func parseByteSize(s string) (int64, error) {
	num, shift := s, uint(0)
	for _, u := range byteUnits() {
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
