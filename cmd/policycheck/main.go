// Command policycheck decides, from an agent's message history, which LLM
// tools are available, advertised and callable, with Rego policies.
// Run `policycheck --help` for the commands.
package main

import (
	"os"

	"github.com/policycheck/policycheck/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
