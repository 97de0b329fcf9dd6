package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/router/mcpserver"
	"hubu.dev/hubu/router/routertest"
)

// heldLook is one request the router made for an execution.
type heldLook struct {
	wait  int
	state string
}

// holdingGongbu is a fake Gongbu that, like the real one, holds a look that names the state
// the execution is still in until the execution changes.
type holdingGongbu struct {
	gongbuapi.Unimplemented
	imageURL string
	mu       sync.Mutex
	state    gongbuapi.ExecutionState
	looks    []heldLook
	held     chan struct{} // receives when a look is being held
	change   chan struct{} // closed when the execution changes
}

func (g *holdingGongbu) GetOperationExecution(w http.ResponseWriter, r *http.Request, handle string, p gongbuapi.GetOperationExecutionParams) {
	look := heldLook{}
	if p.Wait != nil {
		look.wait = *p.Wait
	}
	if p.State != nil {
		look.state = string(*p.State)
	}
	g.mu.Lock()
	g.looks = append(g.looks, look)
	unchanged := p.State != nil && *p.State == g.state
	g.mu.Unlock()
	if unchanged && look.wait > 0 {
		g.held <- struct{}{}
		select {
		case <-g.change:
		case <-r.Context().Done():
			return
		}
	}
	g.mu.Lock()
	now := time.Now()
	x := gongbuapi.Execution{DecisionId: uuid.New(), PublicHandle: handle, AgentId: uuid.New(),
		Scope: gongbuapi.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x1024"}, State: g.state,
		AmountMicros: 25_000, Currency: "USD", CreatedAt: now, UpdatedAt: now}
	if g.state == gongbuapi.Succeeded {
		x.Result = &gongbuapi.ExecutionResult{ImageUrl: g.imageURL}
	}
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(x)
}

// The router waits for an execution through looks that Gongbu holds until the execution
// changes, naming the state it last saw: the image comes the moment Gongbu has it, with no
// look in between. After Hubu's "executing" (Gongbu accepted the job) the first look waits;
// after "dispatching" (the hand-off is not acknowledged) a first look learns the state.
func TestSpendWaitsThroughHeldLooks(t *testing.T) {
	t.Parallel()
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(routertest.TinyPNG())
	}))
	t.Cleanup(img.Close)
	for i, c := range []struct {
		hubu  hubuapi.OperationState
		looks []heldLook // the waits are checked apart
	}{
		{hubuapi.OperationStateExecuting, []heldLook{{state: "submitted"}}},
		{hubuapi.OperationStateDispatching, []heldLook{{state: ""}, {state: "submitted"}}},
	} {
		t.Run(string(c.hubu), func(t *testing.T) {
			t.Parallel()
			g := &holdingGongbu{imageURL: img.URL + "/s.png", state: gongbuapi.Submitted, held: make(chan struct{}, 1), change: make(chan struct{})}
			srv := httptest.NewServer(gongbuapi.Handler(g))
			t.Cleanup(srv.Close)
			e := setup(t, &options{gongbuURL: srv.URL, wait: 20 * time.Second})
			e.backend.SetDecide(hubuState(c.hubu, nil))

			answer := make(chan mcpserver.ToolResult, 1)
			go func() {
				answer <- toolResult(t, e.call(t, "generate_image", fox, codex(fmt.Sprintf("call_heldLooksQqauinaST3It61%02d", i))))
			}()
			select {
			case <-g.held:
			case <-time.After(10 * time.Second):
				t.Fatal("the router never made a look that Gongbu could hold")
			}
			g.mu.Lock()
			g.state = gongbuapi.Succeeded
			g.mu.Unlock()
			close(g.change)

			if o := <-answer; o.Status != "succeeded" || o.Result == nil {
				t.Fatalf("answer %+v", o)
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			if len(g.looks) != len(c.looks) {
				t.Fatalf("looks %+v, want %+v", g.looks, c.looks)
			}
			for j, l := range g.looks {
				if l.state != c.looks[j].state || l.wait < 15 {
					t.Fatalf("looks %+v, want %+v, each asking to wait", g.looks, c.looks)
				}
			}
		})
	}
}
