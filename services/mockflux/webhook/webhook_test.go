package webhook_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"hubu.dev/hubu/kit/leaktest"
	"hubu.dev/hubu/kit/testclock"
	"hubu.dev/hubu/kit/testlog"
	"hubu.dev/hubu/services/mockflux/internal/hooktest"
	"hubu.dev/hubu/services/mockflux/internal/timertest"
	"hubu.dev/hubu/services/mockflux/webhook"
)

// TestMain fails the package when a delivery goroutine outlives its Dispatcher's Close.
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

const secret = "whsec-0123456789abcdef"

type bundle struct {
	d      *webhook.Dispatcher
	timers *timertest.Timers
	logs   *testlog.Buffer
	done   chan outcome
}

type outcome struct {
	job string
	o   webhook.Outcome
}

func setup(t *testing.T, opts webhook.Options) *bundle {
	t.Helper()
	b := &bundle{timers: timertest.New(testclock.New()), logs: &testlog.Buffer{}, done: make(chan outcome, 16)}
	opts.Now, opts.After = b.timers.Clock.Now, b.timers.After
	opts.Logger = slog.New(slog.NewJSONHandler(b.logs, nil))
	opts.Done = func(job string, o webhook.Outcome) { b.done <- outcome{job, o} }
	b.d = webhook.New(opts)
	t.Cleanup(b.d.Close)
	return b
}

func (b *bundle) notice(job, url string, due time.Duration) webhook.Notice {
	return webhook.Notice{JobID: job, URL: url, Secret: []byte(secret), Due: b.timers.Clock.Now().Add(due)}
}

func (b *bundle) awaitDone(t *testing.T, want outcome) {
	t.Helper()
	select {
	case got := <-b.done:
		if got != want {
			t.Fatalf("done %+v, want %+v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("not done after 10s, want %+v", want)
	}
}

// A notice waits for its due time on the clock, then goes out once, signed with that time.
func TestSendsWhenDue(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Options{})
	rcv := hooktest.New(t, nil)
	b.d.Send(b.notice("job-1", rcv.URL+"/hook", time.Minute))
	if b.timers.Waiting() != 1 {
		t.Fatalf("%d timers waiting after Send, want the notice's", b.timers.Waiting())
	}
	b.timers.Advance(time.Minute - time.Nanosecond)
	if n := len(rcv.Notices()); n != 0 || b.timers.Waiting() != 1 {
		t.Fatalf("%d notices before the due time", n)
	}
	b.timers.Advance(time.Nanosecond)
	b.awaitDone(t, outcome{"job-1", webhook.Delivered})
	got := rcv.Notices()
	if len(got) != 1 {
		t.Fatalf("%d notices", len(got))
	}
	hooktest.Check(t, got[0], secret, "job-1")

	// Already due: at once, no timer.
	b.d.Send(b.notice("job-2", rcv.URL, -time.Hour))
	b.awaitDone(t, outcome{"job-2", webhook.Delivered})
	hooktest.Check(t, rcv.Await(t, 2)[1], secret, "job-2")
}

// Sign's output is what a receiver computes from the spec's description; the vectors were
// computed outside Go (`printf '{}' | openssl dgst -sha256 -hmac key`).
func TestSign(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ secret, body, want string }{
		{"key", "{}", "sha256=a777724d943eb48dc69bca8a4a6d57a04db3f9ec7e1de4e581e860265bdf3032"},
		{secret, `{"id":"job-1","status":"Ready"}`, "sha256=c1058af26bb4fe0f2c74c2fed8df3ba44b7153c9f45b5da85fdf2f1384762813"},
	} {
		if got := webhook.Sign([]byte(c.secret), []byte(c.body)); got != c.want {
			t.Errorf("Sign(%q, %s) = %s, want %s", c.secret, c.body, got, c.want)
		}
	}
}

