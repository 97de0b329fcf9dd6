package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"hubu.dev/hubu/kit/buildinfo"
)

// exporter sends spans to a collector by OTLP/HTTP, protobuf-encoded (the OpenTelemetry
// protocol, opentelemetry-proto's collector/trace/v1 ExportTraceServiceRequest, POST to
// /v1/traces). It is this package's own rather than OpenTelemetry's otlptracehttp because that
// one links gRPC and its gateway (its generated collector package and its options are shared
// with the gRPC exporter): 8 MB of every binary, and 3–6 MB of the router's memory under
// make loadtest's 200 sessions whether tracing is on or off (docs/performance.md). The
// encoding (otlpwire.go) follows the .proto field by field; TestExporterEncodesAsOpenTelemetry decodes it
// with the official generated types and compares it with what OpenTelemetry's own transform
// makes of the same spans.
type exporter struct {
	url     string
	header  http.Header
	gzip    bool
	timeout time.Duration // bounds one export, its retries included
	client  *http.Client
	stopped atomic.Bool
}

// newExporter reads the standard OTLP exporter variables from getenv; the signal's own
// (OTEL_EXPORTER_OTLP_TRACES_*) wins over the general one. What it does not support it refuses,
// so that an operator is not left wondering why spans do not arrive.
func newExporter(getenv func(string) string) (*exporter, error) {
	get := func(name string) (string, string) {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
			return v, "OTEL_EXPORTER_OTLP_TRACES_" + name
		}
		return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name)), "OTEL_EXPORTER_OTLP_" + name
	}
	e := &exporter{header: http.Header{}, timeout: 10 * time.Second}

	if v, name := get("PROTOCOL"); v != "" && v != "http/protobuf" {
		return nil, fmt.Errorf("%s=%q: only http/protobuf is supported", name, v)
	}
	// The signal's URL is used as it is; the general one is a base URL, to whose path
	// /v1/traces is appended.
	name := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	target := strings.TrimSpace(getenv(name))
	if target == "" {
		name = "OTEL_EXPORTER_OTLP_ENDPOINT"
		target = strings.TrimSpace(getenv(name))
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The value is not repeated: an endpoint may carry credentials in its user info.
		return nil, fmt.Errorf("%s is not an http:// or https:// URL with a host", name)
	}
	if name == "OTEL_EXPORTER_OTLP_ENDPOINT" {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		u.RawPath = ""
	}
	e.url = u.String()

	if v, name := get("HEADERS"); v != "" {
		for _, pair := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(pair, "=")
			k, kerr := url.PathUnescape(strings.TrimSpace(k))
			val, verr := url.PathUnescape(strings.TrimSpace(val))
			if !ok || k == "" || kerr != nil || verr != nil {
				return nil, fmt.Errorf("%s: an entry is not key=value (URL-encoded), comma-separated", name)
			}
			e.header.Add(k, val)
		}
	}
	switch v, name := get("COMPRESSION"); v {
	case "", "none":
	case "gzip":
		e.gzip = true
	default:
		return nil, fmt.Errorf("%s=%q: gzip or none", name, v)
	}
	if v, name := get("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%s=%q: a number of milliseconds", name, v)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}

	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if path, name := get("CERTIFICATE"); path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		tlsConf.RootCAs = x509.NewCertPool()
		if !tlsConf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", name, path)
		}
	}
	certPath, certName := get("CLIENT_CERTIFICATE")
	keyPath, keyName := get("CLIENT_KEY")
	switch {
	case certPath != "" && keyPath != "":
		cert, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", certName, keyName, err)
		}
		tlsConf.Certificates = []tls.Certificate{cert}
	case certPath != "" || keyPath != "":
		return nil, fmt.Errorf("%s and %s go together", certName, keyName)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tlsConf
	e.client = &http.Client{Transport: t}
	e.header.Set("Content-Type", "application/x-protobuf")
	e.header.Set("User-Agent", "hubu/"+buildinfo.Read().Version+" OTLP exporter")
	if e.gzip {
		e.header.Set("Content-Encoding", "gzip")
	}
	return e, nil
}

// ExportSpans sends spans in one request. A collector that answers 429, 502, 503 or 504, or
// cannot be reached, is asked again (after its Retry-After, or a backoff from 100 ms up to
// 2 s) until the export's timeout; then the batch is dropped and the error returned.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Load() || len(spans) == 0 {
		return nil
	}
	body := appendRequest(nil, spans)
	if e.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	for {
		wait, err := e.send(ctx, body)
		if err == nil || wait < 0 {
			return err
		}
		if wait == 0 {
			wait, backoff = backoff, min(2*backoff, 2*time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-t.C:
		}
	}
}

// send makes one attempt. wait is how long to wait before the next (0: the backoff's turn),
// or negative when there must be none.
func (e *exporter) send(ctx context.Context, body []byte) (wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	req.Header = e.header.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("OTLP export: %w", err)
		}
		return 0, fmt.Errorf("OTLP export: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return 0, nil
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		return wait, fmt.Errorf("OTLP export: the collector answered %s", resp.Status)
	default:
		return -1, fmt.Errorf("OTLP export: the collector answered %s", resp.Status)
	}
}

// Shutdown stops exports; the spans still queued were flushed by the span processor before.
func (e *exporter) Shutdown(context.Context) error {
	e.stopped.Store(true)
	e.client.CloseIdleConnections()
	return nil
}

var _ sdktrace.SpanExporter = (*exporter)(nil)
