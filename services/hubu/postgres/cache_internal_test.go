package postgres

import (
	"errors"
	"sync"
	"testing"
	"time"

	"hubu.dev/hubu/kit/testclock"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// fakeListener is a Listener that a test connects, notifies and cuts by hand.
type fakeListener struct {
	mu        sync.Mutex
	connected bool
	handlers  map[string]func(string)
	gaps      []func()
}

func (l *fakeListener) Handle(channel string, f func(string)) { l.handlers[channel] = f }
func (l *fakeListener) OnGap(f func())                        { l.gaps = append(l.gaps, f) }

func (l *fakeListener) Connected() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.connected
}

// connect and disconnect announce the gap as kit/pglisten does: after LISTEN, and once the
// loss is known.
func (l *fakeListener) connect() {
	l.mu.Lock()
	l.connected = true
	l.mu.Unlock()
	l.gap()
}

func (l *fakeListener) disconnect() {
	l.mu.Lock()
	l.connected = false
	l.mu.Unlock()
	l.gap()
}

func (l *fakeListener) gap() {
	for _, f := range l.gaps {
		f()
	}
}

func (l *fakeListener) notify(channel string) { l.handlers[channel]("") }

// reads counts the reads of one credential that a cache let through to "the database".
type reads struct {
	n      int
	during func() // runs inside the read, between its start and its result
}

func (r *reads) read() (hubudb.Credential, error) {
	r.n++
	if r.during != nil {
		r.during()
	}
	return hubudb.Credential{Name: "alice"}, nil
}

func newTestCache(t *testing.T) (*Cache, *fakeListener, *testclock.Clock) {
	t.Helper()
	l := &fakeListener{handlers: map[string]func(string){}}
	clock := testclock.New()
	c := NewCache(l, &CacheOptions{TTL: 5 * time.Second, MaxCredentials: 2, Now: clock.Now})
	l.connect()
	return c, l, clock
}

// authenticate is what Store.AuthenticateHash asks of the cache.
func authenticate(t *testing.T, c *Cache, hash string, r *reads) {
	t.Helper()
	if _, err := load(c, c.credentialEntries(), hash, r.read); err != nil {
		t.Fatal(err)
	}
}

func wantReads(t *testing.T, what string, r *reads, n int) {
	t.Helper()
	if r.n != n {
		t.Fatalf("%s: %d reads of the database, want %d", what, r.n, n)
	}
}

func TestCacheServesWhatItRead(t *testing.T) {
	t.Parallel()
	c, _, clock := newTestCache(t)
	r := &reads{}
	authenticate(t, c, "a", r)
	authenticate(t, c, "a", r)
	wantReads(t, "a second lookup", r, 1)
	clock.Advance(5*time.Second - time.Millisecond)
	authenticate(t, c, "a", r)
	wantReads(t, "within the TTL", r, 1)
	clock.Advance(time.Millisecond)
	authenticate(t, c, "a", r)
	wantReads(t, "once the TTL is over", r, 2)
}

// A notification drops its own table, and only that one.
func TestCacheDropsOnNotification(t *testing.T) {
	t.Parallel()
	c, l, _ := newTestCache(t)
	r := &reads{}
	prices := 0
	readPrices := func() (hubu.Catalog, error) { prices++; return hubu.Catalog{}, nil }
	authenticate(t, c, "a", r)
	if _, err := load(c, c.priceEntries(), struct{}{}, readPrices); err != nil {
		t.Fatal(err)
	}
	l.notify(credentialsChannel)
	authenticate(t, c, "a", r)
	wantReads(t, "after a credential change", r, 2)
	if _, err := load(c, c.priceEntries(), struct{}{}, readPrices); err != nil || prices != 1 {
		t.Fatalf("a credential change dropped the prices: %d reads, %v", prices, err)
	}
	l.notify(pricesChannel)
	if _, err := load(c, c.priceEntries(), struct{}{}, readPrices); err != nil || prices != 2 {
		t.Fatalf("after a price change: %d reads, %v", prices, err)
	}
	authenticate(t, c, "a", r)
	wantReads(t, "a price change dropped the credentials", r, 2)
}

