package postgres

import (
	"cmp"
	"sync"
	"time"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// The channels the change triggers of sql/hubu/migrations/000005_change_notifications notify.
const (
	credentialsChannel = "hubu_credentials"
	pricesChannel      = "hubu_prices"
)

// Listener is what a Cache needs of a PostgreSQL LISTEN connection; kit/pglisten's Listener
// is one.
type Listener interface {
	// Handle registers f for channel's notifications; f must not block.
	Handle(channel string, f func(payload string))
	// OnGap registers f, called whenever notifications may have been missed.
	OnGap(f func())
	// Connected reports whether the connection is LISTENing now.
	Connected() bool
}

// CacheOptions change a Cache; nil is every default.
type CacheOptions struct {
	// TTL bounds how long an entry is served, should a notification be lost without the
	// listener noticing (a half-open connection). 5s by default.
	TTL time.Duration
	// MaxCredentials bounds how many credentials are kept; 10 000 by default. Past it, a new
	// one replaces an arbitrary other.
	MaxCredentials int
	// Now is the clock the TTL is measured on; time.Now by default. It is not the service's
	// clock, which tests move: staleness is a matter of real time.
	Now func() time.Time
}

// Cache keeps what nearly every request reads and operators rarely change in memory:
// credentials by token hash (Store.Authenticate) and the price catalog (new authorizations).
// Every change to either is announced by Postgres on commit (a trigger's NOTIFY), whoever made
// it, and drops the cached table in every process that listens; the process that made the
// change drops it at once, before answering. So a revocation is refused from its maker's next
// request on, and on another replica as soon as the notification arrives, in milliseconds.
//
// The rules that keep it correct:
//   - it serves and stores only while the listener is connected, and drops everything on a
//     gap (the listener lost its connection, or made a new one): a notification missed then
//     cannot leave a stale entry;
//   - an entry read from the database is stored only if nothing was dropped since the read
//     began (a generation counter), so a change committed during a read cannot be overwritten
//     by what the read saw before it;
//   - an entry lives at most TTL, in case a connection dies without the listener noticing;
//   - what time changes is checked at each use, not cached: a credential's expiry (the end of
//     a rotation's overlap) is compared with the request's time every time.
type Cache struct {
	listener    Listener
	ttl         time.Duration
	now         func() time.Time
	credentials *entries[string, hubudb.Credential]
	prices      *entries[struct{}, hubu.Catalog]
}

// NewCache returns a Cache fed by l, on which it registers its channels: call it before l runs.
func NewCache(l Listener, opts *CacheOptions) *Cache {
	if opts == nil {
		opts = &CacheOptions{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Cache{
		listener:    l,
		ttl:         cmp.Or(opts.TTL, 5*time.Second),
		now:         opts.Now,
		credentials: newEntries[string, hubudb.Credential](cmp.Or(opts.MaxCredentials, 10_000)),
		prices:      newEntries[struct{}, hubu.Catalog](1),
	}
	l.Handle(credentialsChannel, func(string) { c.credentials.drop() })
	l.Handle(pricesChannel, func(string) { c.prices.drop() })
	l.OnGap(func() {
		c.credentials.drop()
		c.prices.drop()
	})
	return c
}

// credentialsChanged and pricesChanged drop what the process cached of a table it changed, so
// that its own next request sees the change without waiting for the notification. Both do
// nothing on a nil Cache.
func (c *Cache) credentialsChanged() {
	if c != nil {
		c.credentials.drop()
	}
}

func (c *Cache) pricesChanged() {
	if c != nil {
		c.prices.drop()
	}
}

// credentialEntries and priceEntries are c's tables; nil on a nil Cache, which load never
// reads then.
func (c *Cache) credentialEntries() *entries[string, hubudb.Credential] {
	if c == nil {
		return nil
	}
	return c.credentials
}

func (c *Cache) priceEntries() *entries[struct{}, hubu.Catalog] {
	if c == nil {
		return nil
	}
	return c.prices
}

// load returns e's entry for k when it may be served, else what read returns, which it keeps
// when it may. read's errors are never kept.
func load[K comparable, V any](c *Cache, e *entries[K, V], k K, read func() (V, error)) (V, error) {
	if c == nil || !c.listener.Connected() {
		return read()
	}
	now := c.now()
	v, ok, gen := e.get(k, now.Add(-c.ttl)) // gen is taken before the read begins
	if ok {
		return v, nil
	}
	v, err := read()
	// Checked again: a listener that lost its connection during the read says so before it
	// announces the gap that would fail the put.
	if err == nil && c.listener.Connected() {
		e.put(k, v, now, gen)
	}
	return v, err
}

// entries is one table's cache.
type entries[K comparable, V any] struct {
	mu  sync.Mutex
	gen uint64 // raised by every drop
	m   map[K]entry[V]
	max int
}

type entry[V any] struct {
	v    V
	read time.Time // when the read that found v began
}

func newEntries[K comparable, V any](max int) *entries[K, V] {
	return &entries[K, V]{m: map[K]entry[V]{}, max: max}
}

// get returns k's entry if it was read after oldest, and the generation a read that misses
// must hand to put.
func (e *entries[K, V]) get(k K, oldest time.Time) (v V, ok bool, gen uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[k]
	if ok && x.read.After(oldest) {
		return x.v, true, e.gen
	}
	return v, false, e.gen
}

// put keeps v for k, read at read, unless something was dropped since the read began (the
// generation moved on): the change that caused the drop may be missing from v.
func (e *entries[K, V]) put(k K, v V, read time.Time, gen uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if gen != e.gen {
		return
	}
	if _, ok := e.m[k]; !ok && len(e.m) >= e.max {
		for old := range e.m { // an arbitrary one: the map's order is random
			delete(e.m, old)
			break
		}
	}
	e.m[k] = entry[V]{v: v, read: read}
}

// drop forgets every entry and fails the puts of reads in progress.
func (e *entries[K, V]) drop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gen++
	clear(e.m)
}
