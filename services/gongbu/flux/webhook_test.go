package flux_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu/flux"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

var webhookKey = []byte("a-webhook-key-of-at-least-32-bytes-long")

// signed carries a notice's secret as BFL does: in X-Webhook-Secret, and as the HMAC-SHA256
// of the body in X-BFL-Signature.
func signed(secret string, body []byte) http.Header {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	h := http.Header{}
	h.Set("X-Webhook-Secret", secret)
	h.Set("X-BFL-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	return h
}

// only keeps one of a notice's headers, as a sender that sends only it.
func only(h http.Header, name string) http.Header { return headers(name, h.Get(name)) }

// headers makes a header of name, value pairs.
func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// The webhook URL and a per-decision secret go with every submission; a notice signed with
// that decision's secret, recently, verifies, and no other does.
func TestWebhookSecretAndVerification(t *testing.T) {
	t.Parallel()
	b := newBFL(t)
	a, err := flux.NewAdapter(flux.Config{BaseURL: b.url, APIKey: apiKey, HonoursIdempotency: true, Timeout: 5 * time.Second,
		WebhookURL: "http://127.0.0.1:8082/v1/webhooks/bfl", WebhookKey: webhookKey})
	if err != nil {
		t.Fatal(err)
	}
	d := gongbutest.NewDecision()
	b.answer(accepted("task-1"), accepted("task-1"))
	for range 2 { // a resubmission under the same key sends the same body
		if _, err := a.Submit(context.Background(), "k", d); err != nil {
			t.Fatal(err)
		}
	}
	reqs := b.requests()
	var body map[string]any
	if err := json.Unmarshal(reqs[0].body, &body); err != nil {
		t.Fatal(err)
	}
	secret, _ := body["webhook_secret"].(string)
	if body["webhook_url"] != "http://127.0.0.1:8082/v1/webhooks/bfl" || len(secret) != 64 || string(reqs[1].body) != string(reqs[0].body) {
		t.Fatalf("submission bodies %s / %s", reqs[0].body, reqs[1].body)
	}
	if strings.Contains(secret, string(webhookKey)) || strings.Contains(secret, d.DecisionID.String()) {
		t.Fatal("the secret reveals the key or the decision")
	}

	notice := []byte(`{"id":"task-1","status":"Ready"}`)
	if job, err := a.WebhookJob(notice); err != nil || job != "task-1" {
		t.Fatalf("job %q, %v", job, err)
	}
	if job, err := a.WebhookJob([]byte(`{"task_id":"task-1","status":"SUCCESS"}`)); err != nil || job != "task-1" {
		t.Fatalf("a notice of BFL's earlier shape: job %q, %v", job, err)
	}
	good := signed(secret, notice)
	for name, h := range map[string]http.Header{"both headers": good, "the signature alone": only(good, "X-BFL-Signature"),
		"the secret alone": only(good, "X-Webhook-Secret")} {
		if err := a.VerifyWebhook(h, notice, d.DecisionID); err != nil {
			t.Fatalf("a good notice with %s: %v", name, err)
		}
	}
	other := signed(strings.Repeat("0", 64), notice)
	for _, c := range []struct {
		name     string
		header   http.Header
		body     []byte
		decision uuid.UUID
	}{
		{"another decision's job", good, notice, uuid.New()},
		{"another body", good, []byte(`{"id":"task-2","status":"Ready"}`), d.DecisionID},
		{"another secret", other, notice, d.DecisionID},
		{"another secret's signature", only(other, "X-BFL-Signature"), notice, d.DecisionID},
		{"a signature that does not match beside the right secret", headers("X-BFL-Signature", other.Get("X-BFL-Signature"),
			"X-Webhook-Secret", good.Get("X-Webhook-Secret")), notice, d.DecisionID},
		{"a signature that is no hex", headers("X-BFL-Signature", "sha256=zz"), notice, d.DecisionID},
		{"neither header", http.Header{}, notice, d.DecisionID},
	} {
		if err := a.VerifyWebhook(c.header, c.body, c.decision); err == nil {
			t.Errorf("%s: verified", c.name)
		}
	}
	if _, err := a.WebhookJob([]byte(`{"status":"Ready"}`)); err == nil {
		t.Error("a notice without an id was taken")
	}

	plain := newAdapter(t, b, true) // no webhook configured: nothing sent, nothing verified
	b.answer(accepted("task-2"))
	if _, err := plain.Submit(context.Background(), "k2", gongbutest.NewDecision()); err != nil {
		t.Fatal(err)
	}
	if last := b.requests()[2]; strings.Contains(string(last.body), "webhook") {
		t.Fatalf("a submission without a webhook configured: %s", last.body)
	}
	if err := plain.VerifyWebhook(good, notice, d.DecisionID); err == nil {
		t.Error("an adapter without a webhook key verified a notice")
	}
	for _, cfg := range []flux.Config{
		{BaseURL: b.url, WebhookURL: "ftp://x/hook", WebhookKey: webhookKey},
		{BaseURL: b.url, WebhookURL: "http://127.0.0.1/hook", WebhookKey: []byte("short")},
	} {
		if _, err := flux.NewAdapter(cfg); err == nil {
			t.Errorf("config %q with a %d-byte key was accepted", cfg.WebhookURL, len(cfg.WebhookKey))
		}
	}
}
