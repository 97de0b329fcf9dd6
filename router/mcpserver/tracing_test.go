package mcpserver_test

import (
	"maps"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"hubu.dev/hubu/kit/tracing/tracingtest"
)

// recordSpans has the router's spans recorded in memory for one test; the tests that call it
// are not parallel (see tracingtest.Record).
func recordSpans(t *testing.T) *tracetest.InMemoryExporter { return tracingtest.Record(t) }

// callSpans are the tools/call spans of tool recorded so far.
func callSpans(exp *tracetest.InMemoryExporter, tool string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "tools/call "+tool {
			out = append(out, s)
		}
	}
	return out
}

func withMeta(base map[string]any, extra map[string]any) map[string]any {
	m := maps.Clone(base)
	maps.Copy(m, extra)
	return m
}

const (
	harnessTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	harnessSpan  = "00f067aa0ba902b7"
)

// A W3C traceparent in _meta makes the call's span its child; a tracestate beside it is not
// taken (opaque text of the harness's); the span records the tool and the outcome's codes, and
// nothing of _meta or the operation key.
func TestTraceparentInMetaIsTheParent(t *testing.T) {
	exp := recordSpans(t)
	e := setup(t, nil)
	meta := withMeta(codex("call_tr4ceParentUsedAsParent01"), map[string]any{
		"traceparent": "00-" + harnessTrace + "-" + harnessSpan + "-01", "tracestate": "harness=t61rcWkgMzE",
	})
	if o := toolResult(t, e.call(t, "generate_image", fox, meta)); o.Status != "succeeded" {
		t.Fatalf("the spend: %+v", o)
	}
	spans := callSpans(exp, "generate_image")
	if len(spans) != 1 {
		t.Fatalf("%d spans of the call, want 1", len(spans))
	}
	s := spans[0]
	switch {
	case s.SpanContext.TraceID().String() != harnessTrace:
		t.Errorf("trace %s, want the harness's %s", s.SpanContext.TraceID(), harnessTrace)
	case s.Parent.SpanID().String() != harnessSpan || !s.Parent.IsRemote():
		t.Errorf("parent %s (remote %v), want the harness's span %s", s.Parent.SpanID(), s.Parent.IsRemote(), harnessSpan)
	case s.SpanContext.TraceState().Len() != 0:
		t.Errorf("tracestate %q was taken from _meta", s.SpanContext.TraceState())
	case s.SpanKind != trace.SpanKindServer:
		t.Errorf("kind %v", s.SpanKind)
	}
	attrs := map[attribute.Key]string{}
	for _, kv := range s.Attributes {
		attrs[kv.Key] = kv.Value.String()
	}
	if attrs["gen_ai.tool.name"] != "generate_image" || attrs["hubu.status"] != "succeeded" || attrs["hubu.replayed"] != "false" {
		t.Errorf("attributes %v", attrs)
	}
	secrets := append(e.backend.Keys(), "call_tr4ceParentUsedAsParent01", "t61rcWkgMzE", "hubu:operation:v1:")
	for k, v := range attrs {
		for _, secret := range secrets {
			if strings.Contains(v, secret) {
				t.Errorf("attribute %s holds %q", k, secret)
			}
		}
	}

	// A redelivery continues the trace it is sent in, and says it was replayed.
	meta["traceparent"] = "00-" + harnessTrace + "-b7ad6b7169203331-01"
	e.call(t, "generate_image", fox, meta)
	spans = callSpans(exp, "generate_image")
	if len(spans) != 2 || spans[1].Parent.SpanID().String() != "b7ad6b7169203331" || attr(spans[1], "hubu.replayed") != "true" {
		t.Errorf("the redelivery's span: %+v", spans[len(spans)-1])
	}
}

// A malformed trace context is ignored: the call goes on as it would without one, in a trace
// of its own.
func TestMalformedTraceparentIsIgnored(t *testing.T) {
	exp := recordSpans(t)
	e := setup(t, nil)
	for i, bad := range []any{
		"00-" + harnessTrace + "-" + harnessSpan,                                     // no flags
		"00-00000000000000000000000000000000-" + harnessSpan + "-01",                 // all-zero trace id
		"ff-" + harnessTrace + "-" + harnessSpan + "-01",                             // the forbidden version
		"00-" + strings.ToUpper(harnessTrace) + "-" + harnessSpan + "-01",            // W3C's hex is lower-case
		"00-" + harnessTrace + "-" + harnessSpan + "-01" + strings.Repeat("-x", 200), // longer than the router reads
		42.0,
		map[string]any{"trace_id": harnessTrace},
	} {
		callID := "call_malformedTraceparent0" + string(rune('a'+i))
		res := e.call(t, "generate_image", fox, withMeta(codex(callID), map[string]any{"traceparent": bad, "tracestate": "x=y"}))
		if o := toolResult(t, res); res.IsError || o.Status != "succeeded" {
			t.Fatalf("traceparent %v: the spend %+v", bad, o)
		}
		spans := callSpans(exp, "generate_image")
		if len(spans) != i+1 {
			t.Fatalf("traceparent %v: %d spans", bad, len(spans))
		}
		s := spans[i]
		if s.Parent.IsValid() || s.SpanContext.TraceID().String() == harnessTrace || s.SpanContext.TraceState().Len() != 0 {
			t.Errorf("traceparent %v: the span has parent %v in trace %s, tracestate %q; want a trace of its own",
				bad, s.Parent.SpanID(), s.SpanContext.TraceID(), s.SpanContext.TraceState())
		}
	}
}

// A trace context is never identity: with nothing else in _meta the spend is refused for
// want of identity, and the refusal is traced in the harness's trace with its code.
func TestTraceparentIsNeverIdentity(t *testing.T) {
	exp := recordSpans(t)
	e := setup(t, nil)
	res := e.call(t, "generate_image", fox, map[string]any{"traceparent": "00-" + harnessTrace + "-" + harnessSpan + "-01"})
	mustError(t, res, "identity_required")
	if n := len(e.backend.Keys()); n != 0 {
		t.Fatalf("%d authorizations", n)
	}
	spans := callSpans(exp, "generate_image")
	if len(spans) != 1 || spans[0].SpanContext.TraceID().String() != harnessTrace || attr(spans[0], "hubu.error.code") != "identity_required" {
		t.Fatalf("spans %+v", spans)
	}
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
