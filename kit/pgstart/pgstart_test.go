package pgstart

import (
	"context"
	"crypto/rand"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := Open(ctx, "postgres://u:pw@h/db?sslmode=bogus"); err == nil || err.Error() != "--database-url is not a valid PostgreSQL URL" {
		t.Fatalf("a bad URL: %v", err)
	}
	const password = "p4ssw0rd-not-to-show"
	_, err := Open(ctx, "postgres://someone:"+password+"@127.0.0.1:1/db?connect_timeout=2")
	if err == nil || !strings.HasPrefix(err.Error(), "cannot reach the database: failed to connect: ") ||
		strings.Contains(err.Error(), password) || strings.Contains(err.Error(), "someone") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("an unreachable database: %v", err)
	}
	if url := os.Getenv("TEST_DATABASE_URL"); url != "" {
		pool, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		pool.Close()
	}
}

// A database or role that commits asynchronously by default must not make Hubu's or Gongbu's
// evidence asynchronous: every connection Open makes commits durably.
func TestOpenCommitsDurably(t *testing.T) {
	t.Parallel()
	server := os.Getenv("TEST_DATABASE_URL")
	if server == "" {
		t.Fatal("TEST_DATABASE_URL is not set; run the tests with `make test`")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	name := "pgstart_async_" + strings.ToLower(rand.Text())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+name+" SET synchronous_commit = off"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name

	direct, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	var setting string
	if err := direct.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil || setting != "off" {
		t.Fatalf("the test database's own default: %q, %v; want off", setting, err)
	}
	direct.Close(ctx)

	pool, err := Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Several connections at once, so that more than the pool's first is checked.
	conns := make([]*pgxpool.Conn, 3)
	for i := range conns {
		if conns[i], err = pool.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Release()
		if err := conns[i].QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil || setting != "on" {
			t.Errorf("connection %d: synchronous_commit %q, %v; want on", i, setting, err)
		}
	}
}
