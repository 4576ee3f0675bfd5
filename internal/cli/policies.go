package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/policies"
)

func newPoliciesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policies export",
		Short: "Write the shipped policies to a directory, for stock opa test",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return badInput(fmt.Errorf("policies needs a subcommand: export\n%s", usageHint(cmd)))
		},
	}
	cmd.AddCommand(newPoliciesExportCmd())
	return cmd
}

func newPoliciesExportCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "export [--force] DIR",
		Short: "Write the shipped policies (policycheck.availability, policycheck.lib, their tests) to DIR",
		Long: `export writes the policies built into this binary (policies/availability and policies/lib, with
their *_test.rego) under DIR, creating it, so that stock "opa test" can run your tests beside them:

  opa test DIR my-policies/

("policycheck test" has them built in and needs no export.) Exporting again into a DIR that holds
exactly these files succeeds and changes nothing. A DIR that holds any other file, or one of these
files with other contents, is refused and left as it is; --force writes the shipped files over the
ones that differ and keeps the files it does not ship.` +
			exitCodes("0  the shipped policies are in DIR",
				"2  bad input: DIR holds other files (without --force), cannot be created or written, a missing argument"),
		Example: `  policycheck policies export vendor/policycheck && opa test vendor/policycheck my-policies/`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return badInput(fmt.Errorf("want one DIR argument, got %d\n%s", len(args), usageHint(c)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := exportPolicies(policies.FS(), args[0], force)
			if err != nil {
				return badInput(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d files of the shipped policies to %s\n", n, args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "write over files in DIR that differ from the shipped ones")
	return cmd
}

// exportPolicies writes every file of src under dir and returns how
// many there are. Unless force, it first refuses (writing nothing) a dir
// holding a file that src lacks or has with other contents.
func exportPolicies(src fs.FS, dir string, force bool) (int, error) {
	want := map[string][]byte{}
	if err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, p)
		want[filepath.FromSlash(p)] = b
		return err
	}); err != nil {
		return 0, fmt.Errorf("reading the shipped policies: %w", err)
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, fmt.Errorf("export to %s: %w", dir, err)
	case !st.IsDir():
		return 0, fmt.Errorf("export to %s: not a directory", dir)
	default:
		if !force {
			differ, err := differingFiles(dir, want)
			if err != nil {
				return 0, err
			}
			if len(differ) > 0 {
				return 0, fmt.Errorf("export to %s: it holds files that are not the shipped policies (%s); export to an empty directory, or give --force to write the shipped files over these, keeping the others",
					dir, strings.Join(differ, ", "))
			}
		}
	}
	for rel, b := range want {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 0, fmt.Errorf("export to %s: %w", dir, err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return 0, fmt.Errorf("export to %s: %w", dir, err)
		}
	}
	return len(want), nil
}

// differingFiles lists, relative to dir and sorted, every entry under
// dir that is not a directory and not byte for byte the file of want at
// its path.
func differingFiles(dir string, want map[string][]byte) ([]string, error) {
	var differ []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		w, ok := want[rel]
		if ok && d.Type().IsRegular() {
			have, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if bytes.Equal(have, w) {
				return nil
			}
		}
		differ = append(differ, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("export to %s: %w", dir, err)
	}
	sort.Strings(differ)
	return differ, nil
}
