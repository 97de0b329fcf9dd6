package httpserver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/execution"
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

// A notice about a job that a worker here is watching wakes that worker, which looks at once
// and records the result under the lease it holds: the job is not claimed from it in the
// database (that would cost a read and a write, and could have the job polled twice).
func TestProviderWebhookWakesTheJobsWatcher(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := setup(t, func(s *httpserver.Server, env *gongbutest.Env) {
		s.Webhooks = map[string]httpserver.Webhook{"bfl": signedBy{}}
		// After its first look the watcher would wait an hour before the next.
		env.Service.FirstPoll, env.Service.PollInterval = time.Hour, 2*time.Hour
		env.Service.Metrics = execution.NewMetrics(reg)
	})
	b.env.Provider.OnPoll(gongbutest.Answer(gongbu.JobPending, "", ""), gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	d := b.env.Issue(agentA)
	job := *b.execute(t, b.service, d).JSON202.ProviderJobId
	waitfor.True(t, 10*time.Second, "the watcher's first look", func() bool { return b.env.Provider.Polls() == 1 })
	submitted := b.env.Get(t, d.DecisionID)

	post := func(signature string) (int, []byte) {
		req, _ := http.NewRequest(http.MethodPost, b.url+"/v1/webhooks/bfl", strings.NewReader("job="+job))
		req.Header.Set("X-Test-Signature", signature)
		return b.do(t, req)
	}
	if status, body := post("signed-for-" + uuid.NewString()); status != http.StatusUnauthorized || problemCode(t, body) != "unauthorized" {
		t.Fatalf("a notice signed for another decision: %d %s", status, body)
	}
	if status, body := post("signed-for-" + d.DecisionID.String()); status != http.StatusNoContent {
		t.Fatalf("a signed notice: %d %s", status, body)
	}
	waitfor.True(t, 10*time.Second, "the result recorded and reported", func() bool {
		got := b.env.Get(t, d.DecisionID)
		return got.State == gongbu.StateSucceeded && got.Reported
	})
	if got := b.env.Get(t, d.DecisionID); got.LeaseGeneration != submitted.LeaseGeneration || b.env.Provider.Polls() != 2 {
		t.Fatalf("lease generation %d → %d, %d polls: want the watcher's own look, no claim", submitted.LeaseGeneration, got.LeaseGeneration, b.env.Provider.Polls())
	}
	waitfor.True(t, 10*time.Second, "the watcher gone", func() bool {
		_, _, watched := b.env.Service.Watching("bfl", job)
		return !watched
	})
	// The look the notice brought on is counted as the notice's, as a claim's would be.
	want := `# HELP gongbu_provider_polls_total Polls of provider jobs by what triggered them (watch, webhook, pass) and what they found (pending, ready, failed, lost, error).
# TYPE gongbu_provider_polls_total counter
gongbu_provider_polls_total{result="pending",trigger="watch"} 1
gongbu_provider_polls_total{result="ready",trigger="webhook"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gongbu_provider_polls_total"); err != nil {
		t.Fatal(err)
	}
}

// The provider may say a job is done before Gongbu has recorded the job (its answer to the
// submission and its notice race): the submitter registers as the job's watcher before it
// writes the record, so such a notice is taken, not refused as naming an unknown job.
func TestProviderWebhookBeforeTheJobIsRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t, func(s *httpserver.Server, env *gongbutest.Env) {
		s.Webhooks = map[string]httpserver.Webhook{"bfl": signedBy{}}
		env.Service.FirstPoll, env.Service.PollInterval = time.Hour, 2*time.Hour
	})
	d := b.env.Issue(agentA)
	noticed := make(chan int, 1)
	b.env.Provider.OnSubmit(func(ctx context.Context, key string, dec gongbu.Decision) (gongbu.Job, error) {
		job := b.env.Provider.Accept()
		accepted, err := job(ctx, key, dec)
		// Hold the job's record back: lock the execution's row until the notice is answered.
		tx, err2 := b.env.Pool.Begin(ctx)
		if err2 != nil {
			t.Error(err2)
			return accepted, err
		}
		if _, err2 := tx.Exec(ctx, "SELECT 1 FROM executions WHERE decision_id = $1 FOR UPDATE", dec.DecisionID); err2 != nil {
			t.Error(err2)
		}
		go func() {
			defer tx.Rollback(ctx) //nolint:errcheck // releases the lock; nothing was written
			// Bounded: a submitter that registers only once the job is recorded never
			// would while the row is locked, and the notice then names an unknown job.
			waitfor.Within(2*time.Second, func() bool {
				_, _, watched := b.env.Service.Watching("bfl", accepted.ID)
				return watched
			})
			req, _ := http.NewRequest(http.MethodPost, b.url+"/v1/webhooks/bfl", strings.NewReader("job="+accepted.ID))
			req.Header.Set("X-Test-Signature", "signed-for-"+dec.DecisionID.String())
			status, _ := b.do(t, req)
			if got := b.env.Get(t, dec.DecisionID); got.ProviderJobID != nil {
				t.Errorf("the job was recorded before the notice was answered: the test proves nothing")
			}
			noticed <- status
		}()
		return accepted, err
	})
	b.env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	b.execute(t, b.service, d)
	if status := <-noticed; status != http.StatusNoContent {
		t.Fatalf("a notice before the job's record: %d, want 204", status)
	}
	waitfor.True(t, 10*time.Second, "the result recorded and reported", func() bool {
		got := b.env.Get(t, d.DecisionID)
		return got.State == gongbu.StateSucceeded && got.Reported
	})
	if got := b.env.Get(t, d.DecisionID); got.LeaseGeneration != 0 || b.env.Provider.Polls() != 1 {
		t.Fatalf("lease generation %d, %d polls: want the submitter's own look, no claim", got.LeaseGeneration, b.env.Provider.Polls())
	}
}
