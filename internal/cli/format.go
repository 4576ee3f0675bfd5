package cli

import (
	"fmt"
	"strings"
)

// Output formats follow opa's vocabulary: pretty for people, json for
// machines, and a command's own formats where it needs them (facts'
// input). Older names are kept as documented aliases.

// formatAliases maps a kept older name to the format it now means.
var formatAliases = map[string]string{
	"text": "pretty", // explain and check before the shared vocabulary
}

// normalizeFormat resolves an alias and checks the result is one of allowed.
func normalizeFormat(format string, allowed ...string) (string, error) {
	if to, ok := formatAliases[format]; ok {
		format = to
	}
	for _, a := range allowed {
		if format == a {
			return format, nil
		}
	}
	return "", badInput(fmt.Errorf("--format must be %s, not %q", orList(allowed), format))
}

// checkFormat is normalizeFormat for commands without aliases.
func checkFormat(format string, allowed ...string) error {
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	return badInput(fmt.Errorf("--format must be %s, not %q", orList(allowed), format))
}

func orList(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
