package engine_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/policycheck/policycheck/engine"
	"github.com/policycheck/policycheck/loader"
)

// A module in a package the engine never reads is loaded, and said.
func ExampleOnWarning() {
	reg, err := loader.ParseRegistry("registry.yaml", []byte(exampleRegistry))
	if err != nil {
		log.Fatal(err)
	}
	typo := engine.Source{File: "vault.rego", Text: "package policycheck.capabilitiez.vault\n\nprepare_tools := set()\n"}
	eng, err := engine.New(context.Background(), engine.Registry(reg), engine.Modules(typo),
		engine.OnWarning(func(p engine.PolicyProblem) { fmt.Println("warning:", p) }))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(eng.Warnings()), "warning kept")
	// Output:
	// warning: vault.rego:1:1: package_outside_policycheck: package policycheck.capabilitiez.vault is outside the packages the engine reads (policycheck.rules.*, policycheck.capabilities.*, policycheck.availability, policycheck.lib*) and no policy imports it: its rules are never evaluated
	// 1 warning kept
}

func TestWarningsOnEveryCompile(t *testing.T) {
	reg, err := loader.ParseRegistry("registry.yaml", []byte(exampleRegistry))
	require.NoError(t, err)
	var mu sync.Mutex
	var got []string
	record := engine.OnWarning(func(p engine.PolicyProblem) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, p.File)
	})
	helper := engine.Source{File: "util.rego", Text: "package acme.util\n\nadmins := {\"root\"}\n"}
	user := engine.Source{File: "rules.rego", Text: "package policycheck.rules.x\n\nimport data.acme.util\n\nhide contains \"get_time\" if input.context.user in util.admins\n"}
	dead := engine.Source{File: "mine.rego", Text: "package mine\n\nallow := true\n"}

	eng, err := engine.New(context.Background(), engine.Registry(reg), engine.Modules(helper, user), record)
	require.NoError(t, err)
	assert.Empty(t, eng.Warnings(), "a package the rules import is read")
	assert.Empty(t, got)

	require.NoError(t, eng.Reload(context.Background(), engine.Modules(dead)))
	require.Len(t, eng.Warnings(), 1)
	assert.Equal(t, engine.CodeUnreadPackage, eng.Warnings()[0].Code)
	assert.Equal(t, []string{"mine.rego"}, got, "Reload reports the new set's warnings")

	require.NoError(t, eng.Reload(context.Background()))
	assert.Empty(t, eng.Warnings(), "each snapshot has its own warnings")
	assert.Len(t, got, 1)
}
