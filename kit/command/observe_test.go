package command

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A serving binary's log line names its service and, logged inside a span, the trace.
func TestNewLoggerNamesServiceAndTrace(t *testing.T) {
	var buf bytes.Buffer
	logger := NewLogger(&buf, "hubu")
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	logger.InfoContext(ctx, "decision handed off")
	span.End()
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["service"] != "hubu" || rec["trace_id"] != span.SpanContext().TraceID().String() {
		t.Fatalf("line %s", buf.String())
	}
}

// Tracing starts off without an OTLP endpoint, and says so only when it is on.
func TestStartTracing(t *testing.T) {
	collector := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer collector.Close()
	for _, endpoint := range []string{"", collector.URL} {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
		var buf bytes.Buffer
		stop, err := StartTracing(context.Background(), "hubu", NewLogger(&buf, "hubu"))
		if err != nil {
			t.Fatal(err)
		}
		stop()
		if on := strings.Contains(buf.String(), "tracing on"); on != (endpoint != "") {
			t.Errorf("endpoint %q: logged %q", endpoint, buf.String())
		}
	}
}
