package flux_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu/flux"
	"hubu.dev/hubu/services/gongbu/gongbutest"
)

var webhookKey = []byte("a-webhook-key-of-at-least-32-bytes-long")

// sign signs a notice as the provider does: HMAC-SHA256(secret, timestamp "." body).
func sign(secret, stamp string, body []byte) http.Header {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(stamp + "."))
	mac.Write(body)
	h := http.Header{}
	h.Set("X-Mockflux-Timestamp", stamp)
	h.Set("X-Mockflux-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
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

	now := time.Unix(1_900_000_000, 0)
	stamp := strconv.FormatInt(now.Unix(), 10)
	notice := []byte(`{"id":"task-1","status":"Ready"}`)
	if job, err := a.WebhookJob(notice); err != nil || job != "task-1" {
		t.Fatalf("job %q, %v", job, err)
	}
	if err := a.VerifyWebhook(sign(secret, stamp, notice), notice, d.DecisionID, now.Add(time.Minute)); err != nil {
		t.Fatalf("a good notice: %v", err)
	}
	for _, c := range []struct {
		name     string
		header   http.Header
		body     []byte
		decision uuid.UUID
		now      time.Time
	}{
		{"another decision's job", sign(secret, stamp, notice), notice, uuid.New(), now},
		{"another body", sign(secret, stamp, notice), []byte(`{"id":"task-2","status":"Ready"}`), d.DecisionID, now},
		{"another secret", sign(strings.Repeat("0", 64), stamp, notice), notice, d.DecisionID, now},
		{"too old", sign(secret, stamp, notice), notice, d.DecisionID, now.Add(flux.WebhookMaxSkew + time.Second)},
		{"from the future", sign(secret, stamp, notice), notice, d.DecisionID, now.Add(-flux.WebhookMaxSkew - time.Second)},
		{"unsigned", http.Header{"X-Mockflux-Timestamp": {stamp}}, notice, d.DecisionID, now},
		{"no timestamp", http.Header{"X-Mockflux-Signature": {"sha256=00"}}, notice, d.DecisionID, now},
	} {
		if err := a.VerifyWebhook(c.header, c.body, c.decision, c.now); err == nil {
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
	if err := plain.VerifyWebhook(sign(secret, stamp, notice), notice, d.DecisionID, now); err == nil {
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
