// Package tracing is the binaries' OpenTelemetry tracing: off unless an OTLP endpoint is
// configured, and then one trace follows a spend from the router through Hubu and Gongbu to
// the provider and back.
//
// Off (neither OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set), no
// provider is installed: every span is OpenTelemetry's no-op one, nothing is recorded or sent,
// and HTTP requests skip the instrumentation altogether (see Handler). The W3C trace-context
// propagator is installed either way, so a traceparent that arrives on a request is passed on,
// unchanged, on the requests made for it, and log lines name its trace: a tracing collector
// further along can still join the trace.
//
// On, spans go by OTLP over HTTP (protobuf) through a batch span processor, sent by this
// package's exporter (otlp.go; its encoding, otlpwire.go), which reads the standard variables
// of an OTLP exporter: the endpoint, OTEL_EXPORTER_OTLP_HEADERS, _COMPRESSION, _TIMEOUT,
// _CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY, each also as OTEL_EXPORTER_OTLP_TRACES_*,
// and refuses a _PROTOCOL other than http/protobuf. Every standard variable of the batch processor, the sampler and the resource
// applies too (OTEL_BSP_SCHEDULE_DELAY, OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME, ...).
//
// What is never recorded: request and response headers (so no Authorization header or token),
// bodies, query strings (url.full is cut to scheme, host and path before export: a provider's
// sample URLs carry their signature there) and the MCP _meta. The spans this repository adds
// carry public handles and decision ids, never a private operation key; as a last line of
// defence, any text of the form of a private operation key (hubu:operation:v1:…) is replaced
// before a span is exported.
package tracing

import (
	"context"
	"errors"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"hubu.dev/hubu/kit/buildinfo"
)

// ShutdownTimeout bounds the flush of the spans still queued when a binary stops, where the
// caller's context sets no earlier deadline: a collector that is down must not hold up a
// shutdown.
const ShutdownTimeout = 5 * time.Second

// Enabled reports whether getenv configures an OTLP endpoint for traces.
func Enabled(getenv func(string) string) bool {
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the W3C trace-context propagator and, when the process's environment names
// an OTLP endpoint (see Enabled), a tracer provider that exports the spans of serviceName
// there. shutdown flushes what is queued and stops the exporter (bounded by ShutdownTimeout);
// with tracing off it does nothing. Call it once, early in main.
func Setup(ctx context.Context, serviceName string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	if !Enabled(os.Getenv) {
		return func(context.Context) error { return nil }, nil
	}
	exporter, err := newExporter(os.Getenv)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", serviceName), attribute.String("service.version", buildinfo.Read().Version)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the defaults above
		resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) { // partial: a malformed variable's other entries still apply
		return nil, err
	}
	tp := newProvider(sdktrace.NewBatchSpanProcessor(exporter), res)
	otel.SetTracerProvider(tp)
	return func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, ShutdownTimeout)
			defer cancel()
		}
		return tp.Shutdown(ctx)
	}, nil
}

// newProvider is a tracer provider whose ended spans pass through the redaction (see redact)
// on their way to next. Its sampler is the SDK's default, which OTEL_TRACES_SAMPLER may set:
// parent-based, so a caller that marks its trace as not sampled gets no spans recorded here.
func newProvider(next sdktrace.SpanProcessor, res *resource.Resource) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(&redactor{next: next}))
}

// Start starts a span named name of the instrumentation scope tracer (the package that makes
// it, such as "hubu.dev/hubu/services/gongbu/execution"), through the global provider as it is
// at the call: a no-op span when tracing is off.
func Start(ctx context.Context, tracer, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return otel.GetTracerProvider().Tracer(tracer).Start(ctx, name, opts...)
}
