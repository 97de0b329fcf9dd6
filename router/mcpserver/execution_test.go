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
	"hubu.dev/hubu/router/mcpserver"
	"hubu.dev/hubu/router/routertest"
)

func micros(n int64) *int64 { return &n }

// mustSay checks that a result is no error, has status and charged_micros, and says each of
// says in its message and its text.
func mustSay(t *testing.T, res *mcp.CallToolResult, status string, charged int64, says ...string) mcpserver.ToolResult {
	t.Helper()
	o := toolResult(t, res)
	if res.IsError || o.Status != status || o.ChargedMicros == nil || *o.ChargedMicros != charged {
		t.Fatalf("isError %v, %+v; want %s with charged_micros %d", res.IsError, o, status, charged)
	}
	for _, want := range says {
		if !strings.Contains(o.Message, want) || !strings.Contains(text(res), want) {
			t.Fatalf("the answer does not say %q: %s", want, text(res))
		}
	}
	return o
}

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
			mustSay(t, e.call(t, "generate_image", fox, codex(callID)), "failed", c.want, c.wantText...)
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
		if o := mustSay(t, res, "succeeded", 25_000, "no image is available", "operator", "25000 micros"); o.Result != nil ||
			strings.Contains(o.Message, "image generated") || len(res.Content) != 1 {
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
	mustSay(t, e.call(t, "get_execution", `{"public_handle":"`+handle+`"}`, nil), "succeeded", 25_000, "no image is available")
}

// get_execution of a failed execution says what was charged.
func TestGetExecutionOfAFailedExecution(t *testing.T) {
	t.Parallel()
	g := newScriptedGongbu(t)
	e := setup(t, &options{gongbuURL: g.url, wait: 300 * time.Millisecond})
	g.set(0, gongbuapi.Failed, false, imageOK)
	g.setCharge(micros(0), false)
	mustSay(t, e.call(t, "get_execution", `{"public_handle":"hubu:public-operation:v1:00000000-0000-4000-8000-000000000000"}`, nil),
		"failed", 0, "nothing was charged")
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
