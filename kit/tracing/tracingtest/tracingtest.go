// Package tracingtest records the spans a test makes.
package tracingtest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

// Record installs, until the test ends, a global tracer provider that keeps every ended span
// in memory, and returns where they are kept; the test's end puts a no-op provider back
// (tracing off). Code starts its spans through the global provider, so a test that records
// must not run in parallel with others that make spans: Go runs a package's parallel tests
// only after its other tests.
func Record(t testing.TB) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		_ = tp.Shutdown(context.Background())
	})
	return exp
}
