package opaplugins

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/open-policy-agent/opa/v1/logging"
)

// NewLogger adapts l to OPA's logging.Logger, for its plugin manager and
// plugins: OPA's messages go to l at their level.
func NewLogger(l *slog.Logger) logging.Logger { return opaLogger{l: l} }

// opaLogger adapts slog to OPA's logging.Logger.
type opaLogger struct {
	l      *slog.Logger
	fields []any
}

func (o opaLogger) log(level slog.Level, format string, a ...any) {
	if o.l.Enabled(context.Background(), level) {
		o.l.Log(context.Background(), level, fmt.Sprintf(format, a...), o.fields...)
	}
}

func (o opaLogger) Debug(f string, a ...any) { o.log(slog.LevelDebug, f, a...) }
func (o opaLogger) Info(f string, a ...any)  { o.log(slog.LevelInfo, f, a...) }
func (o opaLogger) Warn(f string, a ...any)  { o.log(slog.LevelWarn, f, a...) }
func (o opaLogger) Error(f string, a ...any) { o.log(slog.LevelError, f, a...) }

func (o opaLogger) WithFields(m map[string]any) logging.Logger {
	out := opaLogger{l: o.l, fields: append([]any(nil), o.fields...)}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.fields = append(out.fields, k, m[k])
	}
	return out
}

func (o opaLogger) GetLevel() logging.Level {
	ctx := context.Background()
	switch {
	case o.l.Enabled(ctx, slog.LevelDebug):
		return logging.Debug
	case o.l.Enabled(ctx, slog.LevelInfo):
		return logging.Info
	case o.l.Enabled(ctx, slog.LevelWarn):
		return logging.Warn
	}
	return logging.Error
}

func (o opaLogger) SetLevel(logging.Level) {}
