package main

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"hubu.dev/hubu/kit/proctest"
	"hubu.dev/hubu/kit/waitfor"
	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/sqltest"
)

// The pool gets defaultPoolSize connections unless the URL sets pool_max_conns; the other
// connections get the URL without the pool's settings, and with everything else it has.
func TestPoolURLs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, wantPoolSize string }{
		{"postgres://u:pw@db:5432/hubu?sslmode=disable", strconv.Itoa(defaultPoolSize())},
		{"postgres://u:pw@db:5432/hubu?sslmode=disable&pool_max_conns=3&pool_min_conns=1", "3"},
	} {
		pool, single, err := poolURLs(c.in)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := url.Parse(pool)
		s, _ := url.Parse(single)
		if got := p.Query().Get("pool_max_conns"); got != c.wantPoolSize {
			t.Errorf("%s: the pool's pool_max_conns is %q, want %q", c.in, got, c.wantPoolSize)
		}
		for _, u := range []*url.URL{p, s} {
			if u.User.String() != "u:pw" || u.Host != "db:5432" || u.Path != "/hubu" || u.Query().Get("sslmode") != "disable" {
				t.Errorf("%s: lost a setting: %s", c.in, u.Redacted())
			}
		}
		if s.Query().Has("pool_max_conns") || s.Query().Has("pool_min_conns") {
			t.Errorf("%s: the single connections' URL keeps the pool's settings: %s", c.in, s.Redacted())
		}
	}
	for _, bad := range []string{"postgres://u:pw-not-to-show@db:port/hubu", "postgres://u:pw-not-to-show@db/hubu?%zz"} {
		if _, _, err := poolURLs(bad); err == nil || err.Error() != "--database-url is not a valid PostgreSQL URL" {
			t.Errorf("a URL that does not parse: %v", err)
		}
	}
}

// hubu serve starts on a URL that sizes its pool: the schema check and the cache's listener,
// which Postgres would refuse with pool_max_conns, get the URL without it.
func TestServeWithPoolSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dbURL := sqltest.NewPool(t, "hubu", hubusql.Migrations())
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "3")
	u.RawQuery = q.Encode()
	p := &proctest.Process{Name: "hubu", Path: binary, Args: []string{"serve", "--listen", "127.0.0.1:0"},
		Env: append(os.Environ(), "HUBU_DATABASE_URL="+u.String())}
	proctest.Start(t, p)
	listening := func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query ILIKE 'listen %'`).Scan(&n)
		return err == nil && n > 0
	}
	if !waitfor.Within(10*time.Second, listening) {
		t.Fatalf("the cache's listener never connected\n%s", p.Log())
	}
	proctest.Stop(t, p)
}
