package pgstart

import (
	"context"
	"os"
	"strings"
	"testing"
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
