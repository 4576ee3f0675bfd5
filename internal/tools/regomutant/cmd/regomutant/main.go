// Command regomutant lists and writes the mutants of the shipped policies
// (policies/lib and policies/availability, tests excluded) for
// scripts/rego-mutants.sh, which runs go test against each one. Run it from
// the repository root.
//
//	regomutant list              # index, file and ID of every mutant that compiles
//	regomutant write INDEX ROOT  # write mutant INDEX over its file under ROOT
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/policycheck/policycheck/internal/tools/regomutant"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "regomutant:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	files, err := filepath.Glob("policies/*/*.rego")
	if err != nil {
		return err
	}
	var policy []string
	for _, f := range files {
		dir := filepath.Base(filepath.Dir(f))
		if (dir == "lib" || dir == "availability") && filepath.Ext(f) == ".rego" && !isTest(f) {
			policy = append(policy, f)
		}
	}
	sort.Strings(policy)
	if len(policy) == 0 {
		return fmt.Errorf("no policies under policies/lib or policies/availability: run from the repository root")
	}
	modules := map[string]*ast.Module{}
	var mutants []regomutant.Mutant
	for _, f := range policy {
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		m, err := ast.ParseModuleWithOpts(f, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			return err
		}
		modules[f] = m
		ms, err := regomutant.Generate(f, string(src))
		if err != nil {
			return err
		}
		mutants = append(mutants, ms...)
	}
	switch {
	case len(args) == 1 && args[0] == "list":
		for i, m := range mutants {
			if regomutant.Compiles(modules, m) {
				fmt.Printf("%d\t%s\t%s\n", i, m.File, m.ID())
			}
		}
		return nil
	case len(args) == 3 && args[0] == "write":
		i, err := strconv.Atoi(args[1])
		if err != nil || i < 0 || i >= len(mutants) {
			return fmt.Errorf("write: %q is not a mutant index (0..%d)", args[1], len(mutants)-1)
		}
		m := mutants[i]
		return os.WriteFile(filepath.Join(args[2], m.File), []byte(m.Source), 0o644)
	}
	return fmt.Errorf("usage: regomutant list | regomutant write INDEX ROOT")
}

func isTest(f string) bool {
	return len(f) > len("_test.rego") && f[len(f)-len("_test.rego"):] == "_test.rego"
}
