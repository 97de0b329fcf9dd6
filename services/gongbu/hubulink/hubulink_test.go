package hubulink_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"hubu.dev/hubu/kit/leaktest"
	"hubu.dev/hubu/proto/contract"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/hubulink"
)

func TestMain(m *testing.M) {
	leaktest.VerifyTestMain(m)
}

const serviceToken = "hubu_service_for_gongbu"

// hubu plays Hubu's executor API with one canned answer and keeps the requests it got.
type hubu struct {
	mu     sync.Mutex
	status int
	body   any
	got    []*http.Request
	bodies []string
}

func newHubu(t *testing.T, status int, body any) (*hubu, *hubulink.Client) {
	t.Helper()
	h := &hubu{status: status, body: body}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got = append(h.got, r)
		h.bodies = append(h.bodies, string(b))
		status, body := h.status, h.body
		h.mu.Unlock()
		ct := "application/json"
		if status >= 400 {
			ct = "application/problem+json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(ts.Close)
	c, err := hubulink.New(ts.URL, serviceToken, &http.Client{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return h, c
}

func (h *hubu) last(t *testing.T) (*http.Request, string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.got) == 0 {
		t.Fatal("Hubu got no request")
	}
	return h.got[len(h.got)-1], h.bodies[len(h.bodies)-1]
}

func problem(status int, code hubuapi.ErrorCode) hubuapi.Problem {
	return hubuapi.Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Code: code}
}

// decision is a decision Hubu issued under id.
func decision(id uuid.UUID) hubuapi.Decision {
	return hubuapi.Decision{
		DecisionId: id, PublicHandle: "hubu:public-operation:v1:" + uuid.NewString(), AgentId: uuid.New(), Tool: hubuapi.GenerateImage,
		Scope:        hubuapi.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x768"},
		Arguments:    contract.ImageRequest{Prompt: "a fox", Model: "flux-dev", Width: 1024, Height: 768, Seed: new(int64(7))},
		AmountMicros: 25_000, Currency: "USD", State: hubuapi.OperationStateDispatching, DispatchAttempts: 2,
		IssuedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC),
	}
}

func TestDecision(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	issued := decision(id)
	h, c := newHubu(t, http.StatusOK, issued)
	d, err := c.Decision(context.Background(), id)
	if err != nil || d.State != "dispatching" || !d.IssuedAt.Equal(issued.IssuedAt) {
		t.Fatalf("%+v err %v", d, err)
	}
	want := gongbu.Decision{
		DecisionID: id, PublicHandle: issued.PublicHandle, AgentID: issued.AgentId, Tool: "generate_image",
		Scope:        gongbu.Scope{Provider: "bfl", Model: "flux-dev", Size: "1024x768"},
		Arguments:    gongbu.ImageArguments{Prompt: "a fox", Model: "flux-dev", Width: 1024, Height: 768, Seed: new(int64(7))},
		AmountMicros: 25_000, Currency: "USD",
	}
	if !d.Decision.SameWork(want) {
		t.Fatalf("decision %+v, want %+v", d, want)
	}
	r, _ := h.last(t)
	if r.Method != http.MethodGet || r.URL.Path != "/v1/decisions/"+id.String() || r.Header.Get("Authorization") != "Bearer "+serviceToken {
		t.Fatalf("request %s %s auth %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
	}

	_, c = newHubu(t, http.StatusNotFound, problem(http.StatusNotFound, hubuapi.NotFound))
	if _, err := c.Decision(context.Background(), id); gongbu.ErrorCode(err) != gongbu.CodeNotFound {
		t.Fatalf("404: %v", err)
	}
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusInternalServerError} {
		_, c = newHubu(t, status, problem(status, hubuapi.Internal))
		if _, err := c.Decision(context.Background(), id); err == nil || gongbu.ErrorCode(err) == gongbu.CodeNotFound {
			t.Fatalf("%d: %v, want an error that is not not_found", status, err)
		}
	}
}