// Without a listening connection the cache neither serves nor stores: a change it would not
// hear of could leave a stale entry. The gaps drop everything: what was cached before the
// connection was lost, and what anything read before the new one was LISTENing.
func TestCacheOnlyWhileListening(t *testing.T) {
	t.Parallel()
	c, l, _ := newTestCache(t)
	r := &reads{}
	authenticate(t, c, "a", r)
	l.disconnect()
	authenticate(t, c, "a", r)
	authenticate(t, c, "a", r)
	wantReads(t, "while disconnected", r, 3)
	l.connect()
	authenticate(t, c, "a", r)
	authenticate(t, c, "a", r)
	wantReads(t, "connected again", r, 4)

	// The listener knows its connection is gone but has not announced the gap yet: nothing is
	// served.
	l.mu.Lock()
	l.connected = false
	l.mu.Unlock()
	authenticate(t, c, "a", r)
	wantReads(t, "disconnected, before the gap", r, 5)
	l.connect()

	// The connection is lost during a read: what it read is not kept.
	r.during = l.disconnect
	authenticate(t, c, "b", r)
	r.during = nil
	l.connect()
	authenticate(t, c, "b", r)
	wantReads(t, "a read during which the connection was lost", r, 7)
}

// A change committed while a read was under way may be missing from what it read: a drop
// between the start of a read and its result keeps the result out of the cache. Without the
// generation check, the revoked credential read before the revocation would be served until
// the TTL ends.
func TestCacheKeepsNoReadThatRacedADrop(t *testing.T) {
	t.Parallel()
	for _, drop := range []struct {
		name string
		do   func(*Cache, *fakeListener)
	}{
		{"the notification", func(_ *Cache, l *fakeListener) { l.notify(credentialsChannel) }},
		{"the changing process's own drop", func(c *Cache, _ *fakeListener) { c.credentialsChanged() }},
		{"a reconnection", func(_ *Cache, l *fakeListener) { l.gap() }},
	} {
		t.Run(drop.name, func(t *testing.T) {
			t.Parallel()
			c, l, _ := newTestCache(t)
			r := &reads{during: func() { drop.do(c, l) }}
			authenticate(t, c, "a", r)
			r.during = nil
			authenticate(t, c, "a", r)
			wantReads(t, "after a read that raced "+drop.name, r, 2)
			authenticate(t, c, "a", r)
			wantReads(t, "a read after the drop is kept", r, 2)
		})
	}
}

// A failed read is never kept, and the cache holds at most MaxCredentials.
func TestCacheKeepsNoErrorAndStaysBounded(t *testing.T) {
	t.Parallel()
	c, _, _ := newTestCache(t)
	failures := 0
	fail := func() (hubudb.Credential, error) {
		failures++
		return hubudb.Credential{}, errors.New("no such credential")
	}
	for range 2 {
		if _, err := load(c, c.credentialEntries(), "unknown", fail); err == nil {
			t.Fatal("a failed read succeeded")
		}
	}
	if failures != 2 {
		t.Fatalf("%d reads of an unknown token, want 2: an error was cached", failures)
	}
	r := &reads{}
	for _, h := range []string{"a", "b", "c"} {
		authenticate(t, c, h, r)
	}
	if n := len(c.credentials.m); n != 2 {
		t.Fatalf("%d credentials cached, want the maximum, 2", n)
	}
}

// A nil Cache reads every time.
func TestNilCacheReads(t *testing.T) {
	t.Parallel()
	var c *Cache
	r := &reads{}
	authenticate(t, c, "a", r)
	authenticate(t, c, "a", r)
	wantReads(t, "without a cache", r, 2)
	c.credentialsChanged()
	c.pricesChanged()
}