// Three attempts, 100 ms and 500 ms apart on the clock, each carrying the secret; then the
// notice has failed, and the log says so without the URL's query or the secret.
func TestGivesUpAfterThreeAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Options{})
	rcv := hooktest.New(t, func(int) int { return http.StatusServiceUnavailable })
	b.d.Send(b.notice("job-1", rcv.URL+"/hook?token=query-credential", 0))
	rcv.Await(t, 1)
	b.timers.AwaitWaiting(t, 1)
	b.timers.Advance(2 * time.Second)
	rcv.Await(t, 2)
	b.timers.AwaitWaiting(t, 1)
	b.timers.Advance(3 * time.Second)
	b.awaitDone(t, outcome{"job-1", webhook.Failed})
	got := rcv.Notices()
	if len(got) != 3 {
		t.Fatalf("%d attempts, want 3", len(got))
	}
	if asked := b.timers.Asked(); !slices.Equal(asked, []time.Duration{100 * time.Millisecond, 500 * time.Millisecond}) {
		t.Fatalf("waits %v", asked)
	}
	for _, n := range got {
		hooktest.Check(t, n, secret, "job-1")
	}
	logs := b.logs.String()
	if !strings.Contains(logs, "giving up") || !strings.Contains(logs, "the receiver answered 503") || !strings.Contains(logs, rcv.URL+"/hook") {
		t.Fatalf("log: %s", logs)
	}
	if strings.Contains(logs, "query-credential") || strings.Contains(logs, secret) {
		t.Fatalf("the log carries the query or the secret: %s", logs)
	}
}

// A receiver that cannot be reached fails the attempt too, and the log line (a *url.Error
// quotes the URL) carries neither the query nor the user information.
func TestUnreachableReceiver(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Options{RetryWaits: []time.Duration{}})
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	dead := strings.Replace(gone.URL, "http://", "http://user:hunter2pass@", 1) + "/x?token=query-credential"
	b.d.Send(b.notice("job-1", dead, 0))
	b.awaitDone(t, outcome{"job-1", webhook.Failed})
	logs := b.logs.String()
	if !strings.Contains(logs, "giving up") || !strings.Contains(logs, gone.URL+"/x") {
		t.Fatalf("log: %s", logs)
	}
	if strings.Contains(logs, "query-credential") || strings.Contains(logs, "hunter2pass") {
		t.Fatalf("the log carries the query or the password: %s", logs)
	}
}

// A receiver that redirects is misconfigured: the redirect is not followed and the attempt
// has failed.
func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Options{RetryWaits: []time.Duration{}})
	rcv := hooktest.New(t, func(int) int { return http.StatusTemporaryRedirect })
	b.d.Send(b.notice("job-1", rcv.URL+"/hook", 0))
	b.awaitDone(t, outcome{"job-1", webhook.Failed})
	if n := len(rcv.Notices()); n != 1 {
		t.Fatalf("%d requests, want 1 (the redirect not followed)", n)
	}
}

func TestDrop(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	drops := 1
	b := setup(t, webhook.Options{Drop: func() bool {
		mu.Lock()
		defer mu.Unlock()
		drops--
		return drops >= 0
	}})
	rcv := hooktest.New(t, nil)
	b.d.Send(b.notice("job-1", rcv.URL, 0))
	b.awaitDone(t, outcome{"job-1", webhook.Dropped})
	b.d.Send(b.notice("job-2", rcv.URL, 0))
	b.awaitDone(t, outcome{"job-2", webhook.Delivered})
	if got := rcv.Notices(); len(got) != 1 || !bytes.Contains(got[0].Body, []byte("job-2")) {
		t.Fatalf("notices %+v", got)
	}
}

// Close stops notices waiting for their due time and attempts under way, tells Done of
// neither (they stay due), and later Sends do nothing.
func TestCloseStopsEverything(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.Options{})
	hanging := hooktest.New(t, func(int) int { return hooktest.Hang })
	b.d.Send(b.notice("waiting", hanging.URL, time.Hour))
	b.d.Send(b.notice("under-way", hanging.URL, 0))
	hanging.Await(t, 1)
	closed := make(chan struct{})
	go func() { b.d.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	b.d.Send(b.notice("after", hanging.URL, 0))
	select {
	case got := <-b.done:
		t.Fatalf("Done told of %+v", got)
	default:
	}
	if n := len(hanging.Notices()); n != 1 {
		t.Fatalf("%d requests", n)
	}
}
