package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"

	"hubu.dev/hubu/kit/buildinfo"
)

// exporter sends spans to a collector by OTLP/HTTP, protobuf-encoded (the OpenTelemetry
// protocol, opentelemetry-proto's collector/trace/v1 ExportTraceServiceRequest, POST to
// /v1/traces). It is this package's own rather than OpenTelemetry's otlptracehttp because that
// one links gRPC and its gateway (its generated collector package and its options are shared
// with the gRPC exporter): 8 MB of every binary, and 3–6 MB of the router's memory under
// make loadtest's 200 sessions whether tracing is on or off (docs/performance.md). The
// encoding follows the .proto field by field; TestExporterEncodesAsOpenTelemetry decodes it
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

// The field numbers of opentelemetry-proto (v1) that appendRequest writes.
const (
	fieldRequestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	fieldResourceSpansResource   = 1 // ResourceSpans.resource
	fieldResourceSpansScopeSpans = 2
	fieldResourceSpansSchemaURL  = 3
	fieldResourceAttributes      = 1 // Resource.attributes

	fieldScopeSpansScope     = 1 // ScopeSpans.scope
	fieldScopeSpansSpans     = 2
	fieldScopeSpansSchemaURL = 3
	fieldScopeName           = 1 // InstrumentationScope.name
	fieldScopeVersion        = 2
	fieldScopeAttributes     = 3

	fieldSpanTraceID              = 1 // Span.trace_id
	fieldSpanSpanID               = 2
	fieldSpanTraceState           = 3
	fieldSpanParentSpanID         = 4
	fieldSpanName                 = 5
	fieldSpanKind                 = 6
	fieldSpanStart                = 7
	fieldSpanEnd                  = 8
	fieldSpanAttributes           = 9
	fieldSpanDroppedAttrs         = 10
	fieldSpanEvents               = 11
	fieldSpanDroppedEvents        = 12
	fieldSpanLinks                = 13
	fieldSpanDroppedLinks         = 14
	fieldSpanStatus               = 15
	fieldSpanFlags                = 16
	fieldEventTime                = 1 // Span.Event.time_unix_nano
	fieldEventName                = 2
	fieldEventAttributes          = 3
	fieldEventDroppedAttrs        = 4
	fieldLinkTraceID              = 1 // Span.Link.trace_id
	fieldLinkSpanID               = 2
	fieldLinkTraceState           = 3
	fieldLinkAttributes           = 4
	fieldLinkDroppedAttrs         = 5
	fieldLinkFlags                = 6
	fieldStatusMessage            = 2 // Status.message
	fieldStatusCode               = 3
	fieldKeyValueKey              = 1 // KeyValue.key
	fieldKeyValueValue            = 2
	fieldAnyString                = 1 // AnyValue's oneof value
	fieldAnyBool                  = 2
	fieldAnyInt                   = 3
	fieldAnyDouble                = 4
	fieldAnyArray                 = 5
	fieldAnyKVList                = 6
	fieldAnyBytes                 = 7
	fieldArrayValues              = 1 // ArrayValue.values
	fieldKVListValues             = 1 // KeyValueList.values
	spanFlagsHasIsRemote          = 0x100
	spanFlagsIsRemote             = 0x200
	statusCodeOK, statusCodeError = 1, 2
)

