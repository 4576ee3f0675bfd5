package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	opaversion "github.com/open-policy-agent/opa/v1/version"
	"github.com/spf13/cobra"

	"github.com/policycheck/policycheck/internal/output/render"
)

const opaModule = "github.com/open-policy-agent/opa"

// versionInfo is what `policycheck version` prints, read from the
// binary's build information (OPA's own version constant when the build
// information lists no OPA module, as in a test binary).
type versionInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	OPA      string `json:"opa"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func readVersion() versionInfo {
	v := versionInfo{Version: "(unknown)", OPA: "v" + opaversion.Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, d := range bi.Deps {
		if d.Path == opaModule {
			v.OPA = d.Version
			if d.Replace != nil {
				v.OPA = d.Replace.Version
			}
		}
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if v.Revision != "" && dirty {
		v.Revision += "-dirty"
	}
	return v
}

func newVersionCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version [--format pretty|json]",
		Short: "Print the policycheck, OPA and Go versions this binary was built with",
		Long: `version prints the module version of policycheck ("(devel)" for a build from a checkout rather than
from a tagged module), the VCS revision when the build recorded one, the version of OPA compiled in,
and the Go version and platform, all from the binary's build information.` + exitCodes("0  always", "2  bad flags or arguments"),
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := parseFormat(prettyOrJSON, format)
			if err != nil {
				return err
			}
			v := readVersion()
			if f == render.JSON {
				return writeJSON(cmd, v)
			}
			w := cmd.OutOrStdout()
			rev := ""
			if v.Revision != "" {
				rev = " (" + v.Revision + ")"
			}
			_, err = fmt.Fprintf(w, "policycheck %s%s\nOPA %s\nGo %s %s\n", v.Version, rev, v.OPA, v.Go, v.Platform)
			return err
		},
	}
	cmd.Flags().StringVarP(&format, "format", "f", "pretty", "output format: pretty or json")
	return cmd
}
