package opaplugins

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/stretchr/testify/require"
)

// TestLogger: OPA's messages reach slog at their level, below the
// handler's level they are not formatted, and WithFields adds its fields
// in key order without changing the logger it came from.
func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	require.Equal(t, logging.Info, l.GetLevel())
	l.SetLevel(logging.Debug) // slog's handler decides
	require.Equal(t, logging.Info, l.GetLevel())

	l.Debug("not %s", "shown")
	require.Empty(t, buf.String())
	l.WithFields(map[string]any{"z": 1, "a": "b"}).Warn("bundle %q", "x")
	l.Error("plain")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	require.Contains(t, lines[0], `level=WARN msg="bundle \"x\"" a=b z=1`)
	require.Contains(t, lines[1], `level=ERROR msg=plain`)
	require.NotContains(t, lines[1], "z=1")

	for level, want := range map[slog.Level]logging.Level{
		slog.LevelDebug: logging.Debug, slog.LevelWarn: logging.Warn, slog.LevelError: logging.Error,
	} {
		l := NewLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})))
		require.Equal(t, want, l.GetLevel(), level)
	}
}
