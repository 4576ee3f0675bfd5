// Command generate writes the files generated from the document types of
// package contract (docs/input.md's input tables, the gate's list of set
// paths). Run it as `go generate ./internal/contract` from the module
// root.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/policycheck/policycheck/internal/contract"
)

func main() {
	// go generate runs in the package's directory, internal/contract.
	root := filepath.Join("..", "..")
	files, err := contract.Generate(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(root, name), files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "generate:", err)
			os.Exit(1)
		}
	}
}
