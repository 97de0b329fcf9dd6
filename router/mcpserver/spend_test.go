package mcpserver_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/router/routertest"
)

func TestSpendThenRedelivery(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	first := e.call(t, "generate_image", fox, codex("call_1Fku5aBMwNg6sIYw8ZG3uWPL"))
	o := toolResult(t, first)
	if first.IsError || o.Status != "succeeded" || o.Result == nil || o.AmountMicros == nil || *o.AmountMicros != 25_000 || o.Replayed {
		t.Fatalf("first delivery: %+v %s", o, text(first))
	}
	if !strings.HasPrefix(o.PublicHandle, "hubu:public-operation:v1:") {
		t.Fatalf("public handle %q", o.PublicHandle)
	}
	if img, ok := first.Content[len(first.Content)-1].(*mcp.ImageContent); images(first) != 1 || !ok || img.MIMEType != "image/png" {
		t.Fatalf("want the image as image content: %+v", first.Content)
	}
	before := e.backend.Calls("")

	// The same call again, with the keys reordered and other whitespace: the same intent. Every
	// redelivery gets the first answer, image included, marked as replayed (the recorded answer
	// is decoded once and shared between them: one must not change what the next gets).
	reordered := `{ "height":1024, "width":1024, "model":"flux-dev", "prompt":"an origami fox" }`
	want := o
	want.Replayed = true
	for _, args := range []string{fox, reordered, fox} {
		again := e.call(t, "generate_image", args, codex("call_1Fku5aBMwNg6sIYw8ZG3uWPL"))
		r := toolResult(t, again)
		if !reflect.DeepEqual(r, want) || !strings.Contains(text(again), "replayed") {
			t.Fatalf("redelivery: %+v, want %+v", r, want)
		}
		if images(again) != 1 || !reflect.DeepEqual(again.Content[1], first.Content[1]) {
			t.Fatalf("redelivery without the first delivery's image: %+v", again.Content)
		}
	}
	if got := e.backend.Calls(""); got != before {
		t.Fatalf("a redelivery reached the backend: %d requests, want %d", got, before)
	}
	if n := len(e.backend.Keys()); n != 1 {
		t.Fatalf("%d authorizations, want 1", n)
	}

	// The same arguments under a new call id are a new operation, with a new key.
	other := toolResult(t, e.call(t, "generate_image", fox, codex("call_2RfBbbRAGwoDctpOvuSR20RD")))
	if other.PublicHandle == o.PublicHandle || other.Replayed {
		t.Fatalf("a new call was taken for a redelivery: %+v", other)
	}
	if len(e.backend.Keys()) != 2 || e.backend.Keys()[0] == e.backend.Keys()[1] {
		t.Fatalf("operation keys %d, want two different", len(e.backend.Keys()))
	}
	for _, k := range e.backend.Keys() {
		if !strings.HasPrefix(k, "hubu:operation:v1:codex:") {
			t.Fatalf("operation key of the wrong shape")
		}
	}

	// The same call id with other arguments is refused, before any backend.
	before = e.backend.Calls("")
	reused := e.call(t, "generate_image", `{"prompt":"a paper crane","model":"flux-dev","width":1024,"height":1024}`, codex("call_1Fku5aBMwNg6sIYw8ZG3uWPL"))
	mustError(t, reused, "call_reused_for_different_request")
	if e.backend.Calls("") != before {
		t.Fatal("a reused call id reached the backend")
	}
}

func TestHarnessSources(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	cc := toolResult(t, e.call(t, "generate_image", fox, map[string]any{"claudecode/toolUseId": "toolu_01A09q90qw90lq917835lq9", "progressToken": 3}))
	cx := toolResult(t, e.call(t, "generate_image", fox, map[string]any{"callId": "toolu_01A09q90qw90lq917835lq9", "openai/session": "s-1"}))
	if cc.Status != "succeeded" || cx.Status != "succeeded" || cc.PublicHandle == cx.PublicHandle {
		t.Fatalf("the same id on two platforms must be two operations: %+v %+v", cc, cx)
	}
	if !strings.HasPrefix(e.backend.Keys()[0], "hubu:operation:v1:claude-code:") || !strings.HasPrefix(e.backend.Keys()[1], "hubu:operation:v1:codex:") {
		t.Fatal("the operation keys do not name their platforms")
	}
}

func TestIdentityRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	sentence := "Hubu spend tools require supported trusted identity from Codex, Claude Code, or the Hubu platform-invocation envelope"
	cases := []struct {
		name string
		meta map[string]any
		code string
	}{
		{"no _meta", nil, "identity_required"},
		{"only session context, as ChatGPT chat sends", map[string]any{"openai/session": "sess-1", "openai/subject": "u-1", "openai/locale": "en-US", "progressToken": 0}, "identity_required"},
		{"two sources", map[string]any{"callId": "call_two5RFm7K8taANC8k1EYxswF", "claudecode/toolUseId": "toolu_01two2QevF6MT9iw5LhTOL8C"}, "identity_ambiguous"},
		{"a number", map[string]any{"callId": 42.0}, "identity_invalid"},
		{"empty", map[string]any{"callId": ""}, "identity_invalid"},
		{"too short", map[string]any{"callId": "call_Ab3dE5fG7h"}, "identity_invalid"}, // 15 characters
		{"too long", map[string]any{"callId": strings.Repeat("a", 257)}, "identity_invalid"},
		{"bad characters", map[string]any{"callId": "call 1; drop table calls"}, "identity_invalid"},
		{"envelope from an unknown platform", map[string]any{"hubu.dev/platform-invocation": map[string]any{"version": 1.0, "platform": "acme", "invocation_id": "inv-7f3a9c2e5b1d4a60"}}, "identity_invalid"},
	}
	for _, c := range cases {
		res := e.call(t, "generate_image", fox, c.meta)
		o := mustError(t, res, c.code)
		if c.code == "identity_required" && !strings.Contains(o.Error.Message, sentence) {
			t.Errorf("%s: the message lacks the sentence: %q", c.name, o.Error.Message)
		}
	}
	if n := e.backend.Calls(""); n != 0 {
		t.Fatalf("%d backend requests for refused calls", n)
	}
}

func TestIdentityInArguments(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	for _, args := range []string{
		`{"prompt":"x","model":"flux-dev","width":1024,"height":1024,"operation_key":"hubu:operation:v1:codex:00000000-0000-4000-8000-000000000000"}`,
		`{"prompt":"x","model":"flux-dev","width":1024,"height":1024,"options":{"nested":[{"Tool-Call-ID":"c-9"}]}}`,
		`{"prompt":"x","model":"flux-dev","width":1024,"height":1024,"_meta":{"callId":"c-9"}}`,
	} {
		mustError(t, e.call(t, "generate_image", args, codex("call_c9tOdEPsi4pYeCZvmfh246uH")), "identity_in_arguments")
	}
	// Read-only tools need no identity but refuse it in arguments too.
	mustError(t, e.call(t, "capabilities", `{"callId":"c-9"}`, nil), "identity_in_arguments")
	mustError(t, e.call(t, "operation_status", `{"public_handle":"hubu:public-operation:v1:00000000-0000-4000-8000-000000000000","platform":"codex"}`, nil), "identity_in_arguments")
	if n := e.backend.Calls(""); n != 0 {
		t.Fatalf("%d backend requests", n)
	}
	// Nothing was recorded: the same call id still starts a fresh operation.
	if o := toolResult(t, e.call(t, "generate_image", fox, codex("call_c9tOdEPsi4pYeCZvmfh246uH"))); o.Status != "succeeded" || o.Replayed {
		t.Fatalf("after refusals: %+v", o)
	}
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	n := 0
	for name, args := range map[string]string{
		"duplicate key":        `{"prompt":"a","prompt":"b","model":"flux-dev","width":1024,"height":1024}`,
		"integer beyond 2^53":  `{"prompt":"a","model":"flux-dev","width":1024,"height":1024,"seed":9007199254740993}`,
		"unknown field":        `{"prompt":"a","model":"flux-dev","width":1024,"height":1024,"style":"ink"}`,
		"width not /32":        `{"prompt":"a","model":"flux-dev","width":1000,"height":1024}`,
		"missing prompt":       `{"model":"flux-dev","width":1024,"height":1024}`,
		"not an object":        `[1,2]`,
		"a string for a width": `{"prompt":"a","model":"flux-dev","width":"1024","height":1024}`,
		"an unknown model":     `{"prompt":"a","model":"flux-schnell","width":1024,"height":1024}`,
		"width without height": `{"prompt":"a","model":"flux-2-pro","width":1024}`,
		"over 4 MP":            `{"prompt":"a","model":"flux-2-pro","width":2048,"height":2064}`,
		"FLUX.2 width not /16": `{"prompt":"a","model":"flux-2-pro","width":1000,"height":1024}`,
		"a size for Ultra":     `{"prompt":"a","model":"flux-pro-1.1-ultra","width":1024,"height":1024}`,
		"a ratio for FLUX.2":   `{"prompt":"a","model":"flux-2-pro","aspect_ratio":"16:9"}`,
		"a ratio too wide":     `{"prompt":"a","model":"flux-pro-1.1-ultra","aspect_ratio":"22:9"}`,
		"raw on FLUX.2":        `{"prompt":"a","model":"flux-2-pro","raw":true}`,
		"FLUX.2 safety 6":      `{"prompt":"a","model":"flux-2-pro","safety_tolerance":6}`,
		"a webp":               `{"prompt":"a","model":"flux-2-pro","output_format":"webp"}`,
		"input images":         `{"prompt":"a","model":"flux-2-pro","input_images":["hubu:public-operation:v1:0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"]}`,
		"FLUX.1 prompt > 4000": `{"prompt":"` + strings.Repeat("a", 4001) + `","model":"flux-pro-1.1"}`,
	} {
		n++
		res := e.call(t, "generate_image", args, codex(fmt.Sprintf("call_badoXm4yECl8qcIKjS31RFl%d", n)))
		if !res.IsError {
			t.Errorf("%s: accepted", name)
			continue
		}
		if o := toolResult(t, res); o.Error.Code != "invalid_arguments" {
			t.Errorf("%s: %s", name, o.Error.Code)
		}
	}
	if n := e.backend.Calls(""); n != 0 {
		t.Fatalf("%d backend requests", n)
	}
}

