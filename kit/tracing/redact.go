package tracing

import (
	"context"
	"net/url"
	"regexp"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Redacted replaces what a span must not carry.
const Redacted = "[redacted]"

// operationKey matches the form of a private operation key (hubu:operation:v1:<platform>:<id>),
// also percent-encoded, whoever wrote it where.
var operationKey = regexp.MustCompile(`(?i)hubu(?::|%3a)operation(?::|%3a)v1(?::|%3a)[A-Za-z0-9._:%-]*`)

// redactor cuts what no span may carry out of every ended span before next (the batch
// processor, and so the exporter) sees it. otelhttp sets url.full, query string included,
// after a client span has started, so only the ended span can be cleaned.
type redactor struct{ next sdktrace.SpanProcessor }

func (r *redactor) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) { r.next.OnStart(ctx, s) }
func (r *redactor) Shutdown(ctx context.Context) error                    { return r.next.Shutdown(ctx) }
func (r *redactor) ForceFlush(ctx context.Context) error                  { return r.next.ForceFlush(ctx) }

func (r *redactor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !needsRedaction(s) {
		r.next.OnEnd(s)
		return
	}
	r.next.OnEnd(redact(s))
}

// needsRedaction is the cheap check that spares the copy of a span with nothing to redact,
// which is almost every span.
func needsRedaction(s sdktrace.ReadOnlySpan) bool {
	if hasKey(s.Name()) || hasKey(s.Status().Description) || anyAttr(s.Attributes()) {
		return true
	}
	for _, e := range s.Events() {
		if hasKey(e.Name) || anyAttr(e.Attributes) {
			return true
		}
	}
	for _, l := range s.Links() {
		if anyAttr(l.Attributes) {
			return true
		}
	}
	return false
}

func anyAttr(attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		if redactAttr(kv) != kv {
			return true
		}
	}
	return false
}

func hasKey(s string) bool { return operationKey.MatchString(s) }

// redact is a copy of s with its name, status, attributes, events and links redacted.
func redact(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	stub := tracetest.SpanStubFromReadOnlySpan(s)
	stub.Name = redactText(stub.Name)
	stub.Status.Description = redactText(stub.Status.Description)
	stub.Attributes = redactAttrs(stub.Attributes)
	events := make([]sdktrace.Event, len(stub.Events))
	for i, e := range stub.Events {
		e.Name, e.Attributes = redactText(e.Name), redactAttrs(e.Attributes)
		events[i] = e
	}
	stub.Events = events
	links := make([]sdktrace.Link, len(stub.Links))
	for i, l := range stub.Links {
		l.Attributes = redactAttrs(l.Attributes)
		links[i] = l
	}
	stub.Links = links
	return stub.Snapshot()
}

func redactAttrs(attrs []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(attrs))
	for i, kv := range attrs {
		out[i] = redactAttr(kv)
	}
	return out
}

// redactAttr is kv fit to export: a URL without its query, fragment and user information, a
// query string not at all, and no text in the form of a private operation key.
func redactAttr(kv attribute.KeyValue) attribute.KeyValue {
	switch kv.Value.Type() {
	case attribute.STRING:
		v := kv.Value.AsString()
		switch kv.Key {
		case "url.full", "http.url":
			v = bareURL(v)
		case "url.query":
			if v != "" {
				v = Redacted
			}
		}
		return kv.Key.String(redactText(v))
	case attribute.STRINGSLICE:
		vs := kv.Value.AsStringSlice()
		changed := false
		for i, v := range vs {
			if r := redactText(v); r != v {
				vs[i], changed = r, true
			}
		}
		if changed {
			return kv.Key.StringSlice(vs)
		}
	}
	return kv
}

func redactText(s string) string {
	if !hasKey(s) {
		return s
	}
	return operationKey.ReplaceAllString(s, Redacted)
}

// bareURL is u's scheme, host and path: a query may hold a signature (the provider's sample
// URLs do), user information a password.
func bareURL(u string) string {
	if !strings.ContainsAny(u, "?#@") {
		return u
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return Redacted
	}
	parsed.User, parsed.RawQuery, parsed.ForceQuery, parsed.Fragment, parsed.RawFragment = nil, "", false, "", ""
	return parsed.String()
}
