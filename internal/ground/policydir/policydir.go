// Package policydir holds what the engine's policy loader and the
// commands that read a policy directory (check, test) agree on: which
// files under a policy directory are stray data, and what is said about
// them.
package policydir

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// Stray reports whether a file found under a policy directory is
// JSON or YAML by its extension but not named as the OPA bundle
// convention names data files (data.json, data.yaml, data.yml). Loading
// policies (engine.PolicyPaths) refuses such a file, and policycheck check
// and test report it, with StrayMessage.
func Stray(name string) bool {
	switch ext := strings.ToLower(path.Ext(name)); ext {
	case ".json", ".yaml", ".yml":
		return strings.TrimSuffix(name, path.Ext(name)) != "data"
	}
	return false
}

// StrayMessage says why a Stray file is refused, and what to do.
const StrayMessage = "not loaded as data: in a policy directory only files named data.json, data.yaml or data.yml are data " +
	"(the OPA bundle convention, as in a bundle and in policycheck test); move its content to a data.json in the " +
	"directory whose path it should have, or move the file out"

// StraySummary is the one finding for several Stray files under
// the policy directory dir (files as found, under dir): a registry,
// histories or contexts kept beside the policies, most likely. It names a
// few of them and says what to do.
func StraySummary(dir string, files []string) string {
	names := make([]string, 0, 3)
	for _, f := range files {
		if len(names) == 3 {
			break
		}
		if rel, err := filepath.Rel(dir, f); err == nil && !strings.HasPrefix(rel, "..") {
			f = rel
		}
		names = append(names, f)
	}
	list := strings.Join(names, ", ")
	if more := len(files) - len(names); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("%d JSON or YAML files here are not data (%s): in a policy directory only data.json, data.yaml "+
		"and data.yml are data (the OPA bundle convention). Keep the policies in a directory of their own, apart from "+
		"the registry, histories and contexts, and name that directory (--policy policies/, check policies/)", len(files), list)
}