// Each model's own parameters pass, with the defaults it documents where they are left out.
func TestEveryModelsArguments(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	for i, args := range []string{
		`{"prompt":"a fox","model":"flux-2-pro"}`,
		`{"prompt":"a fox","model":"flux-2-max","width":2048,"height":2048,"output_format":"png","safety_tolerance":5,"seed":7}`,
		`{"prompt":"a fox","model":"flux-2-flex","width":64,"height":4096}`,
		`{"prompt":"a fox","model":"flux-2-klein-4b","width":1440,"height":816}`,
		`{"prompt":"` + strings.Repeat("a", 32_000) + `","model":"flux-2-klein-9b"}`,
		`{"prompt":"a fox","model":"flux-pro-1.1","width":1440,"height":256,"safety_tolerance":6}`,
		`{"prompt":"a fox","model":"flux-pro-1.1-ultra","aspect_ratio":"21:9","raw":true}`,
		`{"prompt":"a fox","model":"flux-pro-1.1-ultra"}`,
		`{"prompt":"a fox","model":"flux-kontext-pro","aspect_ratio":"9:21"}`,
		`{"prompt":"a fox","model":"flux-kontext-max","output_format":"jpeg"}`,
		`{"prompt":"a fox","model":"flux-dev","width":1024,"height":1024}`,
	} {
		if o := toolResult(t, e.call(t, "generate_image", args, codex(fmt.Sprintf("call_modelsVtFFd0UMtFdJGpg%02d", i)))); o.Status != "succeeded" {
			t.Errorf("%s: %+v", args[:min(len(args), 80)], o)
		}
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
	if o := toolResult(t, e.call(t, "generate_image", `{"prompt":"cat","model":"flux-dev","width":1024.0,"height":1024}`, codex("call_float1VEHVamTh3cuPFquuBX"))); o.Status != "succeeded" {
		t.Fatalf("an integral 1024.0: %+v", o)
	}
}

func TestPolicyOutcomes(t *testing.T) {
	t.Parallel()
	t.Run("approval required is not final", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		e.backend.SetDecide(hubuState(hubuapi.OperationStatePendingApproval, nil))
		o := mustError(t, e.call(t, "generate_image", fox, codex("call_held1Gd5xgMCkw55AYJR6cMm")), "approval_required")
		again := mustError(t, e.call(t, "generate_image", fox, codex("call_held1Gd5xgMCkw55AYJR6cMm")), "approval_required")
		if again.PublicHandle != o.PublicHandle || !again.Replayed {
			t.Fatalf("redelivery of a held call: %+v", again)
		}
		if len(e.backend.Keys()) != 2 || e.backend.Keys()[0] != e.backend.Keys()[1] {
			t.Fatal("a held call must be asked again under the same key")
		}
	})
	t.Run("budget exceeded is final", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		e.backend.SetDecide(hubuState(hubuapi.OperationStateDenied, func(op *hubuapi.Operation) {
			op.Denial = &hubuapi.Denial{Code: hubuapi.DenialCodeBudgetExceeded, Message: "over budget"}
		}))
		mustError(t, e.call(t, "generate_image", fox, codex("call_b1jsbsFAXOujbnvX9hsOrCqL")), "budget_exceeded")
		mustError(t, e.call(t, "generate_image", fox, codex("call_b1jsbsFAXOujbnvX9hsOrCqL")), "budget_exceeded")
		if n := e.backend.Calls("authorize"); n != 1 {
			t.Fatalf("%d authorizations; a final refusal replays from the registry", n)
		}
	})
	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		e.backend.SetDecide(hubuState(hubuapi.OperationStateDenied, func(op *hubuapi.Operation) {
			op.Denial = &hubuapi.Denial{Code: hubuapi.DenialCodeDenied, Message: "above the ceiling"}
		}))
		mustError(t, e.call(t, "generate_image", fox, codex("call_d1fg1X0roBj3qrVZAowpsiFU")), "denied")
	})
	t.Run("create new operation", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil)
		e.backend.SetDecide(hubuProblem(409, hubuapi.CreateNewOperation))
		mustError(t, e.call(t, "generate_image", fox, codex("call_n1Kfwk6nyJd4scA3OcE8GiKn")), "create_new_operation")
	})
}

