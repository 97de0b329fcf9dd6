package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"hubu.dev/hubu/kit/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

const opKey = "hubu:operation:v1:codex:7a0c5d8e-3f1b-4c2a-9e6d-1b2c3d4e5f60"

// recording installs, for one test, a provider that records every ended span, through the
// redaction, in memory. The tests that install one run one after another.
func recording(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := newProvider(sdktrace.NewSimpleSpanProcessor(exp), resource.Empty())
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return exp
}

func TestLogHandlerNamesTheSpan(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("service", "test")
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "work")
	sc := span.SpanContext()

	logger.InfoContext(ctx, "inside")
	logger.With("k", "v").WarnContext(ctx, "inside, with attributes")
	logger.InfoContext(context.Background(), "outside")
	logger.Info("no context")
	span.End()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	for i, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["service"] != "test" {
			t.Errorf("line %d lost the logger's attributes: %s", i, line)
		}
		inside := i < 2
		if got := rec["trace_id"]; inside && got != sc.TraceID().String() || !inside && got != nil {
			t.Errorf("line %d: trace_id %v (inside the span: %v): %s", i, got, inside, line)
		}
		if got := rec["span_id"]; inside && got != sc.SpanID().String() || !inside && got != nil {
			t.Errorf("line %d: span_id %v (inside the span: %v): %s", i, got, inside, line)
		}
	}
}

// A request through Transport to a Handler continues the caller's trace; the spans carry
// neither the Authorization header nor the query string; probes are not traced; Route names a
// span for its pattern.
func TestHandlerAndTransportContinueTheTrace(t *testing.T) {
	exp := recording(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /samples/{file}", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "png") })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	srv := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/chi-like/") {
			mux.ServeHTTP(w, r)
			return
		}
		// Routed as chi routes: the pattern is known inside the router only, which names the
		// span with Route.
		Route(r.Context(), r.Method, "/chi-like/{id}")
		w.WriteHeader(http.StatusAccepted)
	})))
	defer srv.Close()
	client := &http.Client{Transport: Transport(nil, "samples")}
	defer client.CloseIdleConnections()

	ctx, parent := Start(context.Background(), "test", "caller")
	do := func(method, path string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer secret-token-1234")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	do(http.MethodGet, "/samples/a.png?exp=99&sig=s3cr3tsig")
	do(http.MethodPost, "/chi-like/abc")
	parent.End()
	spans := exp.GetSpans()
	do(http.MethodGet, "/healthz")
	if n := len(exp.GetSpans()); n != len(spans)+1 {
		t.Errorf("a probe made %d spans, want only the client's", n-len(spans))
	}

	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		if s.SpanContext.TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %q is in another trace", s.Name)
		}
		byName[s.Name] = s
		scanForSecrets(t, s, "secret-token-1234", "s3cr3tsig")
	}
	// the caller, and a client and a server span for each request
	if len(spans) != 5 {
		t.Fatalf("%d spans, want 5: %v", len(spans), names(spans))
	}
	for _, want := range []struct{ client, server string }{{"GET samples", "GET /samples/{file}"}, {"POST samples", "POST /chi-like/{id}"}} {
		c, s := byName[want.client], byName[want.server]
		switch {
		case c.SpanKind != trace.SpanKindClient || c.Parent.SpanID() != parent.SpanContext().SpanID():
			t.Errorf("client span %q: kind %v, parent %v", want.client, c.SpanKind, c.Parent.SpanID())
		case s.SpanKind != trace.SpanKindServer || s.Parent.SpanID() != c.SpanContext.SpanID():
			t.Errorf("server span %q: kind %v, not the child of %q", want.server, s.SpanKind, want.client)
		}
	}
	if got := attr(byName["GET samples"].Attributes, "url.full"); got != srv.URL+"/samples/a.png" {
		t.Errorf("url.full = %q, want it without the query", got)
	}
	if got := attr(byName["POST /chi-like/{id}"].Attributes, "http.route"); got != "/chi-like/{id}" {
		t.Errorf("http.route = %q", got)
	}
}

