package httpserver_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/httpserver"
)

// signedBy is a provider whose notices are signed by a header naming the decision.
type signedBy struct{}

func (signedBy) WebhookJob(body []byte) (string, error) {
	id, ok := strings.CutPrefix(string(body), "job=")
	if !ok {
		return "", errors.New("not a notice")
	}
	return id, nil
}

func (signedBy) VerifyWebhook(h http.Header, _ []byte, decisionID uuid.UUID) error {
	if h.Get("X-Test-Signature") != "signed-for-"+decisionID.String() {
		return errors.New("bad signature")
	}
	return nil
}

// A provider's signed notice polls the job at once; a notice that is not signed for the job's
// decision polls nothing.
func TestProviderWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t, func(s *httpserver.Server, _ *gongbutest.Env) {
		s.Webhooks = map[string]httpserver.Webhook{"bfl": signedBy{}}
	})
	d := b.env.Issue(agentA)
	job := *b.execute(t, b.service, d).JSON202.ProviderJobId
	b.env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))

	post := func(provider, body, signature string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPost, b.url+"/v1/webhooks/"+provider, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if signature != "" {
			req.Header.Set("X-Test-Signature", signature)
		}
		return b.do(t, req)
	}
	for _, c := range []struct {
		name, provider, body, signature string
		status                          int
		code                            string
	}{
		{"a provider without webhooks", "other", "job=" + job, "signed-for-" + d.DecisionID.String(), http.StatusNotFound, "not_found"},
		{"not a notice", "bfl", "hello", "", http.StatusBadRequest, "invalid_arguments"},
		{"an unknown job", "bfl", "job=nobody", "signed-for-" + d.DecisionID.String(), http.StatusNotFound, "not_found"},
		{"signed for another decision", "bfl", "job=" + job, "signed-for-" + uuid.NewString(), http.StatusUnauthorized, "unauthorized"},
		{"unsigned", "bfl", "job=" + job, "", http.StatusUnauthorized, "unauthorized"},
		{"too large", "bfl", "job=" + strings.Repeat("x", 5000), "", http.StatusRequestEntityTooLarge, "payload_too_large"},
	} {
		if status, body := post(c.provider, c.body, c.signature); status != c.status || problemCode(t, body) != c.code {
			t.Fatalf("%s: %d %s", c.name, status, body)
		}
	}
	if n := b.env.Provider.Polls(); n != 0 {
		t.Fatalf("refused notices polled the job %d times", n)
	}

	for range 2 { // a repeated notice is harmless
		if status, body := post("bfl", "job="+job, "signed-for-"+d.DecisionID.String()); status != http.StatusNoContent {
			t.Fatalf("a signed notice: %d %s", status, body)
		}
	}
	if got := b.env.Get(t, d.DecisionID); got.State != gongbu.StateSucceeded || !got.Reported || b.env.Provider.Polls() != 1 {
		t.Fatalf("after the notice: %s, reported %v, %d polls", got.State, got.Reported, b.env.Provider.Polls())
	}
}