// An answer from Hubu about another operation, or another request, is never taken as this
// call's: even a final one (a denial) is not recorded, and the retry asks Hubu again under
// the same key.
func TestAnswerForAnotherOperationIsNotTaken(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string]func(*hubuapi.Operation){
		"another handle":  func(op *hubuapi.Operation) { op.PublicHandle = contract.NewPublicHandle() },
		"another request": func(op *hubuapi.Operation) { op.RequestHash = "sha256:" + strings.Repeat("0", 64) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			id := codex("call_o1" + strings.ReplaceAll(name, " ", "") + "X9hsOrCqLvq")
			e.backend.SetDecide(hubuState(hubuapi.OperationStateDenied, func(op *hubuapi.Operation) {
				op.Denial = &hubuapi.Denial{Code: hubuapi.DenialCodeDenied, Message: "another operation's denial"}
				edit(op)
			}))
			mustError(t, e.call(t, "generate_image", fox, id), "backend_unavailable")
			e.backend.SetDecide(nil)
			if got := toolResult(t, e.call(t, "generate_image", fox, id)); got.Status != "succeeded" {
				t.Fatalf("the retry: %+v", got)
			}
			if keys := e.backend.Keys(); len(keys) != 2 || keys[0] != keys[1] {
				t.Fatalf("authorizations under %d keys %v, want the same key asked twice", len(keys), keys)
			}
		})
	}
}

// An unreachable Hubu is no loss: the call is recorded, and the retry continues the same
// operation under the same key.
func TestBackendUnavailableKeepsTheCall(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.backend.SetDown(true)
	down := mustError(t, e.call(t, "generate_image", fox, codex("call_u1V5dp6buXrE8B88myVE6lgq")), "backend_unavailable")
	e.backend.SetDown(false)
	up := toolResult(t, e.call(t, "generate_image", fox, codex("call_u1V5dp6buXrE8B88myVE6lgq")))
	if up.Status != "succeeded" || up.PublicHandle != down.PublicHandle {
		t.Fatalf("after the backend came back: %+v (first %+v)", up, down)
	}
	if len(e.backend.Keys()) != 1 {
		t.Fatalf("%d authorizations", len(e.backend.Keys()))
	}
}

// Concurrent deliveries of one call in one process reach the backend once.
func TestConcurrentDeliveriesAreCoalesced(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	var wg sync.WaitGroup
	handles := make([]string, 50)
	for i := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			handles[i] = toolResult(t, e.call(t, "generate_image", fox, codex("call_burst4oCn6RUIG96vz1F0HOI"))).PublicHandle
		}()
	}
	wg.Wait()
	for _, h := range handles {
		if h != handles[0] || h == "" {
			t.Fatalf("deliveries disagree: %v", handles)
		}
	}
	if n := e.backend.Calls("authorize"); n != 1 {
		t.Fatalf("%d authorizations for one call", n)
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
	waitfor.True(t, 10*time.Second, "the first delivery at Hubu", func() bool { return e.backend.Calls("authorize") > 0 })
	second := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := e.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "generate_image", Arguments: json.RawMessage(fox), Meta: codex(callID)})
		if err != nil {
			res = nil // reported below, outside this goroutine
		}
		second <- res
	}()
	waitfor.True(t, 10*time.Second, "the second delivery to join the first", func() bool { return e.router.Waiters("codex", callID) >= 1 })
	cancelA()
	<-firstDone
	release()
	select {
	case res := <-second:
		if res == nil {
			t.Fatal("the joined delivery failed")
		}
		if o := toolResult(t, res); o.Status != "succeeded" {
			t.Fatalf("the joined delivery: %+v", o)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the joined delivery never answered")
	}
	if n := e.backend.Calls("authorize"); n != 1 {
		t.Fatalf("%d authorizations", n)
	}
}

