package e2e_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"hubu.dev/hubu/e2e/otlpsink"
	harness "hubu.dev/hubu/e2e/stack"
)

// The services' names in their spans' resource (service.name).
const (
	svcRouter   = "hubu-unified-mcp"
	svcHubu     = "hubu"
	svcGongbu   = "gongbu"
	svcMockflux = "mockflux"
)

// One spend, traced end to end: the harness sends a traceparent in _meta, and every process
// exports its spans by OTLP/HTTP to a receiver in this test. The whole spend is one trace, a
// tree under the harness's span: the router's call, Hubu's authorization and its hand-off to
// Gongbu, Gongbu's execution, its submission to the provider and its polls (mockflux serving
// each), and its report back to Hubu, each the child of the step that caused it, also where
// that step ran on another goroutine after its request was answered. No span holds a token, a
// private operation key or anything of _meta, and the processes' log lines name the trace.
func TestTracingFollowsASpend(t *testing.T) {
	t.Parallel()
	rec := startReceiver(t, nil)
	otelEnv := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rec.url, "OTEL_BSP_SCHEDULE_DELAY=100"} // export every 100 ms
	server, id, dir, idConfig := stackPlace(t)
	su := startSuite(t, harness.Config{
		Dir: dir, ServerURL: server, HubuDB: "hubu_trace_" + id, GongbuDB: "gongbu_trace_" + id, FluxIdempotent: true,
		Env: map[string][]string{"router": append([]string{"ROUTER_IDENTITY_CONFIG=" + idConfig}, otelEnv...), "hubu": otelEnv, "gongbu": otelEnv, "mockflux": otelEnv},
	})
	cs := su.router(otelEnv...)

	harnessTrace, harnessSpan := randomHex(16), randomHex(8)
	callID := "call_tr4ceE2eSpendFollowed01"
	meta := codexMeta(callID)
	meta["traceparent"] = "00-" + harnessTrace + "-" + harnessSpan + "-01"
	su.mustSucceed(cs, foxArgs, meta, "the traced spend")

	var tree *spanTree
	err := poll(30*time.Second, 100*time.Millisecond, func() error {
		tree = rec.tree(harnessTrace)
		return tree.check(harnessSpan)
	})
	if err != nil {
		t.Fatalf("after 30s: %v\n%s", err, tree)
	}
	t.Logf("the spend's trace:\n%s", tree)

	// Nothing any process exported (in this trace or another) holds a secret or _meta.
	c := su.s.Credentials
	secrets := []string{c.OperatorToken, c.GongbuAtHubuToken, c.HubuAtGongbuToken, c.RouterMCPToken, c.AgentToken, c.FluxKey, c.WebhookKey,
		"hubu:operation:v1:", "hubu%3Aoperation%3Av1", callID, "item-" + callID, "thread-e2e-0b7c5d2a", "sess-e2e", meta["traceparent"].(string),
		"_meta", "callId", "progressToken", "&sig="} // "&sig=": a signed sample URL
	for i, text := range rec.texts() {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("export %d holds %.24q", i, s)
			}
		}
	}

	// Each process logged the spend's trace id on a line of the spend's work.
	for _, log := range []string{"router-stdio", "hubu", "gongbu", "mockflux"} {
		lines, _, err := harness.LogLines(filepath.Join(dir, log+".log"))
		noError(t, err)
		if !slices.ContainsFunc(lines, func(l map[string]any) bool { return l["trace_id"] == harnessTrace }) {
			t.Errorf("no line of %s.log names the trace %s", log, harnessTrace)
		}
	}
}

