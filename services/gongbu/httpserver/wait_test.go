package httpserver_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"hubu.dev/hubu/kit/pglisten"
	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/proto/gongbuapi"
	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/changefeed"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/httpserver"
)

// asking starts a request for the execution of handle with params, as the agent whose token
// it is, and returns a channel for its answer.
func asking(t *testing.T, b *bundle, token, handle string, params gongbuapi.GetOperationExecutionParams) <-chan *gongbuapi.GetOperationExecutionResponse {
	answer := make(chan *gongbuapi.GetOperationExecutionResponse, 1)
	go func() {
		resp, err := b.client(t, token).GetOperationExecutionWithResponse(context.Background(), handle, &params)
		if err != nil {
			t.Error(err)
		}
		answer <- resp
	}()
	return answer
}

// waiting starts a request that waits up to 30 s for the operation's execution to leave state
// seen (nil: to exist), and returns once Gongbu holds it, with a channel for its answer.
func waiting(t *testing.T, b *bundle, feed *changefeed.Feed, handle string, seen *gongbuapi.ExecutionState) <-chan *gongbuapi.GetOperationExecutionResponse {
	t.Helper()
	before := feed.Waiters()
	wait := 30
	answer := asking(t, b, agentA, handle, gongbuapi.GetOperationExecutionParams{Wait: &wait, State: seen})
	if !waitfor.Within(10*time.Second, func() bool { return feed.Waiters() != before }) {
		t.Fatal("the request never began to wait")
	}
	return answer
}

// waitable serves Gongbu with a feed of changes that only the test drives (the backstop is an
// hour), and executes a decision of agent A, which is left submitted.
func waitable(t *testing.T, options ...func(*httpserver.Server, *gongbutest.Env)) (*bundle, *changefeed.Feed, gongbu.Decision) {
	t.Helper()
	feed := &changefeed.Feed{}
	b := setup(t, append([]func(*httpserver.Server, *gongbutest.Env){withFeed(feed, time.Hour)}, options...)...)
	d := b.env.Issue(agentA)
	b.execute(t, b.service, d)
	return b, feed, d
}

// succeed has provider answer the next poll Ready, lets the worker record the success, and
// wakes the waiters of d as the database's listener would.
func succeed(t *testing.T, b *bundle, feed *changefeed.Feed, provider interface{ OnPoll(...gongbutest.PollFunc) }, d gongbu.Decision) {
	t.Helper()
	provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	b.env.Clock.Advance(gongbutest.PollInterval)
	b.env.Tick(t)
	feed.Notify(d.PublicHandle)
}

// answered takes the waiting request's answer; the wait is 30 s, so an answer within 20 s
// came from a change, not from the time running out.
func answered(t *testing.T, answer <-chan *gongbuapi.GetOperationExecutionResponse) *gongbuapi.GetOperationExecutionResponse {
	t.Helper()
	select {
	case resp := <-answer:
		return resp
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting request was not woken by the change")
		return nil
	}
}

func withFeed(feed *changefeed.Feed, backstop time.Duration) func(*httpserver.Server, *gongbutest.Env) {
	return func(s *httpserver.Server, _ *gongbutest.Env) { s.Changes, s.WaitBackstop = feed, backstop }
}

