package execution

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"hubu.dev/hubu/kit/tracing/tracingtest"
	"hubu.dev/hubu/services/gongbu"
)

// The steps of an execution that run after its request (no span in their context, or a
// webhook's of another trace) are spans in the trace where the execution began; a step inside
// that trace stays where it is; once the execution is forgotten, a step starts a trace of its
// own. Not parallel: the spans go through the global tracer provider.
func TestLaterStepsJoinTheTraceWhereTheExecutionBegan(t *testing.T) {
	exp := tracingtest.Record(t)
	tracer := otel.Tracer("test")
	s := &Service{}
	exec := gongbu.Execution{Decision: gongbu.Decision{DecisionID: uuid.New(), PublicHandle: "hubu:public-operation:v1:" + uuid.NewString()}}

	s.traces.remember(context.Background(), exec.DecisionID) // no span: nothing to remember
	if _, ok := s.traces.lookup(exec.DecisionID); ok {
		t.Fatal("remembered a context without a span")
	}
	request, began := tracer.Start(context.Background(), "POST /v1/executions")
	s.traces.remember(request, exec.DecisionID)
	began.End()

	step := func(ctx context.Context) tracetest.SpanStub {
		t.Helper()
		_, span := s.startSpan(ctx, "gongbu.poll", exec)
		span.End()
		spans := exp.GetSpans()
		return spans[len(spans)-1]
	}
	// The watcher's goroutine: no span.
	if got := step(context.Background()); got.Parent.SpanID() != began.SpanContext().SpanID() || got.SpanContext.TraceID() != began.SpanContext().TraceID() {
		t.Errorf("a step without a span: parent %s, want the execution's request", got.Parent.SpanID())
	}
	// A webhook's request, in a trace of its own: the step is the execution's, linked to it.
	webhook, hook := tracer.Start(context.Background(), "POST /v1/webhooks/{provider}")
	got := step(webhook)
	hook.End()
	if got.Parent.SpanID() != began.SpanContext().SpanID() || len(got.Links) != 1 || got.Links[0].SpanContext.SpanID() != hook.SpanContext().SpanID() {
		t.Errorf("a webhook's step: parent %s, links %v", got.Parent.SpanID(), got.Links)
	}
	// A step inside the trace (the report, inside the poll) stays the child of its caller.
	inside, poll := tracer.Start(trace.ContextWithSpanContext(context.Background(), began.SpanContext()), "gongbu.poll")
	if got := step(inside); got.Parent.SpanID() != poll.SpanContext().SpanID() || len(got.Links) != 0 {
		t.Errorf("a step inside the trace: parent %s, want its caller", got.Parent.SpanID())
	}
	poll.End()

	s.traces.forget(exec.DecisionID)
	if got := step(context.Background()); got.Parent.IsValid() || got.SpanContext.TraceID() == began.SpanContext().TraceID() {
		t.Errorf("a step of a forgotten execution: parent %s in trace %s", got.Parent.SpanID(), got.SpanContext.TraceID())
	}
}

func TestOriginsAreBounded(t *testing.T) {
	t.Parallel()
	var o origins
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	for range maxOrigins {
		o.remember(ctx, uuid.New())
	}
	extra := uuid.New()
	o.remember(ctx, extra)
	if _, ok := o.lookup(extra); ok || len(o.m) != maxOrigins {
		t.Fatalf("full: %d kept, the one past the bound remembered %v", len(o.m), ok)
	}
	// An entry past its time makes room for a new one when the memory is full.
	expire := func() uuid.UUID {
		for id, v := range o.m {
			if id != extra {
				v.at = v.at.Add(-originTTL - time.Minute)
				o.m[id] = v
				return id
			}
		}
		return uuid.Nil
	}
	gone := expire()
	o.remember(ctx, extra)
	if _, ok := o.lookup(extra); !ok || len(o.m) != maxOrigins {
		t.Fatalf("an expired entry did not make room: %d kept", len(o.m))
	}
	if _, ok := o.m[gone]; ok {
		t.Fatal("the expired entry is still kept")
	}
	// And is not found even while it is kept.
	if _, ok := o.lookup(expire()); ok {
		t.Fatal("an expired entry was found")
	}
}