// Without OTEL_EXPORTER_OTLP_ENDPOINT nothing is exported, not even to the exporter's default
// address, where a receiver listens for this test; the harness's trace context is still passed
// on, so the log lines of the processes it reaches name its trace.
func TestTracingOffExportsNothing(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:4318")
	if err != nil {
		t.Fatalf("127.0.0.1:4318, where an OTLP/HTTP exporter sends by default, must be free for this test (is a collector running?): %v", err)
	}
	// Counted by connection: with no endpoint set, the exporter's default is HTTPS.
	conns := &countingListener{Listener: ln}
	rec := startReceiver(t, conns)
	server, id, dir, idConfig := stackPlace(t)
	su := startSuite(t, harness.Config{
		Dir: dir, ServerURL: server, HubuDB: "hubu_notrace_" + id, GongbuDB: "gongbu_notrace_" + id, FluxIdempotent: true,
		Env: map[string][]string{"router": {"ROUTER_IDENTITY_CONFIG=" + idConfig}},
	})
	cs := su.router()
	harnessTrace := randomHex(16)
	meta := codexMeta("call_n0TracingButPassedOn01")
	meta["traceparent"] = "00-" + harnessTrace + "-" + randomHex(8) + "-01"
	su.mustSucceed(cs, foxArgs, meta, "the spend")

	// Stopping flushes whatever an exporter holds: had any process one, it has sent it now.
	noError(t, cs.Close())
	su.s.Stop()
	if n, c := rec.requests(), conns.accepted.Load(); n != 0 || c != 0 {
		t.Fatalf("with tracing off the processes sent %d exports over %d connections", n, c)
	}
	for _, log := range []string{"router-stdio", "hubu"} {
		lines, _, err := harness.LogLines(filepath.Join(dir, log+".log"))
		noError(t, err)
		if !slices.ContainsFunc(lines, func(l map[string]any) bool { return l["trace_id"] == harnessTrace }) {
			t.Errorf("no line of %s.log names the harness's trace %s, passed on with tracing off", log, harnessTrace)
		}
	}
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

func randomHex(n int) string { return otlpsink.RandomHex(n) }

// receiver is an OTLP/HTTP trace receiver serving for one test.
type receiver struct {
	*otlpsink.Sink
	url string
}

// startReceiver serves a receiver on ln, or on a free loopback port when ln is nil, until the
// test ends.
func startReceiver(t *testing.T, ln net.Listener) *receiver {
	t.Helper()
	r := &receiver{Sink: &otlpsink.Sink{}}
	srv := httptest.NewUnstartedServer(r.Sink)
	if ln != nil {
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Start()
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *receiver) requests() int { return len(r.Exports()) }

// texts are the exports as JSON: every name, attribute, event, link and status of every span,
// and the resources, for the secret scan.
func (r *receiver) texts() []string {
	var out []string
	for _, e := range r.Exports() {
		b, _ := protojson.Marshal(e)
		out = append(out, string(b))
	}
	return out
}

// tree is the spans received so far of the trace with the hex id traceID.
func (r *receiver) tree(traceID string) *spanTree {
	tr := &spanTree{byID: map[string]span{}}
	for _, s := range r.Trace(traceID) {
		sp := span{Span: s.Span, service: s.Service, id: hex.EncodeToString(s.SpanId), parent: hex.EncodeToString(s.ParentSpanId)}
		tr.spans = append(tr.spans, sp)
		tr.byID[sp.id] = sp
	}
	return tr
}

type span struct {
	*tracepb.Span
	service, id, parent string
}

func (s span) attr(key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

type spanTree struct {
	spans []span
	byID  map[string]span
}

// check says what the tree still lacks: every span's parent is in it (the router's call's is
// the harness's span), and the spend's steps are all there, each the child of its cause.
func (tr *spanTree) check(harnessSpan string) error {
	for _, s := range tr.spans {
		if _, ok := tr.byID[s.parent]; !ok && s.parent != harnessSpan {
			return fmt.Errorf("span %s %q has a parent %q that is not in the trace", s.service, s.Name, s.parent)
		}
	}
	server, client, internal := tracepb.Span_SPAN_KIND_SERVER, tracepb.Span_SPAN_KIND_CLIENT, tracepb.Span_SPAN_KIND_INTERNAL
	call, err := tr.one("the router's call", "", func(s span) bool {
		return s.service == svcRouter && s.Name == "tools/call generate_image" && s.Kind == server && s.parent == harnessSpan
	})
	if err != nil {
		return err
	}
	steps := []struct {
		what, from, service, name string
		kind                      tracepb.Span_SpanKind
		also                      func(span) bool
	}{
		{"the router's call to Hubu", "the router's call", svcRouter, "POST hubu", client, nil},
		{"Hubu's authorization", "the router's call to Hubu", svcHubu, "POST /v1/authorizations", server, nil},
		{"Hubu's hand-off", "Hubu's authorization", svcHubu, "hubu.hand_off", internal, nil},
		{"Hubu's call to Gongbu", "Hubu's hand-off", svcHubu, "POST gongbu", client, nil},
		{"Gongbu's execution", "Hubu's call to Gongbu", svcGongbu, "POST /v1/executions", server, nil},
		{"Gongbu's submission", "Gongbu's execution", svcGongbu, "gongbu.submit", internal, nil},
		{"the submission to the provider", "Gongbu's submission", svcGongbu, "POST flux", client, nil},
		{"mockflux's submit", "the submission to the provider", svcMockflux, "", server, nil},
		// The poll that found the image and recorded it ran after the execution's request was
		// answered, on the watcher's goroutine or for the provider's webhook: still the
		// execution's child. (Two polls may find it ready; the one that lost the lease to the
		// other reports nothing.)
		{"Gongbu's poll that found the image", "Gongbu's execution", svcGongbu, "gongbu.poll", internal,
			func(s span) bool { return s.attr("gongbu.job_status") == "ready" && tr.hasChild(s, "gongbu.report") }},
		{"the poll of the provider", "Gongbu's poll that found the image", svcGongbu, "GET flux", client, nil},
		{"mockflux's answer to the poll", "the poll of the provider", svcMockflux, "", server, nil},
		{"Gongbu's report", "Gongbu's poll that found the image", svcGongbu, "gongbu.report", internal, nil},
		{"the report to Hubu", "Gongbu's report", svcGongbu, "POST hubu", client, nil},
		{"Hubu's settlement", "the report to Hubu", svcHubu, "POST /v1/decisions/{decision_id}/settle", server, nil},
	}
	// Gongbu checks the decision by Hubu's signature, without a question to Hubu (it may read
	// Hubu's keys the first time).
	if slices.ContainsFunc(tr.spans, func(s span) bool { return s.service == svcHubu && s.Name == "GET /v1/decisions/{decision_id}" }) {
		return errors.New("Gongbu asked Hubu about the decision; the hand-off's signature should have answered")
	}
	found := map[string]span{"the router's call": call}
	for _, st := range steps {
		parent := found[st.from]
		s, err := tr.one(st.what, st.from, func(s span) bool {
			return s.parent == parent.id && s.service == st.service && s.Kind == st.kind && (st.name == "" || s.Name == st.name) &&
				(st.also == nil || st.also(s))
		})
		if err != nil {
			return err
		}
		found[st.what] = s
	}
	return nil
}

func (tr *spanTree) hasChild(parent span, name string) bool {
	return slices.ContainsFunc(tr.spans, func(s span) bool { return s.parent == parent.id && s.Name == name })
}

// one is a span that matches; the first when several do (a poll repeated, say).
func (tr *spanTree) one(what, from string, match func(span) bool) (span, error) {
	for _, s := range tr.spans {
		if match(s) {
			return s, nil
		}
	}
	if from != "" {
		return span{}, fmt.Errorf("no span of %s under %s", what, from)
	}
	return span{}, fmt.Errorf("no span of %s", what)
}

// String draws the tree, for a failure's message.
func (tr *spanTree) String() string {
	if tr == nil {
		return "(no spans)"
	}
	children := map[string][]span{}
	for _, s := range tr.spans {
		children[s.parent] = append(children[s.parent], s)
	}
	var b strings.Builder
	var draw func(parent string, depth int)
	draw = func(parent string, depth int) {
		for _, s := range children[parent] {
			fmt.Fprintf(&b, "%s%s %s [%s]\n", strings.Repeat("  ", depth), s.service, s.Name, strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_"))
			draw(s.id, depth+1)
		}
	}
	drawn := map[string]bool{}
	for _, s := range tr.spans {
		if _, ok := tr.byID[s.parent]; !ok && !drawn[s.parent] {
			drawn[s.parent] = true
			fmt.Fprintf(&b, "(parent %s, not in the trace)\n", s.parent)
			draw(s.parent, 1)
		}
	}
	return b.String()
}
