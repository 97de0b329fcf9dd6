package postgres_test

import (
	"context"
	"testing"
	"time"

	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/proto/hubuapi"
	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/services/hubu/hubutest"
	"hubu.dev/hubu/services/hubu/postgres"
	"hubu.dev/hubu/sql/sqltest"
)

// process is another Hubu process on a test's database: a pool, a cache and a listener of its
// own. Its cache serves an entry for ttl: a test that sets it long proves that what ended an
// entry was a notification.
type process struct {
	store *postgres.Store
	cache *hubutest.Cache
	trips *sqltest.RoundTrips
}

func otherProcess(t *testing.T, e *hubutest.Env, ttl time.Duration) process {
	t.Helper()
	p := process{trips: &sqltest.RoundTrips{}}
	p.store = postgres.NewStore(sqltest.NewCountedPool(t, e.DatabaseURL, p.trips), 24*time.Hour)
	p.cache = hubutest.StartCache(t, e.DatabaseURL, &postgres.CacheOptions{TTL: ttl})
	p.store.Cache = p.cache.Cache
	return p
}

// authenticate authenticates token on store at now, and returns the error code ("" when it
// authenticates) and the round trips it took.
func authenticate(t *testing.T, store *postgres.Store, trips *sqltest.RoundTrips, token string, now time.Time) (code hubu.Code, n int) {
	t.Helper()
	trips.Reset()
	_, err := store.Authenticate(context.Background(), token, now)
	n, _ = trips.Counts()
	if err != nil {
		return hubu.ErrorCode(err), n
	}
	return "", n
}

func want(t *testing.T, what string, code hubu.Code, trips int, wantCode hubu.Code, wantTrips int) {
	t.Helper()
	if code != wantCode || trips != wantTrips {
		t.Fatalf("%s: code %q in %d round trips, want %q in %d", what, code, trips, wantCode, wantTrips)
	}
}

// operator is alice, the Env's operator, as a principal.
func operator(t *testing.T, e *hubutest.Env) hubu.Principal {
	t.Helper()
	p, err := e.Store.Authenticate(context.Background(), e.OperatorToken, e.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A revocation is refused on its holder's next request in the process that made it, from its
// cache, without waiting for the notification.
func TestRevocationRefusedAtOnceInItsProcess(t *testing.T) {
	t.Parallel()
	trips := &sqltest.RoundTrips{}
	e := hubutest.New(t, &hubutest.Options{RoundTrips: trips})
	a := e.NewAgent(t, "agent", nil)
	alice := operator(t, e)
	e.Cache.Sync(t)
	now := e.Clock.Now()
	authenticate(t, e.Store, trips, a.Token, now)
	code, n := authenticate(t, e.Store, trips, a.Token, now)
	want(t, "the agent, again", code, n, "", 0)

	e.Cache.PauseNotifications(t)
	if _, err := e.Store.RevokeCredential(context.Background(), alice, e.CredentialID(t, a.Token), now); err != nil {
		t.Fatal(err)
	}
	code, n = authenticate(t, e.Store, trips, a.Token, now)
	want(t, "the agent after its revocation", code, n, hubu.CodeCredentialRevoked, 1)
}

// Another process refuses a revoked credential once the revocation's notification arrives,
// however long its cache would keep the credential otherwise.
func TestRevocationRefusedInAnotherProcess(t *testing.T) {
	t.Parallel()
	e := hubutest.New(t, nil)
	a := e.NewAgent(t, "agent", nil)
	alice := operator(t, e)
	other := otherProcess(t, e, time.Hour)
	now := e.Clock.Now()
	authenticate(t, other.store, other.trips, a.Token, now)
	code, n := authenticate(t, other.store, other.trips, a.Token, now)
	want(t, "the agent in the other process, again", code, n, "", 0)

	// Held back, the notification is all that stands between the other process and a stale
	// answer: the credential still authenticates there.
	resume := other.cache.PauseNotifications(t)
	if _, err := e.Store.RevokeCredential(context.Background(), alice, e.CredentialID(t, a.Token), now); err != nil {
		t.Fatal(err)
	}
	code, n = authenticate(t, other.store, other.trips, a.Token, now)
	want(t, "the other process before the notification", code, n, "", 0)
	resume()
	waitfor.True(t, 10*time.Second, "the other process to refuse the revoked credential", func() bool {
		code, _ := authenticate(t, other.store, other.trips, a.Token, now)
		return code == hubu.CodeCredentialRevoked
	})
}

// A price change is seen by the next new authorization: at once in the process that made it,
// on its notification in another.
func TestPriceChangeSeenByNewAuthorizations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := hubutest.New(t, nil)
	a := e.NewAgent(t, "agent", nil)
	other := otherProcess(t, e, time.Hour)
	price := func(store *postgres.Store) int64 {
		t.Helper()
		op, _, err := store.Authorize(ctx, a.ID, hubutest.NewCall("flux-dev").AuthorizeRequest(), e.Clock.Now(), false)
		if err != nil {
			t.Fatal(err)
		}
		return op.AmountMicros
	}
	if here, there := price(e.Store), price(other.store); here != 25_000 || there != 25_000 {
		t.Fatalf("flux-dev costs %d here and %d there, want 25000", here, there)
	}

	e.Cache.PauseNotifications(t)
	r, err := e.Operator.SetPriceWithResponse(ctx, hubuapi.PriceUpdate{Provider: "bfl", Model: "flux-dev", Size: "*", AmountMicros: 30_000, Currency: "USD"})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("set price: %v %s", err, r.Body)
	}
	if here := price(e.Store); here != 30_000 {
		t.Fatalf("after the change, flux-dev costs %d in the process that made it, want 30000", here)
	}
	waitfor.True(t, 10*time.Second, "the other process to see the new price", func() bool {
		prices, err := other.store.ListPrices(ctx)
		for _, p := range prices {
			if p.Model == "flux-dev" {
				return err == nil && p.AmountMicros == 30_000
			}
		}
		return false
	})
	if there := price(other.store); there != 30_000 {
		t.Fatalf("after the notification, flux-dev costs %d in the other process, want 30000", there)
	}
}

