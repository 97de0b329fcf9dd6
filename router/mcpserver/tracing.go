package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"hubu.dev/hubu/kit/tracing"
)

// tracerName is the instrumentation scope of the router's spans.
const tracerName = "hubu.dev/hubu/router/mcpserver"

// maxTraceparent bounds the traceparent taken from _meta (a valid one is 55 characters), so
// that a harness cannot make the router parse more than that for a call.
const maxTraceparent = 128

// callSpan is the server span of one tools/call.
type callSpan struct{ trace.Span }

// startCallSpan starts the span of a tools/call of tool. When the harness sent a W3C
// traceparent in _meta (a string key, as the MCP convention has it), the span continues that
// trace; a value that is missing, not a string, too long or malformed is ignored, and the span
// is then the child of whatever ctx carries (the HTTP request's span on streamable HTTP) or a
// new trace. The trace context is never identity and never decides whether a call is allowed;
// nothing else of _meta is read (a tracestate neither), and nothing of it is recorded.
func startCallSpan(ctx context.Context, tool string, req *mcp.CallToolRequest) (context.Context, callSpan) {
	if c := metaCarrier(metaOf(req)); len(c) > 0 {
		ctx = propagation.TraceContext{}.Extract(ctx, c)
	}
	ctx, span := tracing.Start(ctx, tracerName, "tools/call "+tool, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", tool)))
	return ctx, callSpan{span}
}

// metaCarrier holds the traceparent of meta, and nothing else of it. A tracestate is left
// out: it is opaque text of the harness's, which the router would otherwise send on to every
// service and provider it calls for the spend and record in every span.
func metaCarrier(meta map[string]any) propagation.MapCarrier {
	c := propagation.MapCarrier{}
	if tp, ok := meta["traceparent"].(string); ok && len(tp) <= maxTraceparent {
		c["traceparent"] = tp
	}
	return c
}

// end records how the call came out, by its codes only (never a message, handle or key), and
// ends the span. A backend the router could not reach marks the span as an error; a refusal
// or a policy outcome is the tool working as it should.
func (s callSpan) end(res *mcp.CallToolResult) {
	defer s.End()
	if !s.IsRecording() || res == nil {
		return
	}
	tr, ok := res.StructuredContent.(ToolResult)
	if !ok {
		return
	}
	s.SetAttributes(attribute.String("hubu.status", tr.Status), attribute.Bool("hubu.replayed", tr.Replayed))
	if tr.Error != nil {
		s.SetAttributes(attribute.String("hubu.error.code", tr.Error.Code))
		if tr.Error.Code == CodeBackendUnavailable {
			s.SetStatus(codes.Error, tr.Error.Code)
		}
	}
}