// appendRequest appends the ExportTraceServiceRequest of spans: one ResourceSpans per
// resource, one ScopeSpans in it per instrumentation scope, each in the order first seen.
func appendRequest(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	type group struct {
		first sdktrace.ReadOnlySpan
		spans []sdktrace.ReadOnlySpan
	}
	var resources []*group // by resource
	var scopes [][]*group  // by resource, then scope
	for _, s := range spans {
		if s == nil {
			continue
		}
		r := 0
		for r < len(resources) && resources[r].first.Resource().Equivalent() != s.Resource().Equivalent() {
			r++
		}
		if r == len(resources) {
			resources, scopes = append(resources, &group{first: s}), append(scopes, nil)
		}
		i := 0
		for i < len(scopes[r]) && scopes[r][i].first.InstrumentationScope() != s.InstrumentationScope() {
			i++
		}
		if i == len(scopes[r]) {
			scopes[r] = append(scopes[r], &group{first: s})
		}
		scopes[r][i].spans = append(scopes[r][i].spans, s)
	}
	for r, res := range resources {
		b = appendMessage(b, fieldRequestResourceSpans, func(b []byte) []byte {
			if attrs := res.first.Resource(); attrs != nil {
				b = appendMessage(b, fieldResourceSpansResource, func(b []byte) []byte {
					return appendKeyValues(b, fieldResourceAttributes, attrs.Attributes())
				})
			}
			for _, sc := range scopes[r] {
				b = appendMessage(b, fieldResourceSpansScopeSpans, func(b []byte) []byte {
					scope := sc.first.InstrumentationScope()
					if scope.Name != "" || scope.Version != "" || scope.SchemaURL != "" || scope.Attributes.Len() > 0 {
						b = appendMessage(b, fieldScopeSpansScope, func(b []byte) []byte {
							b = appendString(b, fieldScopeName, scope.Name)
							b = appendString(b, fieldScopeVersion, scope.Version)
							return appendKeyValues(b, fieldScopeAttributes, scope.Attributes.ToSlice())
						})
					}
					for _, s := range sc.spans {
						b = appendMessage(b, fieldScopeSpansSpans, func(b []byte) []byte { return appendSpan(b, s) })
					}
					return appendString(b, fieldScopeSpansSchemaURL, scope.SchemaURL)
				})
			}
			if res := res.first.Resource(); res != nil {
				b = appendString(b, fieldResourceSpansSchemaURL, res.SchemaURL())
			}
			return b
		})
	}
	return b
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, fieldSpanTraceID, tid[:])
	b = appendBytes(b, fieldSpanSpanID, sid[:])
	b = appendString(b, fieldSpanTraceState, sc.TraceState().String())
	if psid := s.Parent().SpanID(); psid.IsValid() {
		b = appendBytes(b, fieldSpanParentSpanID, psid[:])
	}
	b = appendString(b, fieldSpanName, s.Name())
	if k := s.SpanKind(); k >= trace.SpanKindInternal && k <= trace.SpanKindConsumer {
		b = appendVarint(b, fieldSpanKind, uint64(k)) // the same numbers in the API and the protocol
	}
	b = appendFixed64(b, fieldSpanStart, unixNano(s.StartTime()))
	b = appendFixed64(b, fieldSpanEnd, unixNano(s.EndTime()))
	b = appendKeyValues(b, fieldSpanAttributes, s.Attributes())
	b = appendVarint(b, fieldSpanDroppedAttrs, clampUint32(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		b = appendMessage(b, fieldSpanEvents, func(b []byte) []byte {
			b = appendFixed64(b, fieldEventTime, unixNano(ev.Time))
			b = appendString(b, fieldEventName, ev.Name)
			b = appendKeyValues(b, fieldEventAttributes, ev.Attributes)
			return appendVarint(b, fieldEventDroppedAttrs, clampUint32(ev.DroppedAttributeCount))
		})
	}
	b = appendVarint(b, fieldSpanDroppedEvents, clampUint32(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = appendMessage(b, fieldSpanLinks, func(b []byte) []byte {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendBytes(b, fieldLinkTraceID, ltid[:])
			b = appendBytes(b, fieldLinkSpanID, lsid[:])
			b = appendString(b, fieldLinkTraceState, l.SpanContext.TraceState().String())
			b = appendKeyValues(b, fieldLinkAttributes, l.Attributes)
			b = appendVarint(b, fieldLinkDroppedAttrs, clampUint32(l.DroppedAttributeCount))
			return appendFixed32(b, fieldLinkFlags, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	b = appendVarint(b, fieldSpanDroppedLinks, clampUint32(s.DroppedLinks()))
	status := s.Status()
	b = appendMessage(b, fieldSpanStatus, func(b []byte) []byte { // present even when unset, as OpenTelemetry's
		b = appendString(b, fieldStatusMessage, status.Description)
		switch status.Code {
		case codes.Ok:
			b = appendVarint(b, fieldStatusCode, statusCodeOK)
		case codes.Error:
			b = appendVarint(b, fieldStatusCode, statusCodeError)
		}
		return b
	})
	return appendFixed32(b, fieldSpanFlags, spanFlags(sc.TraceFlags(), s.Parent()))
}

// spanFlags are the W3C trace flags in the low byte, and whether parent is remote (which is
// always known here).
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | spanFlagsHasIsRemote
	if parent.IsRemote() {
		f |= spanFlagsIsRemote
	}
	return f
}

func appendKeyValues(b []byte, num protowire.Number, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = appendMessage(b, num, func(b []byte) []byte {
			b = appendString(b, fieldKeyValueKey, string(kv.Key))
			return appendMessage(b, fieldKeyValueValue, func(b []byte) []byte { return appendValue(b, kv.Value) })
		})
	}
	return b
}

// appendValue appends the AnyValue fields of v (none for an empty value).
func appendValue(b []byte, v attribute.Value) []byte {
	array := func(n int, each func(b []byte, i int) []byte) []byte {
		return appendMessage(b, fieldAnyArray, func(b []byte) []byte {
			for i := range n {
				b = appendMessage(b, fieldArrayValues, func(b []byte) []byte { return each(b, i) })
			}
			return b
		})
	}
	switch v.Type() {
	case attribute.BOOL:
		return protowire.AppendVarint(protowire.AppendTag(b, fieldAnyBool, protowire.VarintType), protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		return protowire.AppendVarint(protowire.AppendTag(b, fieldAnyInt, protowire.VarintType), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return protowire.AppendFixed64(protowire.AppendTag(b, fieldAnyDouble, protowire.Fixed64Type), math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return protowire.AppendString(protowire.AppendTag(b, fieldAnyString, protowire.BytesType), v.AsString())
	case attribute.BYTESLICE:
		return protowire.AppendBytes(protowire.AppendTag(b, fieldAnyBytes, protowire.BytesType), v.AsByteSlice())
	case attribute.BOOLSLICE:
		vs := v.AsBoolSlice()
		return array(len(vs), func(b []byte, i int) []byte { return appendValue(b, attribute.BoolValue(vs[i])) })
	case attribute.INT64SLICE:
		vs := v.AsInt64Slice()
		return array(len(vs), func(b []byte, i int) []byte { return appendValue(b, attribute.Int64Value(vs[i])) })
	case attribute.FLOAT64SLICE:
		vs := v.AsFloat64Slice()
		return array(len(vs), func(b []byte, i int) []byte { return appendValue(b, attribute.Float64Value(vs[i])) })
	case attribute.STRINGSLICE:
		vs := v.AsStringSlice()
		return array(len(vs), func(b []byte, i int) []byte { return appendValue(b, attribute.StringValue(vs[i])) })
	case attribute.SLICE:
		vs := v.AsSlice()
		return array(len(vs), func(b []byte, i int) []byte { return appendValue(b, vs[i]) })
	case attribute.MAP:
		return appendMessage(b, fieldAnyKVList, func(b []byte) []byte { return appendKeyValues(b, fieldKVListValues, v.AsMap()) })
	case attribute.EMPTY:
		return b
	default:
		return protowire.AppendString(protowire.AppendTag(b, fieldAnyString, protowire.BytesType), "INVALID")
	}
}

// appendMessage appends field num holding the message body writes.
func appendMessage(b []byte, num protowire.Number, body func([]byte) []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), body(nil))
}

// The scalar fields below are left out at their zero value, as proto3 does.

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), v)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), v)
}

func unixNano(t time.Time) uint64 { return uint64(max(0, t.UnixNano())) }

func clampUint32(v int) uint64 { return uint64(min(max(v, 0), math.MaxUint32)) }

var _ sdktrace.SpanExporter = (*exporter)(nil)
