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

// Bounds on the trace-context values taken from _meta. A valid traceparent is 55 characters;
// W3C asks that a tracestate of more than 512 be cut, and a longer one is dropped here, so a
// harness cannot make the router parse more than that for a call.
const (
	maxTraceparent = 128
	maxTracestate  = 512
)

// callSpan is the server span of one tools/call.
type callSpan struct{ trace.Span }

// startCallSpan starts the span of a tools/call of tool. When the harness sent a W3C trace
// context in _meta (the string keys "traceparent" and "tracestate", as the MCP convention
// has it), the span continues that trace; a value that is missing, not a string, too long or
// malformed is ignored, and the span is then the child of whatever ctx carries (the HTTP
// request's span on streamable HTTP) or a new trace. The trace context is never identity and
// never decides whether a call is allowed; nothing else of _meta is read, and nothing of it
// is recorded.
func startCallSpan(ctx context.Context, tool string, req *mcp.CallToolRequest) (context.Context, callSpan) {
	if c := metaCarrier(metaOf(req)); len(c) > 0 {
		ctx = propagation.TraceContext{}.Extract(ctx, c)
	}
	ctx, span := tracing.Start(ctx, tracerName, "tools/call "+tool, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", tool)))
	return ctx, callSpan{span}
}

// metaCarrier holds the trace-context keys of meta, and nothing else of it.
func metaCarrier(meta map[string]any) propagation.MapCarrier {
	c := propagation.MapCarrier{}
	if tp, ok := meta["traceparent"].(string); ok && len(tp) <= maxTraceparent {
		c["traceparent"] = tp
		if ts, ok := meta["tracestate"].(string); ok && len(ts) <= maxTracestate {
			c["tracestate"] = ts
		}
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
