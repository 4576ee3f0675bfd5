// Package progress reports the advance of a long command (done/total, rate,
// estimated time left) on one rewritten line of a terminal. It writes only
// when its writer is a terminal: piped or redirected, it stays silent, so a
// command's output and logs are the same whether or not a person watches.
//
// A Reporter is safe for concurrent use. Everything it depends on — the
// writer, whether that writer is a terminal, and the clock — is injected
// through Options, so tests drive it without a terminal or real time;
// Stderr builds one for the process's standard error.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// DefaultInterval is the least time between two redraws, so that a fast
// loop does not spend its time writing to the terminal.
const DefaultInterval = 100 * time.Millisecond

// Options configure a Reporter.
type Options struct {
	// Label names the work, e.g. "conformance" or "replay".
	Label string
	// Total is the number of units of work; 0 or less when unknown (the
	// line then shows the count and rate, no percentage or ETA).
	Total int
	// Writer receives the progress line; nil means nowhere (silent).
	Writer io.Writer
	// Terminal says whether Writer is a terminal. When false the Reporter
	// writes nothing at all.
	Terminal bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Interval is the least time between redraws; 0 means DefaultInterval.
	// The first and the last unit are always drawn.
	Interval time.Duration
}

// Reporter draws one progress line. The zero value is not usable; call New
// or Stderr. A nil *Reporter is valid and does nothing, so callers may keep
// one unconditionally.
type Reporter struct {
	mu       sync.Mutex
	opts     Options
	start    time.Time
	lastDraw time.Time
	done     int
	drawn    bool // a line is on screen and must be erased before other output
	finished bool
}

// New returns a Reporter started now (by opts.Now).
func New(opts Options) *Reporter {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Writer == nil {
		opts.Terminal = false
	}
	return &Reporter{opts: opts, start: opts.Now()}
}

// Stderr returns a Reporter on os.Stderr that draws only when standard
// error is a terminal.
func Stderr(label string, total int) *Reporter {
	return New(Options{
		Label:    label,
		Total:    total,
		Writer:   os.Stderr,
		Terminal: IsTerminal(os.Stderr),
	})
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	return f != nil && term.IsTerminal(int(f.Fd()))
}

// Add records n more units done and redraws the line when the interval has
// passed since the last redraw, or when the work is complete.
func (r *Reporter) Add(n int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		return
	}
	r.done += n
	if !r.opts.Terminal {
		return
	}
	now := r.opts.Now()
	complete := r.opts.Total > 0 && r.done >= r.opts.Total
	if r.drawn && !complete && now.Sub(r.lastDraw) < r.opts.Interval {
		return
	}
	r.draw(now)
}

// Clear erases the progress line, so that the caller can write other output
// to the same terminal; the next Add draws it again.
func (r *Reporter) Clear() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.erase()
}

// Finish erases the progress line and stops the Reporter: later calls to
// Add draw nothing. The caller prints its own summary.
func (r *Reporter) Finish() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.erase()
	r.finished = true
}

// Done returns the number of units recorded so far.
func (r *Reporter) Done() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// Line returns the text the Reporter would draw at time now, without the
// terminal control sequences.
func (r *Reporter) Line(now time.Time) string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.line(now)
}

func (r *Reporter) erase() {
	if r.drawn {
		// Carriage return, then erase to the end of the line.
		_, _ = io.WriteString(r.opts.Writer, "\r\x1b[K")
		r.drawn = false
	}
}

func (r *Reporter) draw(now time.Time) {
	_, _ = io.WriteString(r.opts.Writer, "\r"+r.line(now)+"\x1b[K")
	r.drawn = true
	r.lastDraw = now
}

func (r *Reporter) line(now time.Time) string {
	var b strings.Builder
	if r.opts.Label != "" {
		b.WriteString(r.opts.Label)
		b.WriteString(": ")
	}
	total := r.opts.Total
	if total > 0 {
		fmt.Fprintf(&b, "%d/%d (%d%%)", r.done, total, r.done*100/total)
	} else {
		fmt.Fprintf(&b, "%d", r.done)
	}
	elapsed := now.Sub(r.start)
	if r.done == 0 || elapsed <= 0 {
		if total > 0 {
			b.WriteString(", ETA --")
		}
		return b.String()
	}
	rate := float64(r.done) / elapsed.Seconds()
	fmt.Fprintf(&b, ", %s/s", formatRate(rate))
	if total > 0 {
		left := total - r.done
		if left < 0 {
			left = 0
		}
		eta := time.Duration(float64(left) / rate * float64(time.Second))
		fmt.Fprintf(&b, ", ETA %s", formatDuration(eta))
	}
	return b.String()
}

// formatRate prints a rate with three significant figures at most.
func formatRate(rate float64) string {
	switch {
	case rate >= 100:
		return fmt.Sprintf("%.0f", rate)
	case rate >= 10:
		return fmt.Sprintf("%.1f", rate)
	default:
		return fmt.Sprintf("%.2f", rate)
	}
}

// formatDuration prints a duration rounded up to the second, as 42s, 3m05s
// or 1h02m.
func formatDuration(d time.Duration) string {
	s := int((d + time.Second - 1) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	default:
		return fmt.Sprintf("%dh%02dm", s/3600, (s%3600)/60)
	}
}
