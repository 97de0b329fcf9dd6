// Package sqltest gives each test a Postgres database of its own, cloned from a template
// database that already has the migrations applied, so a test can commit freely and the
// suite stays fast. Only tests import it.
//
// The server comes from TEST_DATABASE_URL (set by `make test` through
// scripts/ensure-postgres.sh), falling back to DATABASE_URL.
package sqltest

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"hubu.dev/hubu/sql/migrator"
)

// ServerURL is the URL of the test server's maintenance database; the test fails when none is set.
func ServerURL(t testing.TB) string {
	t.Helper()
	if v := cmp.Or(os.Getenv("TEST_DATABASE_URL"), os.Getenv("DATABASE_URL")); v != "" {
		return v
	}
	t.Fatal("sqltest: TEST_DATABASE_URL is not set; run the tests with `make test`, which finds or starts a Postgres")
	return ""
}

var templates sync.Map // template name -> func() error that builds it once

// NewDatabase creates an empty-of-data database with the given migrations applied and
// returns its URL. The database is dropped when the test ends.
func NewDatabase(t testing.TB, prefix string, migrations fs.FS) string {
	t.Helper()
	server := ServerURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tpl, err := templateName(prefix, migrations)
	if err != nil {
		t.Fatalf("sqltest: %v", err)
	}
	build, _ := templates.LoadOrStore(tpl, sync.OnceValue(func() error { return ensureTemplate(ctx, server, tpl, migrations) }))
	if err := build.(func() error)(); err != nil {
		t.Fatalf("sqltest: template %s: %v", tpl, err)
	}

	name := prefix + "_test_" + strings.ToLower(rand.Text())
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("sqltest: connect to %s: %v", redacted(server), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tpl}.Sanitize()); err != nil {
		t.Fatalf("sqltest: clone %s: %v", tpl, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Errorf("sqltest: drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("sqltest: drop %s: %v", name, err)
		}
	})
	return withDatabase(server, name)
}

// NewPool is NewDatabase plus a pool on it, closed when the test ends.
func NewPool(t testing.TB, prefix string, migrations fs.FS) (*pgxpool.Pool, string) {
	t.Helper()
	dbURL := NewDatabase(t, prefix, migrations)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("sqltest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, dbURL
}

// NewEmptyDatabase creates a database with no migrations applied, for migration tests.
func NewEmptyDatabase(t testing.TB, prefix string) string {
	t.Helper()
	return NewDatabase(t, prefix, emptyFS{})
}

// ensureTemplate creates the template database once per server; test binaries of several
// packages run at the same time, so an advisory lock guards the check-and-create.
func ensureTemplate(ctx context.Context, server, tpl string, migrations fs.FS) error {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redacted(server), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", tpl); err != nil {
		return err
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext($1))", tpl) //nolint:errcheck // the session ends right after

	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", tpl).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	// Build under a scratch name and rename at the end, so a crash never leaves a
	// half-migrated template behind under the real name.
	scratch := tpl + "_build"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{scratch}.Sanitize()+" WITH (FORCE)"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{scratch}.Sanitize()); err != nil {
		return err
	}
	if _, ok := migrations.(emptyFS); !ok {
		if err := migrator.Up(withDatabase(server, scratch), migrations); err != nil {
			return err
		}
	}
	_, err = conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{scratch}.Sanitize()+" RENAME TO "+pgx.Identifier{tpl}.Sanitize())
	return err
}

// templateName changes whenever a migration file changes, so a stale template is never used.
func templateName(prefix string, migrations fs.FS) (string, error) {
	h := sha256.New()
	names, err := fs.Glob(migrations, "*.sql") // none in an emptyFS
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := fs.ReadFile(migrations, n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return fmt.Sprintf("%s_tpl_%x", prefix, h.Sum(nil)[:6]), nil
}

func withDatabase(server, name string) string {
	u, err := url.Parse(server)
	if err != nil {
		return server
	}
	u.Path = "/" + name
	return u.String()
}

func redacted(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return "the test server"
	}
	return u.Redacted()
}

type emptyFS struct{}

func (emptyFS) Open(string) (fs.File, error) { return nil, fs.ErrNotExist }
