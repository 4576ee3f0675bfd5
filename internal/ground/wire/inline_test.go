package wire_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestHotPathsAreInlined: the scanner's per-token helpers stay within the
// compiler's inlining budget. Each runs for every token of a history, and
// one that grows past the budget is called out of line without any test
// noticing: WS written with IsSpace made Peek too large, and a
// 10,000-message decode 3-5% slower.
func TestHotPathsAreInlined(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the inlining check needs the go command: %v", err)
	}
	out, err := exec.Command(goBin, "build", "-gcflags=-m=2", "-o", "/dev/null", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m=2: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	for _, fn := range []string{"(*Scanner).Peek", "(*Scanner).WS", "(*Scanner).Pop", "(*Scanner).PushKey", "stops8"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, ": can inline "+fn+" with cost ") }) {
			t.Errorf("%s is not inlined any more; the compiler said:\n%s", fn, grepLines(string(out), fn))
		}
	}
}

// TestHotPathsAreInlinedIntoTheDecoder: the history decoder (package
// loader) reads every token through the Scanner's Peek and WS from
// another package; the compiler inlines them there as it did when the
// scanner was the loader's own.
func TestHotPathsAreInlinedIntoTheDecoder(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the inlining check needs the go command: %v", err)
	}
	out, err := exec.Command(goBin, "build", "-gcflags=-m", "-o", "/dev/null", "../../../loader").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	for _, fn := range []string{"wire.(*Scanner).Peek", "wire.(*Scanner).WS", "wire.(*Scanner).Pop", "wire.(*Scanner).PushKey"} {
		if !strings.Contains(string(out), "inlining call to "+fn+"\n") {
			t.Errorf("the loader does not inline %s any more", fn)
		}
	}
}

// grepLines returns the lines of s that say why fn is not inlined.
func grepLines(s, fn string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "inline "+fn+":") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