// A change recorded anywhere (here: by a worker on the same database, through Postgres
// LISTEN/NOTIFY) ends the wait at once; the backstop is an hour, so only the notification can.
func TestWaitEndsWhenTheExecutionChanges(t *testing.T) {
	t.Parallel()
	feed := &changefeed.Feed{}
	b := setup(t, withFeed(feed, time.Hour))
	listener := pglisten.New(b.env.DBURL, nil)
	listener.Handle(changefeed.Channel, feed.Notify)
	listener.OnGap(feed.NotifyAll)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); listener.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	waitfor.True(t, 10*time.Second, "the listener to connect", listener.Connected)

	// Waiting for an execution that does not exist yet: its insert ends the wait.
	d := b.env.Issue(agentA)
	answer := waiting(t, b, feed, d.PublicHandle, nil)
	b.execute(t, b.service, d)
	if resp := answered(t, answer); resp.JSON200 == nil || (resp.JSON200.State != gongbuapi.Submitting && resp.JSON200.State != gongbuapi.Submitted) {
		t.Fatalf("waiting for the execution to exist: %d %s", resp.StatusCode(), resp.Body)
	}

	// Waiting while it is submitted: the poll that finds the image ends the wait.
	seen := gongbuapi.Submitted
	answer = waiting(t, b, feed, d.PublicHandle, &seen)
	b.env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	b.env.Clock.Advance(gongbutest.PollInterval)
	b.env.Tick(t)
	if resp := answered(t, answer); resp.JSON200 == nil || resp.JSON200.State != gongbuapi.Succeeded || resp.JSON200.Result == nil {
		t.Fatalf("waiting for the result: %d %s", resp.StatusCode(), resp.Body)
	}
}

// A lost notification (here: nothing feeds the feed at all) costs latency, never the answer:
// the waiting request reads again on its backstop interval.
func TestWaitSurvivesALostNotification(t *testing.T) {
	t.Parallel()
	feed := &changefeed.Feed{}
	b := setup(t, withFeed(feed, 50*time.Millisecond))
	d := b.env.Issue(agentA)
	b.execute(t, b.service, d)

	seen := gongbuapi.Submitted
	answer := waiting(t, b, feed, d.PublicHandle, &seen)
	b.env.Provider.OnPoll(gongbutest.Answer(gongbu.JobReady, "https://provider.test/s.png", ""))
	b.env.Clock.Advance(gongbutest.PollInterval)
	b.env.Tick(t)
	if resp := answered(t, answer); resp.JSON200 == nil || resp.JSON200.State != gongbuapi.Succeeded {
		t.Fatalf("after the backstop: %d %s", resp.StatusCode(), resp.Body)
	}
}

// Without a change the answer comes when the wait is up, as the execution stands; and the
// wait's bounds are checked.
func TestWaitEndsWithTheExecutionAsItStands(t *testing.T) {
	t.Parallel()
	b := setup(t, withFeed(&changefeed.Feed{}, time.Hour))
	d := b.env.Issue(agentA)
	b.execute(t, b.service, d)
	agent := b.client(t, agentA)
	ctx := context.Background()

	one, seen := 1, gongbuapi.Submitted
	resp, err := agent.GetOperationExecutionWithResponse(ctx, d.PublicHandle, &gongbuapi.GetOperationExecutionParams{Wait: &one, State: &seen})
	if err != nil || resp.JSON200 == nil || resp.JSON200.State != gongbuapi.Submitted {
		t.Fatalf("unchanged: %v %d %s", err, resp.StatusCode(), resp.Body)
	}
	notYet := b.env.Issue(agentA)
	resp, err = agent.GetOperationExecutionWithResponse(ctx, notYet.PublicHandle, &gongbuapi.GetOperationExecutionParams{Wait: &one})
	if err != nil || resp.StatusCode() != http.StatusNotFound || problemCode(t, resp.Body) != "not_found" {
		t.Fatalf("never executed: %v %d %s", err, resp.StatusCode(), resp.Body)
	}
	// A state other than the one the caller saw answers at once, whatever the wait.
	other, thirty := gongbuapi.Submitting, 30
	start := time.Now()
	resp, err = agent.GetOperationExecutionWithResponse(ctx, d.PublicHandle, &gongbuapi.GetOperationExecutionParams{Wait: &thirty, State: &other})
	if err != nil || resp.JSON200 == nil || resp.JSON200.State != gongbuapi.Submitted || time.Since(start) > 20*time.Second {
		t.Fatalf("already changed: %v %d %s", err, resp.StatusCode(), resp.Body)
	}

	for _, path := range []string{"?wait=31", "?wait=-1", "?wait=soon", "?wait=1&state=done"} {
		req, _ := http.NewRequest(http.MethodGet, b.url+"/v1/operations/"+d.PublicHandle+"/execution"+path, nil)
		req.Header.Set("Authorization", "Bearer "+agentA)
		if status, body := b.do(t, req); status != http.StatusBadRequest || problemCode(t, body) != "invalid_arguments" {
			t.Fatalf("%s: %d %s", path, status, body)
		}
	}
}

