package tracing

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps h so that every record logged with a context that carries a valid span
// (logger.InfoContext(ctx, ...)) names it: trace_id and span_id, as hex. A record logged
// without a context, or outside any span, is passed on as it is.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ next slog.Handler }

func (h logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.next.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.next.WithGroup(name)} }

// ReportErrorsTo has the OpenTelemetry SDK's own errors (an export that failed: the collector
// is down, say) logged as warnings on logger, at most one a minute, instead of written to
// stderr as plain text between the JSON lines.
func ReportErrorsTo(logger *slog.Logger) {
	var last atomic.Int64 // unix nanoseconds of the last error logged
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		now := time.Now().UnixNano()
		if prev := last.Load(); now-prev < int64(time.Minute) || !last.CompareAndSwap(prev, now) {
			return
		}
		logger.Warn("tracing: spans could not be exported or recorded; later errors within a minute are not logged", "err", err)
	}))
}
