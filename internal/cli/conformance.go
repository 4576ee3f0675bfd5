package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/internal/conformance"
	"github.com/policycheck/policycheck/internal/conformance/runner"
	"github.com/policycheck/policycheck/internal/ground/printable"
	"github.com/policycheck/policycheck/internal/output/render"
)

func newConformanceCmd() *cobra.Command {
	var (
		verbose bool
		format  string
	)
	cmd := &cobra.Command{
		Use:   "conformance DIR [--format pretty|json] [-v]",
		Short: "Run a directory of conformance cases and print N passed, M failed",
		Long: `conformance runs every *.json case of DIR (the format of shared/conformance/README.md: registry,
optional filters, history, and the expected window, facts, availability, advertisement, dispatch
facts and verdicts) through the loader, the facts and the policies, and prints each failure and a
closing tally; --format json prints instead one document, {"passed", "failed", "cases": [{"case",
"passed", "failures"?, "error"?}]}, every case listed. It exits 1 when any case fails. On a terminal, stderr shows the progress (cases done,
rate, time left); piped or redirected, nothing is added.` + exitCodes("0  every case passed", "1  a case failed", "2  DIR or a case file that cannot be read, bad flags or arguments"),
		Example: `  policycheck conformance ../shared/conformance/cases`,
		Args:    exactArgs(1, "one argument, the directory of cases"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseFormat(prettyOrJSON, format)
			if err != nil {
				return err
			}
			cases, err := conformance.Load(args[0])
			if err != nil {
				return badInput(err)
			}
			out := cmd.OutOrStdout()
			if f == render.JSON {
				out = io.Discard // the lines below; the document is written at the end
			}
			type caseResult struct {
				Case     string   `json:"case"`
				Passed   bool     `json:"passed"`
				Failures []string `json:"failures,omitempty"`
				Error    string   `json:"error,omitempty"`
			}
			results := []caseResult{}
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
					printable.Fprintf(out, "FAIL %s: %v\n", name, err)
					results = append(results, caseResult{Case: name, Error: err.Error()})
				case !res.Passed():
					failed++
					printable.Fprintf(out, "FAIL %s\n", name)
					r := caseResult{Case: name}
					for _, f := range res.Failures {
						printable.Fprintf(out, "    %s\n", f)
						r.Failures = append(r.Failures, fmt.Sprint(f))
					}
					results = append(results, r)
				default:
					passed++
					if verbose {
						printable.Fprintf(out, "PASS %s\n", name)
					}
					results = append(results, caseResult{Case: name, Passed: true})
				}
			}
			bar.Finish()
			fmt.Fprintf(out, "%d passed, %d failed\n", passed, failed)
			if f == render.JSON {
				if err := writeJSONTo(cmd.OutOrStdout(), struct {
					Passed int          `json:"passed"`
					Failed int          `json:"failed"`
					Cases  []caseResult `json:"cases"`
				}{passed, failed, results}); err != nil {
					return err
				}
			}
			if failed > 0 {
				return errFailed
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print passing cases too")
	cmd.Flags().StringVarP(&format, "format", "f", "pretty", "output format: pretty (a line a failure and the tally) or json (one document, every case)")
	return cmd
}