// Hubu's check of who may read the operation runs beside the wait, not before it: here Hubu
// answers only once the request is waiting, which a check made first would never see.
// Nothing read meanwhile is answered before the check passes.
func TestOwnershipIsCheckedBesideTheWait(t *testing.T) {
	t.Parallel()
	b, feed, d := waitable(t)
	seen := gongbuapi.Submitted

	b.env.Authority.OnOwns(func() {
		if !waitfor.Within(10*time.Second, func() bool { return feed.Waiters() > 0 }) {
			t.Error("the request did not wait until Hubu had checked who may read the operation")
		}
	})
	wait := 30
	answer := asking(t, b, agentA, d.PublicHandle, gongbuapi.GetOperationExecutionParams{Wait: &wait, State: &seen})
	succeed(t, b, feed, b.env.Provider, d)
	if resp := answered(t, answer); resp.JSON200 == nil || resp.JSON200.State != gongbuapi.Succeeded {
		t.Fatalf("owner: %d %s", resp.StatusCode(), resp.Body)
	}
}

// A refusal ends the wait, not a read already in Postgres: the read finishes and its
// connection goes back to the pool. (pgx closes a connection whose query is cancelled, so
// each refused caller would otherwise cost the pool that hand-offs share a connection.)
func TestRefusalLeavesTheReadItsConnection(t *testing.T) {
	t.Parallel()
	b, _, d := waitable(t)
	ctx, pool := context.Background(), b.env.Pool
	lockWaiters := func() bool {
		var n int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
		return err == nil && n > 0
	}
	// A lock on the table holds the request's first read in Postgres.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE executions IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	destroyed := func() int64 { st := pool.Stat(); return st.NewConnsCount() - int64(st.TotalConns()) }
	before := destroyed()
	var asked atomic.Bool
	b.env.Authority.OnOwns(func() { // Hubu refuses once the read is in Postgres
		waitfor.Within(10*time.Second, lockWaiters)
		asked.Store(true)
	})
	seen, thirty := gongbuapi.Submitted, 30
	answer := asking(t, b, agentB, d.PublicHandle, gongbuapi.GetOperationExecutionParams{Wait: &thirty, State: &seen})
	waitfor.True(t, 10*time.Second, "the first read to wait for the lock", lockWaiters)
	waitfor.True(t, 10*time.Second, "Hubu to answer", asked.Load)
	select {
	case resp := <-answer:
		t.Fatalf("answered %d while its read was still in Postgres: the refusal broke the read off", resp.StatusCode())
	case <-time.After(300 * time.Millisecond): // the fake Hubu's refusal follows at once
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if resp := answered(t, answer); resp.StatusCode() != http.StatusNotFound {
		t.Fatalf("another agent: %d %s", resp.StatusCode(), resp.Body)
	}
	if n := destroyed() - before; n != 0 {
		t.Fatalf("the refused request cost the pool %d connections", n)
	}
}

// A check that refuses ends the wait at once, and the answer tells nothing of the execution:
// another agent's token, and a Hubu that cannot be reached.
func TestRefusedOwnershipEndsTheWait(t *testing.T) {
	t.Parallel()
	b, feed, d := waitable(t)
	seen := gongbuapi.Submitted
	thirty := 30
	ask := func(token string) *gongbuapi.GetOperationExecutionResponse {
		t.Helper()
		start := time.Now()
		resp, err := b.client(t, token).GetOperationExecutionWithResponse(context.Background(), d.PublicHandle,
			&gongbuapi.GetOperationExecutionParams{Wait: &thirty, State: &seen})
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the refusal waited for the execution: %d %s", resp.StatusCode(), resp.Body)
		}
		if strings.Contains(string(resp.Body), d.DecisionID.String()) || strings.Contains(string(resp.Body), "submitted") {
			t.Fatalf("the refusal reveals the execution: %s", resp.Body)
		}
		return resp
	}
	if resp := ask(agentB); resp.StatusCode() != http.StatusNotFound || problemCode(t, resp.Body) != "not_found" {
		t.Fatalf("another agent: %d %s", resp.StatusCode(), resp.Body)
	}
	b.env.Authority.SetDown(true)
	if resp := ask(agentA); resp.StatusCode() != http.StatusServiceUnavailable || problemCode(t, resp.Body) != "unavailable" {
		t.Fatalf("Hubu down: %d %s", resp.StatusCode(), resp.Body)
	}
	if n := feed.Waiters(); n != 0 {
		t.Fatalf("%d waits left behind", n)
	}
}