// A backend that echoes the private key in every field it returns: the agent never sees it.
func TestScrubber(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.backend.SetEchoKey(true)
	res := e.call(t, "generate_image", fox, codex("call_s1xTADLIKqRxT50s65uc1YGT"))
	handle := toolResult(t, res).PublicHandle
	results := []*mcp.CallToolResult{res,
		e.call(t, "generate_image", fox, codex("call_s1xTADLIKqRxT50s65uc1YGT")),
		e.call(t, "operation_status", fmt.Sprintf(`{"public_handle":%q}`, handle), nil),
		e.call(t, "resume_operation", fmt.Sprintf(`{"public_handle":%q}`, handle), nil),
		e.call(t, "get_execution", fmt.Sprintf(`{"public_handle":%q}`, handle), nil),
		e.call(t, "capabilities", `{}`, nil),
	}
	if len(e.backend.Keys()) == 0 {
		t.Fatal("no authorization")
	}
	for i, r := range results {
		raw, _ := json.Marshal(r)
		if leaks := routertest.LeaksIn(string(raw), e.backend.Keys()...); len(leaks) > 0 || strings.Contains(string(raw), "hubu:operation:v1:") {
			t.Fatalf("result %d carries the private key: %s", i, raw)
		}
		if !strings.Contains(string(raw), "[redacted]") {
			t.Fatalf("result %d: the echoed key was not replaced: %s", i, raw)
		}
	}
	// Once the call's row is gone (pruned), the router no longer knows the key behind the
	// handle; an answer that echoes it is still scrubbed.
	if n, err := e.registry.Prune(context.Background(), time.Now().Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	for _, tool := range []string{"operation_status", "get_execution"} {
		raw, _ := json.Marshal(e.call(t, tool, fmt.Sprintf(`{"public_handle":%q}`, handle), nil))
		if leaks := routertest.LeaksIn(string(raw), e.backend.Keys()...); len(leaks) > 0 || strings.Contains(string(raw), "hubu:operation:v1:") {
			t.Fatalf("%s after the prune carries the private key: %s", tool, raw)
		}
	}
}

// edit_image is a spend like generate_image, sent to Hubu as edit_image with its inputs; each
// tool refuses the other's arguments, and an edit's own limits are the model's.
func TestEditImageIsASpend(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	var seen []hubuapi.AuthorizeRequest
	var mu sync.Mutex
	e.backend.SetDecide(func(req hubuapi.AuthorizeRequest) (int, *hubuapi.Operation, *hubuapi.Problem) {
		mu.Lock()
		seen = append(seen, req)
		mu.Unlock()
		return http.StatusCreated, routertest.Operation(req, hubuapi.OperationStateExecuting), nil
	})
	input := "hubu:public-operation:v1:6f1c2a60-1f7e-4b43-9d8e-3c3b0d1f2a11"
	edit := fmt.Sprintf(`{"prompt":"make the fox blue","model":"flux-2-pro","input_images":[%q]}`, input)
	res := e.call(t, "edit_image", edit, codex("call_editimage9Lk2Wq5Tz1Lv3"))
	if o := toolResult(t, res); res.IsError || o.Status != "succeeded" {
		t.Fatalf("edit_image: %+v", o)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0].Tool != hubuapi.EditImage || !slices.Equal(seen[0].Arguments.InputImages, []string{input}) {
		t.Fatalf("Hubu was asked %+v", seen)
	}
	mu.Unlock()
	for _, c := range []struct{ tool, args, want string }{
		{"generate_image", fmt.Sprintf(`{"prompt":"a fox","model":"flux-2-pro","input_images":[%q]}`, input), "nothing else"},
		{"edit_image", `{"prompt":"make it blue","model":"flux-2-pro"}`, "input_images"},
		{"edit_image", fmt.Sprintf(`{"prompt":"make it blue","model":"flux-dev","input_images":[%q]}`, input), "flux-dev"},
		{"edit_image", `{"prompt":"make it blue","model":"flux-2-pro","input_images":["not a handle"]}`, "public handles"},
	} {
		res := e.call(t, c.tool, c.args, codex(fmt.Sprintf("call_editrefused%x", sha256.Sum256([]byte(c.tool+c.args)))[:40]))
		if o := toolResult(t, res); !res.IsError || o.Error == nil || o.Error.Code != "invalid_arguments" || !strings.Contains(o.Error.Message, c.want) {
			t.Errorf("%s %s: %+v", c.tool, c.args, o)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("refused calls reached Hubu: %d authorizations", len(seen))
	}
}
