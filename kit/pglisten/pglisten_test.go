package pglisten_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"hubu.dev/hubu/kit/leaktest"
	"hubu.dev/hubu/kit/pglisten"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// recorder collects what a Listener hands on.
type recorder struct {
	mu    sync.Mutex
	notes []string
	gaps  int
	ch    chan struct{}
}

func (r *recorder) note(p string) { r.mu.Lock(); r.notes = append(r.notes, p); r.mu.Unlock(); r.poke() }
func (r *recorder) gap()          { r.mu.Lock(); r.gaps++; r.mu.Unlock(); r.poke() }
func (r *recorder) poke() {
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

// waitFor waits, with a bound, until cond holds of the recorder.
func (r *recorder) waitFor(t *testing.T, what string, cond func(notes []string, gaps int) bool) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		r.mu.Lock()
		ok := cond(r.notes, r.gaps)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestListenerDeliversAndReportsGaps(t *testing.T) {
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		t.Fatal("TEST_DATABASE_URL is not set; run the tests with `make test`, which finds or starts a Postgres")
	}
	ctx := context.Background()
	channel := fmt.Sprintf("pglisten_test_%d", time.Now().UnixNano())
	rec := &recorder{ch: make(chan struct{}, 1)}
	// A pool setting in the URL, as a service's database URL may carry, is no server parameter.
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	l := pglisten.New(url+sep+"pool_max_conns=8", nil)
	l.Handle(channel, rec.note)
	l.OnGap(rec.gap)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); l.Run(runCtx) }()
	defer func() { stop(); <-done }()

	rec.waitFor(t, "the first connection's gap", func(_ []string, gaps int) bool { return gaps == 1 })
	if !l.Connected() {
		t.Fatal("not connected after the connection's gap was announced")
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	notify := func(payload string) {
		t.Helper()
		if _, err := conn.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
			t.Fatal(err)
		}
	}
	notify("one")
	notify("two")
	rec.waitFor(t, "two notifications in order", func(notes []string, _ int) bool {
		return len(notes) == 2 && notes[0] == "one" && notes[1] == "two"
	})

	// A lost connection is a gap (the loss), then another (the reconnection, after LISTEN),
	// and notifications flow again.
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE query = $1 AND pid <> pg_backend_pid()`, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the loss and the reconnection", func(_ []string, gaps int) bool { return gaps >= 3 })
	rec.waitFor(t, "a connection again", func([]string, int) bool { return l.Connected() })
	notify("three")
	rec.waitFor(t, "a notification after the reconnection", func(notes []string, _ int) bool {
		return len(notes) == 3 && notes[2] == "three"
	})
}

func TestListenerWithoutDatabaseKeepsTrying(t *testing.T) {
	t.Parallel()
	rec := &recorder{ch: make(chan struct{}, 1)}
	l := pglisten.New("postgres://nobody@127.0.0.1:1/none?connect_timeout=1", nil)
	l.OnGap(rec.gap)
	ctx, stop := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stop()
	l.Run(ctx) // returns when ctx ends, having never connected
	if l.Connected() || rec.gaps != 0 {
		t.Fatalf("connected %v, gaps %d: a listener that never connected announced a gap", l.Connected(), rec.gaps)
	}
}