func TestRedactsOperationKeysAndURLs(t *testing.T) {
	exp := recording(t)
	_, span := Start(context.Background(), "test", "authorize "+opKey,
		trace.WithAttributes(attribute.String("key", opKey), attribute.StringSlice("keys", []string{"fine", "x " + opKey}),
			attribute.String("url.full", "https://user:pw@cdn.example/a.png?sig=abc#frag"), attribute.String("url.query", "sig=abc"),
			attribute.String("public_handle", "hubu:public-operation:v1:7a0c5d8e-3f1b-4c2a-9e6d-1b2c3d4e5f60")))
	span.AddEvent("sent "+strings.ReplaceAll(opKey, ":", "%3A"), trace.WithAttributes(attribute.String("detail", opKey)))
	span.SetStatus(codes.Error, "refused "+opKey)
	span.End()

	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	scanForSecrets(t, s, "hubu:operation:v1:", "hubu%3Aoperation", "sig=abc", "pw@", "frag")
	want := map[string]string{"key": Redacted, "url.full": "https://cdn.example/a.png", "url.query": Redacted,
		"public_handle": "hubu:public-operation:v1:7a0c5d8e-3f1b-4c2a-9e6d-1b2c3d4e5f60"}
	for k, v := range want {
		if got := attr(s.Attributes, k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if s.Name != "authorize "+Redacted || s.Status.Description != "refused "+Redacted {
		t.Errorf("name %q, status %q", s.Name, s.Status.Description)
	}
	if !s.SpanContext.Equal(span.SpanContext()) {
		t.Error("the redacted span lost its identity")
	}
}

// With tracing off (no SDK provider), a request skips otelhttp (the handler gets net/http's own
// ResponseWriter, not otelhttp's wrapper), yet the trace still passes through: the server's
// context holds the caller's traceparent, so its log lines name it, and a request made for it
// carries the same trace on, without changing the caller's request.
func TestOffPassesTheTraceparentOn(t *testing.T) {
	otel.SetTracerProvider(noop.NewTracerProvider())
	otel.SetTextMapPropagator(propagation.TraceContext{})
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

	var gotDownstream string
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotDownstream = r.Header.Get("traceparent")
	}))
	defer downstream.Close()
	client := &http.Client{Transport: Transport(nil, "downstream")}
	defer client.CloseIdleConnections()

	var logs bytes.Buffer
	logger := slog.New(LogHandler(slog.NewJSONHandler(&logs, nil)))
	var forwarded *http.Request
	var writer string
	srv := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writer = fmt.Sprintf("%T", w)
		logger.InfoContext(r.Context(), "serving")
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, downstream.URL, nil)
		forwarded = req
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	})))
	defer srv.Close()

	for _, tc := range []struct{ traceparent, wantDownstream, wantLogged string }{
		{parent, parent, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"", "", ""},
		{"00-not-a-trace-01", "", ""},
	} {
		logs.Reset()
		gotDownstream = "unset"
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/work", nil)
		if tc.traceparent != "" {
			req.Header.Set("traceparent", tc.traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if writer != "*http.response" {
			t.Errorf("traceparent %q: the handler got a %s: the request went through otelhttp", tc.traceparent, writer)
		}
		if gotDownstream != tc.wantDownstream {
			t.Errorf("traceparent %q: downstream got %q, want %q", tc.traceparent, gotDownstream, tc.wantDownstream)
		}
		if h := forwarded.Header.Get("traceparent"); h != "" {
			t.Errorf("traceparent %q: the caller's request was changed: %q", tc.traceparent, h)
		}
		var rec map[string]any
		if err := json.Unmarshal(logs.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if got, _ := rec["trace_id"].(string); got != tc.wantLogged {
			t.Errorf("traceparent %q: logged trace_id %q, want %q", tc.traceparent, got, tc.wantLogged)
		}
	}
}

// Without an endpoint nothing is installed but the propagator; with one, spans reach it by
// OTLP over HTTP with the service's name and version.
func TestSetup(t *testing.T) {
	var mu sync.Mutex
	var got []*coltracepb.ExportTraceServiceRequest
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(r)
		req := &coltracepb.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(body, req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			t.Errorf("receiver: %s %v", r.URL.Path, err)
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	defer receiver.Close()

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	shutdown, err := Setup(context.Background(), "kit-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f := otel.GetTextMapPropagator().Fields(); len(f) != 2 || f[0] != "traceparent" {
		t.Errorf("off: propagator fields %v, want the W3C trace context", f)
	}

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.URL)
	shutdown, err = Setup(context.Background(), "kit-test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := Start(context.Background(), "test", "exported")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || len(got[0].ResourceSpans) != 1 {
		t.Fatalf("the receiver got %d requests", len(got))
	}
	rs := got[0].ResourceSpans[0]
	res := map[string]string{}
	for _, kv := range rs.Resource.Attributes {
		res[kv.Key] = kv.Value.GetStringValue()
	}
	if res["service.name"] != "kit-test" || res["service.version"] == "" {
		t.Errorf("resource %v", res)
	}
	if len(rs.ScopeSpans) != 1 || len(rs.ScopeSpans[0].Spans) != 1 || rs.ScopeSpans[0].Spans[0].Name != "exported" {
		t.Errorf("spans %v", rs.ScopeSpans)
	}
}

func readBody(r *http.Request) ([]byte, error) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		body = zr
	}
	return io.ReadAll(body)
}

// scanForSecrets fails when any text of s holds one of secrets.
func scanForSecrets(t *testing.T, s tracetest.SpanStub, secrets ...string) {
	t.Helper()
	texts := []string{s.Name, s.Status.Description}
	add := func(attrs []attribute.KeyValue) {
		for _, kv := range attrs {
			texts = append(texts, string(kv.Key)+"="+kv.Value.String())
		}
	}
	add(s.Attributes)
	for _, e := range s.Events {
		texts = append(texts, e.Name)
		add(e.Attributes)
	}
	for _, text := range texts {
		for _, secret := range secrets {
			if strings.Contains(strings.ToLower(text), strings.ToLower(secret)) {
				t.Errorf("span %q holds %q: %s", s.Name, secret, text)
			}
		}
	}
}

func attr(attrs []attribute.KeyValue, key string) string {
	for _, kv := range attrs {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}
