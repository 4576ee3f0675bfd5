package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/conformance/runner"
)

func newConformanceCmd() *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "conformance DIR",
		Short: "Run a directory of conformance cases and print N passed, M failed",
		Long: `conformance runs every *.json case of DIR (the format of shared/conformance/README.md: registry,
optional filters, history, and the expected window, facts, availability, advertisement, dispatch
facts and verdicts) through the loader, the facts and the policies, and prints each failure and a
closing tally. It exits 1 when any case fails. On a terminal, stderr shows the progress (cases done,
rate, time left); piped or redirected, nothing is added.` + exitCodes("0  every case passed", "1  a case failed", "2  DIR or a case file that cannot be read, bad flags or arguments"),
		Example: `  policycheck conformance ../shared/conformance/cases`,
		Args:    exactArgs(1, "one argument, the directory of cases"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cases, err := conformance.Load(args[0])
			if err != nil {
				return badInput(err)
			}
			out := cmd.OutOrStdout()
			passed, failed := 0, 0
			bar := stderrProgress(cmd, "conformance", len(cases))
			defer bar.Finish()
			for _, c := range cases {
				res, err := runner.Run(cmd.Context(), c)
				name := filepath.Base(c.File)
				bar.Add(1)
				if err != nil || !res.Passed() || verbose {
					bar.Clear() // the line below goes to the same terminal
				}
				switch {
				case err != nil:
					failed++
					fmt.Fprintf(out, "FAIL %s: %v\n", name, err)
				case !res.Passed():
					failed++
					fmt.Fprintf(out, "FAIL %s\n", name)
					for _, f := range res.Failures {
						fmt.Fprintf(out, "    %s\n", f)
					}
				default:
					passed++
					if verbose {
						fmt.Fprintf(out, "PASS %s\n", name)
					}
				}
			}
			bar.Finish()
			fmt.Fprintf(out, "%d passed, %d failed\n", passed, failed)
			if failed > 0 {
				return errFailed
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print passing cases too")
	return cmd
}