func TestSettleAndRelease(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	op := map[string]any{"public_handle": "hubu:public-operation:v1:" + uuid.NewString()}
	h, c := newHubu(t, http.StatusOK, op)
	if err := c.Settle(context.Background(), id, 25_000, false, "ignored without failed", new(int64(24_000))); err != nil {
		t.Fatal(err)
	}
	r, body := h.last(t)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/decisions/"+id.String()+"/settle" || body != `{"amount_micros":25000,"provider_cost_micros":24000}` ||
		r.Header.Get("Authorization") != "Bearer "+serviceToken {
		t.Fatalf("settle: %s %s %q", r.Method, r.URL.Path, body)
	}
	// A failure the provider charged for: captured, and the operation fails with the reason.
	if err := c.Settle(context.Background(), id, 25_000, true, "x"+strings.Repeat("é", 600), nil); err != nil {
		t.Fatal(err)
	}
	_, body = h.last(t)
	var settle hubuapi.SettleRequest
	if err := json.Unmarshal([]byte(body), &settle); err != nil || settle.AmountMicros != 25_000 || settle.Failed == nil || !*settle.Failed ||
		settle.Reason == nil || utf8.RuneCountInString(*settle.Reason) != 500 {
		t.Fatalf("failed settle body %s: %v", body, err)
	}

	long := "x" + strings.Repeat("é", 600) // byte 500 falls inside a character
	if err := c.Release(context.Background(), id, long); err != nil {
		t.Fatal(err)
	}
	r, body = h.last(t)
	var rel hubuapi.ReleaseRequest
	if err := json.Unmarshal([]byte(body), &rel); err != nil || rel.Reason == nil {
		t.Fatalf("release body %s: %v", body, err)
	}
	if r.URL.Path != "/v1/decisions/"+id.String()+"/release" || utf8.RuneCountInString(*rel.Reason) != 500 || strings.ContainsRune(*rel.Reason, '\uFFFD') {
		t.Fatalf("release: %s reason %q", r.URL.Path, *rel.Reason)
	}

	for _, status := range []int{http.StatusConflict, http.StatusInternalServerError} {
		_, c := newHubu(t, status, problem(status, hubuapi.Internal))
		if err := c.Settle(context.Background(), id, 1, false, "", nil); err == nil {
			t.Fatalf("settle %d: no error", status)
		}
		if err := c.Release(context.Background(), id, ""); err == nil {
			t.Fatalf("release %d: no error", status)
		}
	}
}

func TestOwns(t *testing.T) {
	t.Parallel()
	handle := "hubu:public-operation:v1:" + uuid.NewString()
	for _, c := range []struct {
		status int
		owns   bool
		code   gongbu.Code // "" for no error
	}{
		{http.StatusOK, true, ""},
		{http.StatusNotFound, false, ""},
		{http.StatusForbidden, false, ""},
		{http.StatusBadRequest, false, ""},
		{http.StatusUnauthorized, false, gongbu.CodeUnauthorized},
		{http.StatusInternalServerError, false, gongbu.CodeInternal},
	} {
		var body any = problem(c.status, hubuapi.NotFound)
		if c.status == http.StatusOK {
			body = map[string]any{"public_handle": handle}
		}
		h, client := newHubu(t, c.status, body)
		owns, err := client.Owns(context.Background(), gongbu.Caller{Token: "hubu_agent_token"}, handle)
		if owns != c.owns || (c.code == "") != (err == nil) || (err != nil && gongbu.ErrorCode(err) != c.code) {
			t.Fatalf("%d: owns=%v err=%v", c.status, owns, err)
		}
		r, _ := h.last(t)
		// Asked with the agent's own token, never Gongbu's service credential.
		if r.URL.Path != "/v1/operations/"+handle || r.Header.Get("Authorization") != "Bearer hubu_agent_token" {
			t.Fatalf("request %s auth %q", r.URL.Path, r.Header.Get("Authorization"))
		}
	}
}
