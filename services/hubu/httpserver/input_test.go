package httpserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"hubu.dev/hubu/proto/hubuapi"
)

// Bad input is refused with a stable code, and nothing is written.
func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	valid := newCall("flux-dev").Request()
	hash := valid.RequestHash
	body := func(args string) string {
		return `{"operation_key":"` + valid.OperationKey + `","public_handle":"` + valid.PublicHandle +
			`","tool":"generate_image","request_hash":"` + hash + `","arguments":` + args + `}`
	}
	cases := []struct {
		name        string
		contentType string
		body        string
		status      int
		code        string
	}{
		{"malformed JSON", "application/json", `{"operation_key":`, 400, "invalid_arguments"},
		{"not an object", "application/json", `[1,2]`, 400, "invalid_arguments"},
		{"empty body", "application/json", ``, 400, "invalid_arguments"},
		{"two JSON values", "application/json", body(`{"prompt":"x","model":"flux-dev","width":1024,"height":1024}`) + `{}`, 400, "invalid_arguments"},
		{"unknown top-level field", "application/json", strings.Replace(body(`{"prompt":"x","model":"flux-dev","width":1024,"height":1024}`), `{`, `{"amount_micros":1,`, 1), 400, "invalid_arguments"},
		{"unknown argument", "application/json", body(`{"prompt":"x","model":"flux-dev","width":1024,"height":1024,"idempotency_key":"k"}`), 400, "invalid_arguments"},
		{"negative seed", "application/json", body(`{"prompt":"x","model":"flux-dev","width":1024,"height":1024,"seed":-1}`), 400, "invalid_arguments"},
		{"seed beyond 2^53", "application/json", body(`{"prompt":"x","model":"flux-dev","width":1024,"height":1024,"seed":9007199254740993}`), 400, "invalid_arguments"},
		{"overflowing number", "application/json", body(`{"prompt":"x","model":"flux-dev","width":1e30,"height":1024}`), 400, "invalid_arguments"},
		{"overflowing int64", "application/json", body(`{"prompt":"x","model":"flux-dev","width":1024,"height":1024,"seed":99999999999999999999}`), 400, "invalid_arguments"},
		{"fractional width", "application/json", body(`{"prompt":"x","model":"flux-dev","width":1024.5,"height":1024}`), 400, "invalid_arguments"},
		{"width not a multiple of 32", "application/json", body(`{"prompt":"x","model":"flux-dev","width":1000,"height":1024}`), 400, "invalid_arguments"},
		{"string width", "application/json", body(`{"prompt":"x","model":"flux-dev","width":"1024","height":1024}`), 400, "invalid_arguments"},
		{"missing prompt", "application/json", body(`{"model":"flux-dev","width":1024,"height":1024}`), 400, "invalid_arguments"},
		{"unknown model", "application/json", body(`{"prompt":"x","model":"flux-imaginary","width":1024,"height":1024}`), 400, "invalid_arguments"},
		{"bad output format", "application/json", body(`{"prompt":"x","model":"flux-dev","width":1024,"height":1024,"output_format":"gif"}`), 400, "invalid_arguments"},
		{"bad operation key", "application/json", strings.Replace(body(`{"prompt":"x","model":"flux-dev","width":1024,"height":1024}`), valid.OperationKey, "my-key", 1), 400, "invalid_arguments"},
		{"bad request hash", "application/json", strings.Replace(body(`{"prompt":"x","model":"flux-dev","width":1024,"height":1024}`), hash, "abc", 1), 400, "invalid_arguments"},
		{"oversized body", "application/json", body(`{"prompt":"` + strings.Repeat("x", 600_000) + `","model":"flux-dev","width":1024,"height":1024}`), 413, "payload_too_large"},
		{"not JSON content type", "text/plain", body(`{"prompt":"x","model":"flux-dev","width":1024,"height":1024}`), 415, "unsupported_media_type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := a.Client.AuthorizeWithBodyWithResponse(ctx, c.contentType, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != c.status || problemCode(t, resp.Body) != c.code {
				t.Fatalf("%d %s, want %d %s", resp.StatusCode(), resp.Body, c.status, c.code)
			}
			if resp.HTTPResponse.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("content type %q", resp.HTTPResponse.Header.Get("Content-Type"))
			}
		})
	}
	// The same body, well formed, is accepted: the cases above fail for their own reason.
	ok, _ := a.Client.AuthorizeWithBodyWithResponse(ctx, "application/json", strings.NewReader(body(`{"prompt":"x","model":"flux-dev","width":1024,"height":1024}`)))
	if ok.StatusCode() != http.StatusCreated {
		t.Fatalf("control: %d %s", ok.StatusCode(), ok.Body)
	}
	if n := b.Count(t, "SELECT count(*) FROM operations"); n != 1 {
		t.Fatalf("%d operations, want only the control", n)
	}

	// Operator input is as strict.
	long := strings.Repeat("é", 501)
	for name, r := range map[string]reply{
		"negative price": replyOf(b.Operator.SetPriceWithResponse(ctx,
			hubuapi.PriceUpdate{Provider: "bfl", Model: "flux-dev", Size: "*", AmountMicros: -1, Currency: "USD"})),
		"bad currency": replyOf(b.Operator.SetPriceWithResponse(ctx,
			hubuapi.PriceUpdate{Provider: "bfl", Model: "flux-dev", Size: "*", AmountMicros: 1, Currency: "usd"})),
		"negative budget":                replyOf(b.Operator.SetAgentPolicyWithResponse(ctx, a.ID, *policy(0, 0, -5))),
		"auto-approve above the ceiling": replyOf(b.Operator.SetAgentPolicyWithResponse(ctx, a.ID, *policy(5_000_000, 1_000, 10_000_000))),
		"deny reason over 500 characters": replyOf(b.Operator.DenyOperationWithResponse(ctx,
			"hubu:public-operation:v1:00000000-0000-4000-8000-000000000000", hubuapi.DenyRequest{Reason: &long})),
		"bad agent name": replyOf(b.Operator.CreateAgentWithResponse(ctx, hubuapi.AgentCreate{Name: "Robert'); DROP TABLE agents;--"})),
	} {
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, b.URL+"/v1/agents/not-a-uuid", nil)
	req.Header.Set("Authorization", "Bearer "+b.OperatorToken)
	r, err := (&http.Client{Transport: b.Validator}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusBadRequest {
		t.Errorf("bad agent id: %d", r.StatusCode)
	}
	if r, _ := a.Client.GetOperationWithResponse(ctx, "hubu:operation:v1:codex:whatever"); r.StatusCode() != http.StatusBadRequest {
		t.Errorf("malformed handle: %d", r.StatusCode())
	}
	if n := b.Count(t, "SELECT count(*) FROM prices WHERE amount_micros < 0 OR currency <> 'USD'"); n != 0 {
		t.Fatal("a refused price was written")
	}
}

func TestMoreBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a := b.NewAgent(t, "agent", nil)
	c := newCall("flux-dev").Request()
	body := `{"operation_key":"` + c.OperationKey + `","public_handle":"` + c.PublicHandle + `","tool":"generate_image","request_hash":"` + c.RequestHash + `","arguments":`
	for name, raw := range map[string]string{
		"duplicate argument":              body + `{"prompt":"a","prompt":"b","model":"flux-dev","width":1024,"height":1024}}`,
		"argument in another letter case": body + `{"prompt":"a","Prompt":"b","model":"flux-dev","width":1024,"height":1024}}`,
		"NUL in the prompt":               body + `{"prompt":"a\u0000b","model":"flux-dev","width":1024,"height":1024}}`,
	} {
		r, _ := a.Client.AuthorizeWithBodyWithResponse(ctx, "application/json", strings.NewReader(raw))
		if r.StatusCode() != http.StatusBadRequest || problemCode(t, r.Body) != "invalid_arguments" {
			t.Errorf("%s: %d %s", name, r.StatusCode(), r.Body)
		}
	}
	_, held := heldCall(t, b, a)
	nul := "no\x00way"
	if r, _ := b.Operator.DenyOperationWithResponse(ctx, held.PublicHandle, hubuapi.DenyRequest{Reason: &nul}); r.StatusCode() != http.StatusBadRequest {
		t.Errorf("NUL in a deny reason: %d %s", r.StatusCode(), r.Body)
	}
	if n := b.Count(t, "SELECT count(*) FROM operations"); n != 1 {
		t.Fatalf("%d operations, want only the held one", n)
	}
	resp, err := http.Get(b.URL + "/v1/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("unknown route: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
