package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// untraced are the paths that probes and scrapers call every few seconds; a span each would
// bury the requests that matter.
var untraced = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// Handler traces the requests h serves: a server span each, the child of the caller's span
// when the request carries a W3C traceparent header (the W3C propagator, whatever the global
// one is). The span is named for the method and,
// where net/http's ServeMux routed the request, its pattern; a chi router names it with Route.
// Headers (Authorization among them), bodies and query strings are never recorded.
//
// With tracing off (no SDK tracer provider installed, see on), a request skips otelhttp, whose
// attributes and metric options cost allocations on every request even with nothing to record:
// only the caller's traceparent is taken into the request's context, so that log lines name
// the trace and the requests made for it pass it on.
func Handler(h http.Handler) http.Handler {
	traced := otelhttp.NewHandler(h, "http.server", otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithFilter(func(r *http.Request) bool { return !untraced[r.URL.Path] }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if on() {
			traced.ServeHTTP(w, r)
			return
		}
		if r.Header.Get(traceparent) != "" && !untraced[r.URL.Path] {
			r = r.WithContext(propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		h.ServeHTTP(w, r)
	})
}

const traceparent = "Traceparent"

// on reports whether spans are recorded: whether the global tracer provider is the SDK's, as
// Setup installs when an OTLP endpoint is configured (and tests install to record spans).
func on() bool {
	_, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	return ok
}

// Route names the server span of ctx for the route pattern a router matched ("POST
// /v1/authorizations") and records it as http.route: a span named for its path would be named
// for the public handles and decision ids in it. Call it from the router's middleware once
// the route is known; an empty pattern (nothing matched) leaves the span as it is.
func Route(ctx context.Context, method, pattern string) {
	span := trace.SpanFromContext(ctx)
	if pattern == "" || !span.IsRecording() {
		return
	}
	span.SetName(method + " " + pattern)
	span.SetAttributes(attribute.String("http.route", pattern))
}

// Transport traces the requests made through base (http.DefaultTransport when nil): a client
// span each, named for the method and peer (the service called, such as "hubu"), whose
// context goes along in the traceparent header. With tracing off, a request skips otelhttp
// and carries only the traceparent of the span its context holds, if any.
func Transport(base http.RoundTripper, peer string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{
		traced: otelhttp.NewTransport(base, otelhttp.WithPropagators(propagation.TraceContext{}),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + peer }),
			otelhttp.WithSpanOptions(trace.WithAttributes(attribute.String("peer.service", peer)))),
		base: base,
	}
}

type transport struct {
	traced *otelhttp.Transport
	base   http.RoundTripper
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if on() {
		return t.traced.RoundTrip(r)
	}
	if trace.SpanContextFromContext(r.Context()).IsValid() {
		r = r.Clone(r.Context()) // a RoundTripper must not change the caller's request
		propagation.TraceContext{}.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	}
	return t.base.RoundTrip(r)
}

// CloseIdleConnections reaches the wrapped transport, as http.Client expects of one.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
