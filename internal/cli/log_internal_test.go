package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNewLoggerLevelsAndFormats: --log-level drops what is less severe,
// -v logs debug, and --log-format json writes one object a line.
func TestNewLoggerLevelsAndFormats(t *testing.T) {
	for _, tc := range []struct {
		level   string
		verbose bool
		want    []string // the messages kept of debug, info, warn, error
	}{
		{"info", false, []string{"i", "w", "e"}},
		{"debug", false, []string{"d", "i", "w", "e"}},
		{"warn", false, []string{"w", "e"}},
		{"error", false, []string{"e"}},
		{"info", true, []string{"d", "i", "w", "e"}},
	} {
		for _, format := range []string{"text", "json"} {
			var buf bytes.Buffer
			l, err := newLogger(&buf, format, tc.level, tc.verbose, false)
			require.NoError(t, err)
			l.Debug("d")
			l.Info("i")
			l.Warn("w")
			l.Error("e")
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if line == "" {
					continue
				}
				if format == "json" {
					var rec struct{ Msg string }
					require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
					got = append(got, rec.Msg)
					continue
				}
				_, msg, ok := strings.Cut(line, " msg=")
				require.True(t, ok, line)
				got = append(got, msg)
			}
			require.Equal(t, tc.want, got, "%s, %s, -v %v", tc.level, format, tc.verbose)
		}
	}
}