// Hubu's read capability answers the ownership question: with Hubu down, a caller whose
// capability is for this operation and its own token is served; any other capability is
// ignored and Hubu is asked (and cannot answer).
func TestReadCapabilitySparesTheQuestionToHubu(t *testing.T) {
	t.Parallel()
	b, _, d := waitable(t)
	later := b.env.Clock.Now().Add(time.Minute)
	read := func(token, capability string) (int, int) {
		t.Helper()
		c := b.client(t, token)
		exec, err := c.GetOperationExecutionWithResponse(context.Background(), d.PublicHandle,
			&gongbuapi.GetOperationExecutionParams{HubuReadCapability: &capability})
		if err != nil {
			t.Fatal(err)
		}
		img, err := c.GetOperationImageWithResponse(context.Background(), d.PublicHandle,
			&gongbuapi.GetOperationImageParams{HubuReadCapability: &capability})
		if err != nil {
			t.Fatal(err)
		}
		return exec.StatusCode(), img.StatusCode()
	}
	good := b.env.Authority.SignRead(d.PublicHandle, agentA, "", later)
	if exec, img := read(agentA, good); exec != http.StatusOK || img != http.StatusNotFound {
		t.Fatalf("with the capability, Hubu up: execution %d, image %d", exec, img)
	}
	// Gongbu holds Hubu's keys now; from here on Hubu cannot answer anything.
	b.env.Authority.SetDown(true)
	if exec, img := read(agentA, good); exec != http.StatusOK || img != http.StatusNotFound {
		t.Fatalf("with the capability: execution %d, image %d; want 200 and 404 (no image yet), without Hubu", exec, img)
	}
	parts := strings.Split(good, ".")
	for name, c := range map[string]struct{ token, capability string }{
		"another agent's token":          {agentB, good},
		"another operation's capability": {agentA, b.env.Authority.SignRead(gongbutest.NewDecision().PublicHandle, agentA, "", later)},
		"a capability for another grant": {agentA, b.env.Authority.SignRead(d.PublicHandle, agentA, "5c1d3c52-8a7e-4b52-9d6e-3b0f3f6f2a10", later)},
		"an expired capability":          {agentA, b.env.Authority.SignRead(d.PublicHandle, agentA, "", b.env.Clock.Now())},
		"a decision's signature":         {agentA, b.env.Authority.Sign(d.DecisionID, later)},
		"a capability with other claims": {agentA, strings.Join([]string{parts[0], parts[1], parts[2][:len(parts[2])-2] + "AA", parts[3]}, ".")},
	} {
		if exec, img := read(c.token, c.capability); exec != http.StatusServiceUnavailable || img != http.StatusServiceUnavailable {
			t.Errorf("%s: execution %d, image %d; want 503 for both (Hubu asked, and down)", name, exec, img)
		}
	}
}
