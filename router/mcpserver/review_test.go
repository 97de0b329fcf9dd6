package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/proto/hubuapi"
)

// A redelivery that Hubu refuses (its catalog changed since, say) is not recorded as final:
// the operation it first recorded may still go on, so the next delivery asks again.
func TestRefusedRedeliveryIsNotFinal(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.backend.SetDecide(func(req hubuapi.AuthorizeRequest) (int, *hubuapi.Operation, *hubuapi.Problem) {
		return http.StatusCreated, routertestOp(req, hubuapi.OperationStatePendingApproval), nil
	})
	mustError(t, e.call(t, "generate_image", fox, codex("call_price1gQtuyPolearZSJ00Ew")), "approval_required")
	detail := "authorized with a different amount"
	e.backend.SetDecide(func(req hubuapi.AuthorizeRequest) (int, *hubuapi.Operation, *hubuapi.Problem) {
		return http.StatusConflict, nil, &hubuapi.Problem{Code: hubuapi.CreateNewOperation, Status: 409, Title: "Conflict", Type: "x", Detail: &detail}
	})
	mustError(t, e.call(t, "generate_image", fox, codex("call_price1gQtuyPolearZSJ00Ew")), "create_new_operation")
	before := e.backend.Calls("authorize")
	e.call(t, "generate_image", fox, codex("call_price1gQtuyPolearZSJ00Ew"))
	if e.backend.Calls("authorize") != before+1 {
		t.Fatal("a refused redelivery was replayed from the registry instead of asking Hubu again")
	}
}

// The first delivery's client goes away while Hubu is slow; a concurrent redelivery, which
// joined it, still gets the real answer.
func TestCoalescedDeliverySurvivesTheFirstCancelling(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	const callID = "call_slow1CoVTSkeqOJBmbf25wwY"
	release := e.backend.Block()
	defer release()
	ctxA, cancelA := context.WithCancel(context.Background())
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		_, _ = e.session.CallTool(ctxA, &mcp.CallToolParams{Name: "generate_image", Arguments: json.RawMessage(fox), Meta: codex(callID)})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.backend.Calls("authorize") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first delivery never reached Hubu")
		}
		time.Sleep(5 * time.Millisecond)
	}
	second := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := e.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "generate_image", Arguments: json.RawMessage(fox), Meta: codex(callID)})
		if err != nil {
			res = nil // reported below, outside this goroutine
		}
		second <- res
	}()
	for e.router.Waiters("codex", callID) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the second delivery never joined the first")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancelA()
	<-firstDone
	release()
	select {
	case res := <-second:
		if res == nil {
			t.Fatal("the joined delivery failed")
		}
		if o := outcome(t, res); o.Status != "succeeded" {
			t.Fatalf("the joined delivery: %+v", o)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the joined delivery never answered")
	}
	if n := e.backend.Calls("authorize"); n != 1 {
		t.Fatalf("%d authorizations", n)
	}
}

func TestArgumentNamesAreExact(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	for i, args := range []string{
		`{"prompt":"cat","Prompt":"dog","model":"flux-dev","width":1024,"height":1024}`,
		`{"prompt":"cat","model":"flux-dev","width":1024,"height":1024,"SEED":7}`,
		`{"prompt":"cat","model":"flux-dev","width":1024,"height":1024,"ſeed":7}`,
	} {
		mustError(t, e.call(t, "generate_image", args, codex("call_caseL4bvivE1TD0fOWPHRxi"+string(rune('a'+i)))), "invalid_arguments")
	}
	if o := outcome(t, e.call(t, "generate_image", `{"prompt":"cat","model":"flux-dev","width":1024.0,"height":1024}`, codex("call_float1VEHVamTh3cuPFquuBX"))); o.Status != "succeeded" {
		t.Fatalf("an integral 1024.0: %+v", o)
	}
}
