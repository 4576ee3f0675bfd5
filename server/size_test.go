package server_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goLines counts the lines of dir's Go files, tests aside.
func goLines(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += bytes.Count(b, []byte{'\n'})
	}
	return n
}

// TestServerStaysSmallerThanEngine holds issue 12's design: the sidecar
// is a thin layer over the engine, so server/ stays smaller than
// engine/. What is not the sidecar's own logic (request-header checks,
// the LRU, the OPA plugin glue, the context masking) lives in internal
// packages of its own.
func TestServerStaysSmallerThanEngine(t *testing.T) {
	server, engine := goLines(t, "."), goLines(t, filepath.Join("..", "engine"))
	t.Logf("server/ %d lines, engine/ %d", server, engine)
	if server >= engine {
		t.Fatalf("server/ has %d lines of Go, engine/ %d: the sidecar must stay thinner than the engine (issue 12)", server, engine)
	}
}
