package httpserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/kit/httpjson"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/vendorkey"
)

func TestExecuteNeedsTheServiceCredential(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.env.Issue(agentA)
	for _, c := range []struct {
		name, header string
		status       int
		code         string
	}{
		{"no token", "", http.StatusUnauthorized, "unauthorized"},
		{"not a bearer token", "Basic " + serviceToken, http.StatusUnauthorized, "unauthorized"},
		{"a wrong token", "Bearer not-the-service-token", http.StatusForbidden, "forbidden"},
		{"an agent's token", "Bearer " + agentA, http.StatusForbidden, "forbidden"},
	} {
		resp, err := b.anonymous.ExecuteWithResponse(context.Background(), nil, request(d), func(_ context.Context, r *http.Request) error {
			if c.header != "" {
				r.Header.Set("Authorization", c.header)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != c.status || problemCode(t, resp.Body) != c.code {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode(), resp.Body)
		}
	}
	if b.env.Executions(t) != 0 || b.env.Provider.Submits() != 0 || b.env.Authority.Asked() != 0 {
		t.Fatal("an unauthenticated request reached Hubu, the database or the provider")
	}
}

func TestExecuteNewThenExisting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.env.Issue(agentA)
	first := b.execute(t, b.service, d)
	if first.StatusCode() != http.StatusAccepted || first.JSON202 == nil {
		t.Fatalf("first: %d %s", first.StatusCode(), first.Body)
	}
	x := first.JSON202
	if x.DecisionId != d.DecisionID || x.PublicHandle != d.PublicHandle || x.State != gongbuapi.Submitted ||
		x.ProviderJobId == nil || x.AmountMicros != d.AmountMicros || x.Scope.Model != "flux-dev" || x.Reported == nil || *x.Reported {
		t.Fatalf("first: %s", first.Body)
	}
	second := b.execute(t, b.service, d)
	if second.StatusCode() != http.StatusOK || second.JSON200 == nil || second.JSON200.DecisionId != d.DecisionID ||
		*second.JSON200.ProviderJobId != *x.ProviderJobId {
		t.Fatalf("second: %d %s", second.StatusCode(), second.Body)
	}
	if n := b.env.Provider.SubmitsFor(vendorkey.For("bfl", d.DecisionID)); n != 1 || b.env.Provider.Submits() != 1 {
		t.Fatalf("%d submits", b.env.Provider.Submits())
	}
}

func TestConcurrentExecuteRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.env.Issue(agentA)
	const n = 20
	statuses := make([]int, n)
	gongbutest.AtOnce(n, func(i int) {
		resp, err := b.service.ExecuteWithResponse(context.Background(), nil, request(d))
		if err != nil {
			t.Error(err)
			return
		}
		statuses[i] = resp.StatusCode()
	})
	created := 0
	for _, s := range statuses {
		switch s {
		case http.StatusAccepted:
			created++
		case http.StatusOK:
		default:
			t.Fatalf("statuses %v", statuses)
		}
	}
	if created != 1 || b.env.Provider.Submits() != 1 {
		t.Fatalf("%d created, %d submits; want 1 and 1", created, b.env.Provider.Submits())
	}
}

func TestExecuteRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// issued is a decision Hubu issued, sent with change made to it.
	issued := func(change func(d *gongbu.Decision)) func() gongbu.Decision {
		return func() gongbu.Decision {
			d := b.env.Issue(agentA)
			change(&d)
			return d
		}
	}
	cases := []struct {
		name    string
		prepare func() gongbu.Decision
		status  int
		code    string
	}{
		{"scope model disagrees with the arguments", issued(func(d *gongbu.Decision) { d.Scope.Model = "flux-pro-1.1" }), http.StatusConflict, "decision_mismatch"},
		{"scope size disagrees with the arguments", issued(func(d *gongbu.Decision) { d.Scope.Size = "512x512" }), http.StatusConflict, "decision_mismatch"},
		{"arguments differ from what Hubu issued", issued(func(d *gongbu.Decision) { d.Arguments.Prompt = "something else" }), http.StatusConflict, "decision_mismatch"},
		{"amount differs from what Hubu issued", issued(func(d *gongbu.Decision) { d.AmountMicros = 1 }), http.StatusConflict, "decision_mismatch"},
		{"a decision Hubu never issued", gongbutest.NewDecision, http.StatusForbidden, "forbidden"},
		{"a denied operation", func() gongbu.Decision { return b.env.IssueIn("denied", agentA) }, http.StatusForbidden, "forbidden"},
		{"a provider without an adapter", func() gongbu.Decision {
			d := gongbutest.NewDecision()
			d.Scope.Provider = "other"
			b.env.Authority.Issue(d, "dispatching", agentA)
			return d
		}, http.StatusBadRequest, "invalid_arguments"},
		{"a malformed public handle", func() gongbu.Decision {
			d := gongbutest.NewDecision()
			d.PublicHandle = "hubu:operation:v1:codex:" + uuid.NewString()
			return d
		}, http.StatusBadRequest, "invalid_arguments"},
	}
	for _, c := range cases {
		resp := b.execute(t, b.service, c.prepare())
		if resp.StatusCode() != c.status || problemCode(t, resp.Body) != c.code {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode(), resp.Body)
		}
	}
	if b.env.Executions(t) != 0 || b.env.Provider.Submits() != 0 {
		t.Fatal("a refused request wrote a row or reached the provider")
	}
}

