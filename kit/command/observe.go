package command

import (
	"context"
	"io"
	"log/slog"
	"os"

	"hubu.dev/hubu/kit/tracing"
)

// NewLogger is the JSON logger a serving binary writes to w (its stderr): every record names
// the service and, when logged with a context inside a span, the trace and span (see
// tracing.LogHandler). Log with the context on request paths: logger.InfoContext(ctx, ...).
func NewLogger(w io.Writer, service string) *slog.Logger {
	return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, nil))).With("service", service)
}

// StartTracing sets up tracing for service (see tracing.Setup: off unless an OTLP endpoint is
// configured) with the SDK's own errors logged on logger. stop flushes the spans still queued,
// within tracing.ShutdownTimeout, and logs a flush that failed; call it once the server has
// stopped, so that the last requests' spans go too.
func StartTracing(ctx context.Context, service string, logger *slog.Logger) (stop func(), err error) {
	tracing.ReportErrorsTo(logger)
	shutdown, err := tracing.Setup(ctx, service)
	if err != nil {
		return nil, err
	}
	if tracing.Enabled(os.Getenv) {
		logger.Info("tracing on: spans are exported by OTLP over HTTP")
	}
	return func() {
		if err := shutdown(context.WithoutCancel(ctx)); err != nil {
			logger.Warn("tracing: could not flush the last spans", "err", err)
		}
	}, nil
}
