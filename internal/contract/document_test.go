package contract_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/policycheck/policycheck/internal/contract"
)

// TestGeneratedFilesAreCurrent: the input tables of docs/input.md and
// the gate's list of set paths are what document.go's types generate.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := contract.Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: run go generate ./internal/contract", name)
		}
	}
}
