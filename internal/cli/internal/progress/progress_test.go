package progress_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policycheck/policycheck/internal/cli/internal/progress"
	"github.com/policycheck/policycheck/internal/testkit/syncbuf"
)

// clock is a fake clock the test advances by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func TestSilentWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	r := progress.New(progress.Options{Label: "cases", Total: 3, Writer: &buf, Terminal: false, Now: c.now})
	for i := 0; i < 3; i++ {
		c.advance(time.Second)
		r.Add(1)
	}
	r.Clear()
	r.Finish()
	if buf.Len() != 0 {
		t.Fatalf("piped reporter wrote %q, want nothing", buf.String())
	}
	if r.Done() != 3 {
		t.Fatalf("Done() = %d, want 3 (counting goes on when silent)", r.Done())
	}
}

func TestDrawsDoneTotalRateAndETA(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	r := progress.New(progress.Options{Label: "conformance", Total: 10, Writer: &buf, Terminal: true, Now: c.now})
	c.advance(2 * time.Second)
	r.Add(4)
	want := "\rconformance: 4/10 (40%), 2.00/s, ETA 3s\x1b[K"
	if got := buf.String(); got != want {
		t.Fatalf("first draw = %q, want %q", got, want)
	}
}

func TestLineBeforeAnyWorkHasNoRate(t *testing.T) {
	c := newClock()
	r := progress.New(progress.Options{Label: "replay", Total: 5, Terminal: true, Now: c.now})
	if got, want := r.Line(c.now()), "replay: 0/5 (0%), ETA --"; got != want {
		t.Fatalf("Line = %q, want %q", got, want)
	}
}

func TestUnknownTotalShowsCountAndRate(t *testing.T) {
	c := newClock()
	r := progress.New(progress.Options{Label: "tests", Writer: &bytes.Buffer{}, Terminal: true, Now: c.now})
	c.advance(4 * time.Second)
	r.Add(500)
	if got, want := r.Line(c.now()), "tests: 500, 125/s"; got != want {
		t.Fatalf("Line = %q, want %q", got, want)
	}
}

func TestLongETAFormats(t *testing.T) {
	c := newClock()
	r := progress.New(progress.Options{Total: 10000, Terminal: true, Now: c.now})
	c.advance(10 * time.Second)
	r.Add(100) // 10/s, 9900 left: 990s
	if got, want := r.Line(c.now()), "100/10000 (1%), 10.0/s, ETA 16m30s"; got != want {
		t.Fatalf("Line = %q, want %q", got, want)
	}
	c.advance(990 * time.Second)
	// 100 in 1000s = 0.1/s, 9900 left: 99000s = 27h30m
	if got, want := r.Line(c.now()), "100/10000 (1%), 0.10/s, ETA 27h30m"; got != want {
		t.Fatalf("Line = %q, want %q", got, want)
	}
}

func TestThrottlesRedrawsButAlwaysDrawsTheLast(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	r := progress.New(progress.Options{Total: 100, Writer: &buf, Terminal: true, Now: c.now, Interval: time.Second})
	for i := 0; i < 100; i++ {
		c.advance(10 * time.Millisecond) // 100 units in one second
		r.Add(1)
	}
	draws := strings.Count(buf.String(), "\r")
	// The first unit draws; the next redraw is due a second later, which is
	// also the last unit (drawn because the work is complete).
	if draws != 2 {
		t.Fatalf("%d redraws of 100 units in one second with a 1s interval, want 2:\n%q", draws, buf.String())
	}
	if !strings.Contains(buf.String(), "100/100 (100%)") {
		t.Fatalf("the final state was never drawn: %q", buf.String())
	}
}

func TestClearErasesAndNextAddRedraws(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	r := progress.New(progress.Options{Total: 3, Writer: &buf, Terminal: true, Now: c.now, Interval: time.Hour})
	c.advance(time.Second)
	r.Add(1)
	buf.Reset()
	r.Clear()
	if got := buf.String(); got != "\r\x1b[K" {
		t.Fatalf("Clear wrote %q, want carriage return and erase-line", got)
	}
	buf.Reset()
	r.Clear() // nothing on screen: nothing to erase
	if buf.Len() != 0 {
		t.Fatalf("second Clear wrote %q", buf.String())
	}
	c.advance(time.Millisecond) // well inside the interval
	r.Add(1)
	if !strings.Contains(buf.String(), "2/3") {
		t.Fatalf("after Clear, Add must redraw at once, got %q", buf.String())
	}
}

func TestFinishErasesAndStops(t *testing.T) {
	var buf bytes.Buffer
	c := newClock()
	r := progress.New(progress.Options{Total: 2, Writer: &buf, Terminal: true, Now: c.now})
	c.advance(time.Second)
	r.Add(1)
	r.Finish()
	if !strings.HasSuffix(buf.String(), "\r\x1b[K") {
		t.Fatalf("Finish did not erase the line: %q", buf.String())
	}
	buf.Reset()
	c.advance(time.Second)
	r.Add(1)
	r.Finish()
	if buf.Len() != 0 {
		t.Fatalf("a finished reporter wrote %q", buf.String())
	}
}

func TestNilReporterIsANoOp(t *testing.T) {
	var r *progress.Reporter
	r.Add(1)
	r.Clear()
	r.Finish()
	if r.Done() != 0 || r.Line(time.Now()) != "" {
		t.Fatal("nil reporter reported something")
	}
}

func TestConcurrentAdds(t *testing.T) {
	// The race detector sees only the Reporter's own locking.
	var out syncbuf.Buffer
	r := progress.New(progress.Options{Total: 800, Writer: &out, Terminal: true, Interval: time.Nanosecond})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				r.Add(1)
			}
		}()
	}
	wg.Wait()
	r.Finish()
	if r.Done() != 800 {
		t.Fatalf("Done() = %d after 8x100 concurrent Adds", r.Done())
	}
	if !strings.Contains(out.String(), "800/800 (100%)") {
		t.Fatal("the completed state was never drawn")
	}
}