func TestExecuteWhileHubuIsDown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.env.Issue(agentA)
	b.env.Authority.SetDown(true)
	resp := b.execute(t, b.service, d)
	if resp.StatusCode() != http.StatusServiceUnavailable || problemCode(t, resp.Body) != "unavailable" {
		t.Fatalf("%d %s", resp.StatusCode(), resp.Body)
	}
	if b.env.Executions(t) != 0 || b.env.Provider.Submits() != 0 {
		t.Fatal("wrote a row or reached the provider without Hubu's word")
	}
	b.env.Authority.SetDown(false)
	if resp := b.execute(t, b.service, d); resp.StatusCode() != http.StatusAccepted {
		t.Fatalf("after Hubu is back: %d %s", resp.StatusCode(), resp.Body)
	}
}

func TestExecuteBodyIsStrict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.env.Issue(agentA)
	valid := rawBody(t, request(d))
	cases := []struct {
		name, contentType, body string
		status                  int
		code                    string
	}{
		{"unknown field", "application/json", strings.Replace(valid, `{`, `{"operation_key":"hubu:operation:v1:codex:x",`, 1), http.StatusBadRequest, "invalid_arguments"},
		{"unknown nested field", "application/json", strings.Replace(valid, `"prompt":`, `"call_id":"c","prompt":`, 1), http.StatusBadRequest, "invalid_arguments"},
		{"duplicate key", "application/json", strings.Replace(valid, `{`, `{"amount_micros":1,`, 1), http.StatusBadRequest, "invalid_arguments"},
		{"trailing data", "application/json", valid + `{}`, http.StatusBadRequest, "invalid_arguments"},
		{"not JSON", "application/json", `decision`, http.StatusBadRequest, "invalid_arguments"},
		{"empty", "application/json", ``, http.StatusBadRequest, "invalid_arguments"},
		{"wrong type", "application/json", strings.Replace(valid, `"amount_micros":25000`, `"amount_micros":"25000"`, 1), http.StatusBadRequest, "invalid_arguments"},
		{"no decision id", "application/json", strings.Replace(valid, `"decision_id":"`+d.DecisionID.String()+`",`, ``, 1), http.StatusBadRequest, "invalid_arguments"},
		{"an unknown tool", "application/json", strings.Replace(valid, `"tool":"generate_image"`, `"tool":"generate_video"`, 1), http.StatusBadRequest, "invalid_arguments"},
		{"an unknown output format", "application/json", strings.Replace(valid, `"prompt":`, `"output_format":"gif","prompt":`, 1), http.StatusBadRequest, "invalid_arguments"},
		{"not application/json", "text/plain", valid, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"too large", "application/json", strings.Replace(valid, `"an origami fox"`, `"`+strings.Repeat("x", httpjson.MaxBody)+`"`, 1), http.StatusRequestEntityTooLarge, "payload_too_large"},
	}
	for _, c := range cases {
		resp, err := b.service.ExecuteWithBodyWithResponse(context.Background(), nil, c.contentType, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != c.status || problemCode(t, resp.Body) != c.code {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode(), resp.Body)
		}
	}
	if b.env.Executions(t) != 0 || b.env.Provider.Submits() != 0 || b.env.Authority.Asked() != 0 {
		t.Fatal("a refused body went further than the decoder")
	}
	// The same valid body is accepted.
	resp, err := b.service.ExecuteWithBodyWithResponse(context.Background(), nil, "application/json", strings.NewReader(valid))
	if err != nil || resp.StatusCode() != http.StatusAccepted {
		t.Fatalf("valid body: %v %d %s", err, resp.StatusCode(), resp.Body)
	}
}

// Hubu's signature travels in the Hubu-Decision-Signature header: with it Gongbu runs the
// decision while Hubu cannot be asked; a signature altered on the way is refused (403) and
// nothing is recorded.
func TestSignedHandOffOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	later := b.env.Clock.Now().Add(time.Minute)
	// Gongbu reads Hubu's keys once, with the first signed hand-off.
	first := b.env.Issue(agentA)
	sig := b.env.Authority.Sign(first.DecisionID, later)
	if resp, err := b.service.ExecuteWithResponse(context.Background(), &gongbuapi.ExecuteParams{HubuDecisionSignature: &sig}, request(first)); err != nil || resp.StatusCode() != http.StatusAccepted {
		t.Fatalf("a signed hand-off: %v %v", err, resp)
	}
	b.env.Authority.SetDown(true)
	d := b.env.Issue(agentA)
	sig = b.env.Authority.Sign(d.DecisionID, later)
	parts := strings.Split(sig, ".")
	swap := "A"
	if parts[2][5] == 'A' {
		swap = "B"
	}
	tampered := strings.Join([]string{parts[0], parts[1], parts[2][:5] + swap + parts[2][6:], parts[3]}, ".")
	resp, err := b.service.ExecuteWithResponse(context.Background(), &gongbuapi.ExecuteParams{HubuDecisionSignature: &tampered}, request(d))
	if err != nil || resp.StatusCode() != http.StatusForbidden || b.env.Executions(t) != 1 {
		t.Fatalf("a tampered signature: %v %d %s, %d executions; want 403 and only the first", err, resp.StatusCode(), resp.Body, b.env.Executions(t))
	}
	resp, err = b.service.ExecuteWithResponse(context.Background(), &gongbuapi.ExecuteParams{HubuDecisionSignature: &sig}, request(d))
	if err != nil || resp.StatusCode() != http.StatusAccepted {
		t.Fatalf("a signed hand-off with Hubu down: %v %d %s", err, resp.StatusCode(), resp.Body)
	}
}
