package servetest_test

import (
	"os"
	"testing"

	"github.com/policycheck/policycheck/internal/testkit/servetest"
)

// TestMain shares one build of each command among the package's tests.
func TestMain(m *testing.M) { os.Exit(servetest.Main(m)) }

// Under Main, every test gets the same build of the command, and it is
// there to run.
func TestBuildIsSharedUnderMain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	first := servetest.Build(t)
	var again string
	t.Run("another test", func(t *testing.T) { again = servetest.Build(t) })
	if again != first {
		t.Fatalf("a second Build built again: %s, then %s", first, again)
	}
	if info, err := os.Stat(first); err != nil || info.Mode()&0o111 == 0 {
		t.Fatalf("the shared build is not an executable: %v %v", info, err)
	}
}
