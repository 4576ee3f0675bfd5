// Package conformance reads the shared conformance corpus
// (../shared/conformance/cases, format in its README) and locates it for
// tests: beside the checkout, skipped with a message when absent outside
// CI, a failure when absent under CI=true.
package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// Case is one conformance case.
type Case struct {
	File      string          `json:"-"`
	Name      string          `json:"name"`
	Source    string          `json:"source"`
	Assertion string          `json:"assertion"`
	Registry  json.RawMessage `json:"registry"`
	Filters   map[string]struct {
		Keep []string `json:"keep"`
	} `json:"filters,omitempty"`
	History json.RawMessage `json:"history"`
	Expect  Expect          `json:"expect"`
}

// Position is a {"message", "part"} pair.
type Position struct {
	Message int `json:"message"`
	Part    int `json:"part"`
}

// Expect holds a case's expectations; optional ones are nil when absent.
type Expect struct {
	Window     Position  `json:"window"`
	Discovered []string  `json:"discovered"`
	Loaded     []string  `json:"loaded"`
	Available  *[]string `json:"available,omitempty"`
	Advertised *[]string `json:"advertised,omitempty"`
	Calls      *[]Call   `json:"calls,omitempty"`
	Dispatch   *Dispatch `json:"dispatch,omitempty"`
}

// Call is an expected verdict.
type Call struct {
	ToolCallID *string `json:"tool_call_id"`
	Tool       string  `json:"tool"`
	Verdict    string  `json:"verdict"`
}

// Dispatch is the expected dispatch-time detail of oracle cases.
type Dispatch struct {
	Provider           *string   `json:"provider"`
	AnchoredWindow     Position  `json:"anchored_window"`
	EvidenceDiscovered []string  `json:"evidence_discovered"`
	EvidenceLoaded     []string  `json:"evidence_loaded"`
	Available          *[]string `json:"available,omitempty"`
}

// Load reads every *.json case in dir, sorted by file name.
func Load(dir string) ([]Case, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("conformance: no *.json cases in %s", dir)
	}
	sort.Strings(paths)
	cases := make([]Case, 0, len(paths))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var c Case
		dec := json.NewDecoder(strings.NewReader(string(data)))
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("conformance: %s: %w", p, err)
		}
		c.File = p
		cases = append(cases, c)
	}
	return cases, nil
}

// ModuleRoot returns the root of this Go module (the directory of go.mod).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// SharedDir returns ../shared beside the checkout, or an error.
func SharedDir() (string, error) {
	if dir := os.Getenv("POLICYCHECK_SHARED"); dir != "" {
		return dir, nil
	}
	dir := filepath.Join(ModuleRoot(), "..", "shared")
	if _, err := os.Stat(filepath.Join(dir, "conformance", "cases")); err != nil {
		return "", fmt.Errorf("the shared corpus is not at %s: %w", dir, err)
	}
	return dir, nil
}

// Cases loads the shared corpus for a test: it skips the test with a clear
// message when the corpus is absent outside CI and fails it under CI=true.
func Cases(tb testing.TB) []Case {
	tb.Helper()
	dir, err := SharedDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("CI=true but %v", err)
		}
		tb.Skipf("skipping: %v (set POLICYCHECK_SHARED, or check out ../shared; under CI=true this fails)", err)
	}
	cases, err := Load(filepath.Join(dir, "conformance", "cases"))
	if err != nil {
		tb.Fatal(err)
	}
	return cases
}
