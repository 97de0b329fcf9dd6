package execution

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"hubu.dev/hubu/kit/tracing"
	"hubu.dev/hubu/services/gongbu"
)

// tracerName is the instrumentation scope of the executions' spans.
const tracerName = "hubu.dev/hubu/services/gongbu/execution"

// An execution's work runs on several goroutines after the request that started it has been
// answered: the watcher's polls, a poll a provider's webhook asks for, the background pass's
// polls and resubmissions, the report to Hubu. So that one trace still follows the spend,
// this process remembers, per decision, the span of the request that started its execution
// (Hubu's hand-off), and every later step of the execution is a span in that trace. A step
// that arrives on a request of another trace (the provider's webhook) links to it.
//
// The memory is this process's only: after a restart, or in another replica that takes an
// execution over, the background pass's steps start a trace of their own. An entry goes when
// the outcome is reported, and in any case after originTTL; at most maxOrigins are kept, and
// beyond that a new execution's later steps start traces of their own.
const (
	originTTL  = time.Hour
	maxOrigins = 10_000
)

// origins is the memory; its zero value is empty and ready.
type origins struct {
	mu sync.Mutex
	m  map[uuid.UUID]origin
}

type origin struct {
	span trace.SpanContext
	at   time.Time
}

// remember keeps the span of ctx, when it has one, as where the execution of id began.
func (o *origins) remember(ctx context.Context, id uuid.UUID) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[uuid.UUID]origin{}
	}
	if len(o.m) >= maxOrigins {
		for k, v := range o.m {
			if now.Sub(v.at) > originTTL {
				delete(o.m, k)
			}
		}
		if len(o.m) >= maxOrigins {
			return
		}
	}
	o.m[id] = origin{span: sc, at: now}
}

func (o *origins) lookup(id uuid.UUID) (trace.SpanContext, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v, ok := o.m[id]
	if ok && time.Since(v.at) > originTTL {
		delete(o.m, id)
		return trace.SpanContext{}, false
	}
	return v.span, ok
}

func (o *origins) forget(id uuid.UUID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, id)
}

// startSpan starts the span of a step of exec's execution. Its parent is the span of ctx when
// that is in the trace where the execution began, or when this process does not know where it
// began; otherwise it is the span where it began, and the span of ctx, if any, is a link. Its
// attributes are the public handle and the decision id (never the vendor key) and attrs.
func (s *Service) startSpan(ctx context.Context, name string, exec gongbu.Execution, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	var opts []trace.SpanStartOption
	if began, ok := s.traces.lookup(exec.DecisionID); ok {
		if cur := trace.SpanContextFromContext(ctx); cur.TraceID() != began.TraceID() {
			if cur.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: cur}))
			}
			ctx = trace.ContextWithSpanContext(ctx, began)
		}
	}
	attrs = append(attrs, attribute.String("hubu.public_handle", exec.PublicHandle), attribute.String("hubu.decision_id", exec.DecisionID.String()))
	return tracing.Start(ctx, tracerName, name, append(opts, trace.WithAttributes(attrs...))...)
}

// recordPoll says on a poll's span what the provider answered: the job's status, or that the
// poll failed.
func recordPoll(span trace.Span, res gongbu.PollResult, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "poll failed")
		return
	}
	span.SetAttributes(attribute.String("gongbu.job_status", pollResults[res.Status]))
}
