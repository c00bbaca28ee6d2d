package wiring

import (
	"io"
	"log/slog"
	"strings"

	"github.com/flowd/flowd/internal/telemetry"
)

// NewLogger returns the JSON logger every command writes to stderr.
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(strings.ToUpper(level)))
	return slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})))
}