// A cache whose listener stopped serves and keeps nothing: every request reads Postgres, and a
// change it cannot hear of (here one made by hand, in SQL) is seen at once.
func TestNoCachingWithoutTheListener(t *testing.T) {
	t.Parallel()
	e := hubutest.New(t, nil)
	a := e.NewAgent(t, "agent", nil)
	other := otherProcess(t, e, time.Hour)
	now := e.Clock.Now()
	authenticate(t, other.store, other.trips, a.Token, now)
	code, n := authenticate(t, other.store, other.trips, a.Token, now)
	want(t, "while listening", code, n, "", 0)

	other.cache.Stop()
	for range 2 {
		code, n = authenticate(t, other.store, other.trips, a.Token, now)
		want(t, "with the listener stopped", code, n, "", 1)
	}
	if _, err := e.Pool.Exec(context.Background(), "UPDATE credentials SET revoked_at = $1 WHERE agent_id = $2", now, a.ID); err != nil {
		t.Fatal(err)
	}
	code, n = authenticate(t, other.store, other.trips, a.Token, now)
	want(t, "after a revocation by hand", code, n, hubu.CodeCredentialRevoked, 1)
}

// A cached credential's expiry (the end of its rotation's overlap) is checked against the
// request's time on every use: the cache never lets a replaced token outlive its overlap.
func TestCachedCredentialExpiresWithItsOverlap(t *testing.T) {
	t.Parallel()
	trips := &sqltest.RoundTrips{}
	e := hubutest.New(t, &hubutest.Options{RoundTrips: trips})
	a := e.NewAgent(t, "agent", nil)
	if _, err := e.Store.RotateCredential(context.Background(), operator(t, e), e.CredentialID(t, a.Token), 5*time.Minute, e.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	e.Cache.Sync(t)
	authenticate(t, e.Store, trips, a.Token, e.Clock.Now())
	code, n := authenticate(t, e.Store, trips, a.Token, e.Clock.Now().Add(5*time.Minute-time.Second))
	want(t, "the replaced token within its overlap", code, n, "", 0)
	code, n = authenticate(t, e.Store, trips, a.Token, e.Clock.Now().Add(5*time.Minute))
	want(t, "the replaced token once its overlap is over", code, n, hubu.CodeCredentialExpired, 0)
}
