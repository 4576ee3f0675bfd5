// Package cli implements the policycheck command line, thin over the
// loader, facts and engine packages: one file per subcommand. Run is the
// whole program, callable in-process by tests.
//
// Exit codes (documented in --help): 0 a decision was made (whatever the
// verdicts, fail-closed ones included); 1 `test` or `conformance` ran and
// something failed, or `replay` matched --fail-on; 2 bad input, bad registry, a policy that does not load
// or compile, bad flags.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	ExitOK       = 0
	ExitFailed   = 1
	ExitBadUsage = 2
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badInput wraps an error as exit status 2.
func badInput(err error) error { return &exitError{code: ExitBadUsage, err: err} }

// failed reports a failed test or conformance run (exit 1) with no message.
var errFailed = &exitError{code: ExitFailed, err: errors.New("")}

const exitCodesHelp = `
Exit codes:
  0  a decision was made (whatever the verdicts, including fail-closed ones)
  1  test or conformance ran and something failed, or a replay matched --fail-on
  2  bad input, bad registry, a policy that does not load or compile, bad flags`

// Run runs the command line with args (without the program name) and
// returns the exit status.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "policycheck",
		Short:         "Decide which LLM agent tools are available, advertised and callable, with Rego",
		Long:          "policycheck reads an agent's message history (pydantic-ai JSON), derives what the model has been shown, and\nasks Rego policies which tools are available, which are advertised, and whether each tool call executes." + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	for _, add := range commands {
		root.AddCommand(add())
	}
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err.Error() != "" {
			fmt.Fprintln(stderr, "policycheck:", ee.err)
		}
		return ee.code
	}
	// Unknown commands, missing arguments and other usage errors.
	fmt.Fprintln(stderr, "policycheck:", err)
	return ExitBadUsage
}

// commands is the list of subcommand constructors; each subcommand's file
// registers itself in an init-free way by being listed here.
var commands = []func() *cobra.Command{
	newFactsCmd,
	newRegistryCmd,
	newEvalCmd,
	newExplainCmd,
	newConformanceCmd,
	newTestCmd,
	newCheckCmd,
	newServeCmd,
	newReplayCmd,
}
