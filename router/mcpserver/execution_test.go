package mcpserver_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/router/routertest"
)

func micros(n int64) *int64 { return &n }

// A failed spend says whether anything was charged, in its text and as charged_micros, and
// what became of the hold: from Hubu's settled record, and from Gongbu's execution before
// Hubu settled it.
func TestFailedSaysWhatWasCharged(t *testing.T) {
	t.Parallel()
	reason := "FLUX refused the prompt"
	for i, c := range []struct {
		name     string
		hubu     routertest.Decision
		charged  *int64 // Gongbu's, when Hubu says executing
		want     int64
		wantText []string
		final    bool
	}{
		{name: "hubu released the hold", hubu: hubuState(hubuapi.OperationStateFailed, func(op *hubuapi.Operation) {
			op.FailureReason, op.HeldMicros, op.ReleasedMicros = &reason, 0, 25_000
		}), want: 0, wantText: []string{"nothing was charged", "the hold of 25000 micros was released", reason}, final: true},
		{name: "hubu captured a failed attempt", hubu: hubuState(hubuapi.OperationStateFailed, func(op *hubuapi.Operation) {
			op.FailureReason, op.HeldMicros, op.CapturedMicros, op.ReleasedMicros = &reason, 0, 3_000, 22_000
		}), want: 3_000, wantText: []string{"charged 3000 micros", "captured", "other 22000 micros of the hold were released"}, final: true},
		{name: "gongbu failed, nothing charged", charged: micros(0), want: 0, wantText: []string{"nothing was charged", "releases the hold"}},
		{name: "gongbu failed after charging", charged: micros(25_000), want: 25_000, wantText: []string{"charged 25000 micros", "Hubu captures"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newScriptedGongbu(t)
			e := setup(t, &options{gongbuURL: g.url, wait: 300 * time.Millisecond})
			if c.hubu != nil {
				e.backend.SetDecide(c.hubu)
			}
			g.set(0, gongbuapi.Failed, false, imageOK)
			g.setCharge(c.charged, false)
			callID := fmt.Sprintf("call_failedKBYy9UCQGWTU4QGt%02d", i)
			res := e.call(t, "generate_image", fox, codex(callID))
			o := toolResult(t, res)
			if res.IsError || o.Status != "failed" || o.ChargedMicros == nil || *o.ChargedMicros != c.want {
				t.Fatalf("isError %v, %+v; want failed with charged_micros %d", res.IsError, o, c.want)
			}
			for _, want := range c.wantText {
				if !strings.Contains(o.Message, want) || !strings.Contains(text(res), want) {
					t.Errorf("the answer does not say %q: %s", want, text(res))
				}
			}
			n := e.backend.Calls("authorize")
			again := toolResult(t, e.call(t, "generate_image", fox, codex(callID)))
			if again.ChargedMicros == nil || *again.ChargedMicros != c.want {
				t.Fatalf("redelivery: %+v", again)
			}
			// Only Hubu's settled record is final (replayed by the router without asking Hubu).
			if asked := e.backend.Calls("authorize") > n; asked == c.final {
				t.Fatalf("final %v, but the redelivery asked Hubu: %v", c.final, asked)
			}
		})
	}
}

// An execution an operator resolved as charged (gongbu resolve --charged-micros) succeeded
// with no image: the answer says so plainly, with what was charged, and once Hubu has
// settled it, it is final.
func TestResolvedAsChargedSaysThereIsNoImage(t *testing.T) {
	t.Parallel()
	g := newScriptedGongbu(t)
	e := setup(t, &options{gongbuURL: g.url, wait: 300 * time.Millisecond})
	g.set(0, gongbuapi.Succeeded, true, imageOK)
	g.setCharge(micros(25_000), true)

	check := func(res *mcp.CallToolResult) {
		t.Helper()
		o := toolResult(t, res)
		if res.IsError || o.Status != "succeeded" || o.Result != nil || o.ChargedMicros == nil || *o.ChargedMicros != 25_000 {
			t.Fatalf("isError %v, %+v", res.IsError, o)
		}
		for _, want := range []string{"no image is available", "operator", "25000 micros"} {
			if !strings.Contains(o.Message, want) {
				t.Fatalf("the answer does not say %q: %s", want, o.Message)
			}
		}
		if strings.Contains(o.Message, "image generated") || len(res.Content) != 1 {
			t.Fatalf("the answer claims an image: %s", text(res))
		}
	}
	// Hubu has not settled it yet (executing): not final.
	check(e.call(t, "generate_image", fox, codex("call_resolved1Zz93GrmmRUd1GO4")))
	n := e.backend.Calls("authorize")
	check(e.call(t, "generate_image", fox, codex("call_resolved1Zz93GrmmRUd1GO4")))
	if e.backend.Calls("authorize") != n+1 {
		t.Fatal("before Hubu settled it, the redelivery did not ask Hubu again")
	}
	// Hubu settled it (succeeded): final, and replayed without a backend.
	e.backend.SetDecide(hubuState(hubuapi.OperationStateSucceeded, func(op *hubuapi.Operation) {
		op.HeldMicros, op.CapturedMicros = 0, 25_000
	}))
	check(e.call(t, "generate_image", fox, codex("call_resolved1Zz93GrmmRUd1GO4")))
	before := e.backend.Calls("")
	exec, _ := g.calls()
	res := e.call(t, "generate_image", fox, codex("call_resolved1Zz93GrmmRUd1GO4"))
	check(res)
	if exec2, _ := g.calls(); !toolResult(t, res).Replayed || e.backend.Calls("") != before || exec2 != exec {
		t.Fatalf("the settled answer was not replayed from the registry: %+v", toolResult(t, res))
	}

	// get_execution says the same.
	handle := toolResult(t, res).PublicHandle
	got := e.call(t, "get_execution", `{"public_handle":"`+handle+`"}`, nil)
	if o := toolResult(t, got); got.IsError || o.Status != "succeeded" || o.ChargedMicros == nil || *o.ChargedMicros != 25_000 ||
		!strings.Contains(o.Message, "no image is available") {
		t.Fatalf("get_execution: %+v", o)
	}
}

