// Package cli implements the policycheck command line, thin over the
// loader, facts, engine and server packages: one file per subcommand, and
// files of their own for what serve adds around the server (listen.go:
// TCP and Unix socket addresses; tlsfiles.go: key pairs reloaded on
// rotation, client CAs; watch.go: --watch). Run is the whole program,
// callable in-process by tests.
//
// Exit codes (each command's --help lists those it can return): 0 a
// decision was made (whatever the verdicts, fail-closed ones included), or
// the command succeeded; 1 `test` or `conformance` ran and something
// failed, or `replay` matched --fail-on; 2 bad input, bad registry, a
// policy that does not load or compile, bad flags or arguments, or `check`
// found something; 3 `eval --fail-on-refusal` and a call was refused or
// the decision failed closed.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/policycheck/policycheck/internal/printable"
	"github.com/policycheck/policycheck/internal/progress"
)

// Exit codes.
const (
	ExitOK       = 0
	ExitFailed   = 1
	ExitBadUsage = 2
	// ExitRefused: eval --fail-on-refusal, and the decision refused a call
	// or failed closed.
	ExitRefused = 3
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

// The lines of the "Exit codes" blocks; each command lists the ones it can
// return.
const (
	exitLineDecision = "0  a decision was made (whatever the verdicts, including fail-closed ones)"
	exitLineBad      = "2  bad input, bad registry, a policy that does not load or compile, bad flags or arguments"
	exitLineRefused  = "3  with --fail-on-refusal: a call was refused or the decision failed closed"
)

// exitCodes formats an "Exit codes" block to end a command's long help,
// set off by a blank line.
func exitCodes(lines ...string) string {
	return "\n\nExit codes:\n  " + strings.Join(lines, "\n  ")
}

// Run runs the command line with args (without the program name) and
// returns the exit status.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(context.Background(), args, stdin, stdout, stderr)
}

// run is Run under ctx (tests carry faults in it: internal/faults).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:   "policycheck",
		Short: "Decide which LLM agent tools are available, advertised and callable, with Rego",
		Long: "policycheck reads an agent's message history (pydantic-ai JSON), derives what the model has been shown, and\n" +
			"asks Rego policies which tools are available, which are advertised, and whether each tool call executes.\n\n" +
			"Output formats follow opa: --format pretty for people, json for machines (eval's default, its contract)." +
			exitCodes(
				"0  success; for eval, explain and facts: a decision was made, whatever the verdicts",
				"1  test or conformance ran and something failed, or a change matched replay --fail-on",
				exitLineBad+"; check found something",
				exitLineRefused+" (eval only)"),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return badInput(fmt.Errorf("%w\n%s", err, usageHint(c)))
	})
	root.SetUsageFunc(writeUsage)
	for _, add := range commands {
		root.AddCommand(add())
	}
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err.Error() != "" {
			fmt.Fprintln(stderr, "policycheck:", printable.Lines(ee.err.Error()))
		}
		return ee.code
	}
	// Unknown commands, missing arguments and other usage errors.
	fmt.Fprintln(stderr, "policycheck:", printable.Lines(err.Error()))
	fmt.Fprintln(stderr, usageHint(root))
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
	newGatewayCmd,
	newReplayCmd,
	newReceiptCmd,
	newPoliciesCmd,
	newBundleCmd,
	newVersionCmd,
}

func usageHint(c *cobra.Command) string {
	return fmt.Sprintf("Run '%s --help' for usage.", c.CommandPath())
}

// noArgs refuses positional arguments, naming the first one as such
// (cobra's own check calls it an unknown command).
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return badInput(fmt.Errorf("unexpected argument %q: %s takes no positional arguments (inputs are given by flags)\n%s",
			args[0], c.CommandPath(), usageHint(c)))
	}
	return nil
}

// exactArgs requires n positional arguments, named in the message by what.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		switch {
		case len(args) < n:
			return badInput(fmt.Errorf("%s needs %s\n%s", c.CommandPath(), what, usageHint(c)))
		case len(args) > n:
			return badInput(fmt.Errorf("unexpected argument %q: %s takes only %s\n%s", args[n], c.CommandPath(), what, usageHint(c)))
		}
		return nil
	}
}

// writeUsage prints the usage section of help: cobra's layout, with flags
// printed plainly (a bool flag is --name, not --name[=true|false]).
func writeUsage(c *cobra.Command) error {
	var b strings.Builder
	b.WriteString("Usage:\n")
	if c.Runnable() {
		b.WriteString("  " + c.UseLine() + "\n")
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("  " + c.CommandPath() + " [command]\n")
	}
	if c.HasExample() {
		b.WriteString("\nExamples:\n" + c.Example + "\n")
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("\nCommands:\n")
		width := 0
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() && len(s.Name()) > width {
				width = len(s.Name())
			}
		}
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				fmt.Fprintf(&b, "  %-*s  %s\n", width, s.Name(), s.Short)
			}
		}
	}
	if c.HasAvailableLocalFlags() {
		b.WriteString("\nFlags:\n" + flagUsages(c.LocalFlags()))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\nUse \"%s [command] --help\" for more information about a command.\n", c.CommandPath())
	}
	_, err := io.WriteString(c.OutOrStderr(), b.String())
	return err
}

// flagUsages lists flags one a line, aligned: "-s, --name type   usage
// (default X)". Bool flags take no type; defaults are shown unless zero.
func flagUsages(fs *pflag.FlagSet) string {
	type row struct{ left, usage string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		left := "      --" + f.Name
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			left = "  -" + f.Shorthand + ", --" + f.Name
		}
		varname, usage := pflag.UnquoteUsage(f)
		if f.Value.Type() != "bool" && varname != "" {
			left += " " + varname
		}
		if !zeroDefault(f) {
			if f.Value.Type() == "string" {
				usage += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				usage += fmt.Sprintf(" (default %s)", f.DefValue)
			}
		}
		if len(left) > width {
			width = len(left)
		}
		rows = append(rows, row{left, usage})
	})
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%-*s   %s\n", width, r.left, r.usage)
	}
	return b.String()
}

func zeroDefault(f *pflag.Flag) bool {
	switch f.DefValue {
	case "", "false", "0", "0s", "[]", "<nil>":
		return true
	}
	return false
}

// stderrProgress returns a progress line on the command's stderr, drawn
// only when that is a terminal: an *os.File that is one, or a writer that
// says so with an IsTerminal() bool method (how tests stand in for one).
// Pipes and buffers get nothing.
func stderrProgress(cmd *cobra.Command, label string, total int) *progress.Reporter {
	w := cmd.ErrOrStderr()
	terminal := false
	switch x := w.(type) {
	case *os.File:
		terminal = progress.IsTerminal(x)
	case interface{ IsTerminal() bool }:
		terminal = x.IsTerminal()
	}
	return progress.New(progress.Options{Label: label, Total: total, Writer: w, Terminal: terminal})
}
