package hubutest

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"hubu.dev/hubu/kit/pglisten"
	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/services/hubu/postgres"
)

// Cache is Hubu's cache of credentials and prices, fed by a listener of its own on a test's
// database, as `hubu serve` runs it.
type Cache struct {
	*postgres.Cache
	listener *pglisten.Listener
	dbURL    string
	stop     func()

	mu     sync.Mutex
	synced map[string]bool // Sync's barriers that arrived
	paused chan struct{}   // while set, the cache's notifications wait for it to close
	poke   chan struct{}
}

// syncChannel carries Sync's barriers, on the cache's listening connection but to no handler
// of the cache's own.
const syncChannel = "hubutest_sync"

// barriers numbers Sync's notifications, so that each waits for its own.
var barriers atomic.Int64

// StartCache starts a Cache on dbURL and returns it once its listener is connected. The
// test's end stops it.
func StartCache(t testing.TB, dbURL string, opts *postgres.CacheOptions) *Cache {
	t.Helper()
	c := &Cache{listener: pglisten.New(dbURL, nil), dbURL: dbURL, synced: map[string]bool{}, poke: make(chan struct{}, 1)}
	c.Cache = postgres.NewCache(c, opts)
	c.listener.Handle(syncChannel, func(payload string) {
		c.mu.Lock()
		c.synced[payload] = true
		c.mu.Unlock()
		select {
		case c.poke <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.listener.Run(ctx)
	}()
	c.stop = sync.OnceFunc(func() {
		cancel()
		<-done
	})
	t.Cleanup(c.stop)
	waitfor.True(t, 10*time.Second, "the cache's listener to connect", c.listener.Connected)
	return c
}

// Stop stops the listener and waits until it has: the cache then serves nothing.
func (c *Cache) Stop() { c.stop() }

// Handle, OnGap and Connected make c the cache's postgres.Listener: the listener's, whose
// notifications PauseNotifications can hold back.
func (c *Cache) Handle(channel string, f func(payload string)) {
	c.listener.Handle(channel, func(payload string) {
		c.mu.Lock()
		paused := c.paused
		c.mu.Unlock()
		if paused != nil {
			<-paused
		}
		f(payload)
	})
}

// PauseNotifications holds back the notifications the cache receives until resume is called
// (or the test ends): while they wait, only a drop by the process itself can end an entry.
func (c *Cache) PauseNotifications(t testing.TB) (resume func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	paused := make(chan struct{})
	c.paused = paused
	resume = sync.OnceFunc(func() {
		c.mu.Lock()
		c.paused = nil
		c.mu.Unlock()
		close(paused)
	})
	t.Cleanup(resume) // before the listener is stopped: cleanups run last first
	return resume
}

func (c *Cache) OnGap(f func()) { c.listener.OnGap(f) }

func (c *Cache) Connected() bool { return c.listener.Connected() }

// Sync waits until the cache has handled every notification committed before it was called:
// it sends a barrier on a channel of its own to the cache's listening connection, to which
// Postgres delivers notifications in commit order, whatever their channel. A test that counts
// what a request reads calls it after changing credentials or prices, whose notifications
// would otherwise empty the cache at a moment of their own.
func (c *Cache) Sync(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	barrier := strconv.FormatInt(barriers.Add(1), 10)
	if _, err := conn.Exec(ctx, "SELECT pg_notify($1, $2)", syncChannel, barrier); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		done := c.synced[barrier]
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-c.poke:
		case <-deadline:
			t.Fatal("timed out waiting for the cache to handle its notifications")
		}
	}
}