// get_execution of a failed execution says what was charged.
func TestGetExecutionOfAFailedExecution(t *testing.T) {
	t.Parallel()
	g := newScriptedGongbu(t)
	e := setup(t, &options{gongbuURL: g.url, wait: 300 * time.Millisecond})
	g.set(0, gongbuapi.Failed, false, imageOK)
	g.setCharge(micros(0), false)
	got := e.call(t, "get_execution", `{"public_handle":"hubu:public-operation:v1:00000000-0000-4000-8000-000000000000"}`, nil)
	if o := toolResult(t, got); got.IsError || o.Status != "failed" || o.ChargedMicros == nil || *o.ChargedMicros != 0 ||
		!strings.Contains(o.Message, "nothing was charged") {
		t.Fatalf("get_execution: %+v", o)
	}
}

// Once Hubu has authorized a spend, Gongbu being down is no refusal: the spend is under way
// (Hubu keeps handing the decision over), so generate_image answers running, not
// backend_unavailable, and says Gongbu could not be read. Nothing is recorded, and the same
// call delivered once Gongbu is back gets the image. get_execution, which only reads Gongbu,
// answers backend_unavailable.
func TestGongbuDownAfterHubuDecided(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(nil)
	dead.Close()
	e := setup(t, &options{gongbuURL: dead.URL, wait: 200 * time.Millisecond})
	res := e.call(t, "generate_image", fox, codex("call_gongbu_down"))
	o := toolResult(t, res)
	if res.IsError || o.Error != nil || o.Status != "running" || o.PublicHandle == "" || !strings.Contains(o.Message, "Gongbu could not be reached") {
		t.Fatalf("isError %v, %+v", res.IsError, o)
	}
	got := e.call(t, "get_execution", `{"public_handle":"`+o.PublicHandle+`"}`, nil)
	mustError(t, got, "backend_unavailable")

	// Gongbu answering errors: running too, saying what it answered.
	g := newScriptedGongbu(t)
	e2 := setup(t, &options{gongbuURL: g.url, wait: 200 * time.Millisecond})
	g.set(500, gongbuapi.Succeeded, false, imageOK)
	if o := toolResult(t, e2.call(t, "generate_image", fox, codex("call_gongbu500uPdcSgyfU9C6yFt"))); o.Status != "running" || !strings.Contains(o.Message, "Gongbu answered 500") {
		t.Fatalf("Gongbu 500: %+v", o)
	}
	// Not handed over yet (404): plainly running.
	g.set(404, gongbuapi.Succeeded, false, imageOK)
	if o := toolResult(t, e2.call(t, "generate_image", fox, codex("call_gongbu404Z5lSIJHtjOLyrZg"))); o.Status != "running" || strings.Contains(o.Message, "Gongbu") {
		t.Fatalf("Gongbu 404: %+v", o)
	}
	// Gongbu back: the same call continues the same operation and gets the image.
	g.set(0, gongbuapi.Succeeded, false, imageOK)
	done := toolResult(t, e2.call(t, "generate_image", fox, codex("call_gongbu500uPdcSgyfU9C6yFt")))
	if done.Status != "succeeded" || done.Result == nil {
		t.Fatalf("after Gongbu came back: %+v", done)
	}
	if keys := e2.backend.Keys(); len(keys) != 3 || keys[0] != keys[2] {
		t.Fatalf("the redelivery must continue under the first operation key: %v", len(keys))
	}
}
