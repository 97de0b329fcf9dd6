package registry

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	routersql "hubu.dev/hubu/sql/router"
)

// A call's row keeps the digest of the conversation it arrived in; the same call id from
// another conversation, or without the one it had, is a ScopeConflict whatever its request,
// and leaves the row as it was.
func TestScopeConflict(t *testing.T) {
	t.Parallel()
	onBothBackends(t, testScopeConflict)
}

func testScopeConflict(t *testing.T, newState func() string) {
	ctx := context.Background()
	r := open(t, newState(), nil)
	c := Call{Platform: "codex", CallID: "call_0123456789abcdef", Scope: "scope-a", Tool: "t", RequestHash: "h"}
	first, out, err := r.Resolve(ctx, c)
	if err != nil || out != New {
		t.Fatalf("first: %v %v", out, err)
	}
	for _, other := range []Call{
		{Platform: "codex", CallID: c.CallID, Scope: "scope-b", Tool: "t", RequestHash: "h"},
		{Platform: "codex", CallID: c.CallID, Scope: "", Tool: "t", RequestHash: "h"},
		{Platform: "codex", CallID: c.CallID, Scope: "scope-b", Tool: "t", RequestHash: "other"},
	} {
		if e, out, err := r.Resolve(ctx, other); err != nil || out != ScopeConflict || e.OperationKey != "" {
			t.Fatalf("%+v: %v %v, key given: %v", other, out, err, e.OperationKey != "")
		}
	}
	if again, out, err := r.Resolve(ctx, c); err != nil || out != Continue || again.OperationKey != first.OperationKey {
		t.Fatalf("the same call in its own conversation: %v %v", out, err)
	}
}

// A row recorded without a scope (a harness that sends none, or a row from before scopes were
// recorded) is never refused for one.
func TestNoRecordedScope(t *testing.T) {
	t.Parallel()
	onBothBackends(t, testNoRecordedScope)
}

func testNoRecordedScope(t *testing.T, newState func() string) {
	ctx := context.Background()
	r := open(t, newState(), nil)
	c := Call{Platform: "codex", CallID: "call_0123456789abcdef", Tool: "t", RequestHash: "h"}
	first, _, err := r.Resolve(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// As a row migrated from the first SQLite schema would be.
	if scope := queryValue[string](t, r, "SELECT scope_digest FROM calls"); scope != "" {
		t.Fatalf("scope_digest = %q", scope)
	}
	c.Scope = "scope-a"
	if again, out, err := r.Resolve(ctx, c); err != nil || out != Continue || again.OperationKey != first.OperationKey {
		t.Fatalf("a delivery with a scope of a row without one: %v %v", out, err)
	}
}

// A registry file made by a router of the first schema opens, migrates, and keeps its calls: a
// call recorded there continues under its key when delivered again, with or without a scope.
// SQLite only: the Postgres schema started with scopes.
func TestUpgradeFromTheFirstSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	first, err := fs.ReadFile(routersql.Migrations(), "000001_initial.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{string(first),
		`CREATE TABLE schema_migrations (version uint64, dirty bool)`,
		`INSERT INTO schema_migrations (version, dirty) VALUES (1, false)`,
		`INSERT INTO installation (singleton, installation_id, created_at) VALUES (1, 'inst-old', 0)`,
		`INSERT INTO calls (platform, installation_id, harness_call_id, tool, request_hash, operation_key, public_handle, created_at, updated_at)
		 VALUES ('codex', 'inst-old', 'call_0123456789abcdef', 't', 'h', 'hubu:operation:v1:codex:old', 'hubu:public-operation:v1:old', 0, 0)`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	db.Close()

	r := open(t, path, nil)
	if r.InstallationID() != "inst-old" {
		t.Fatalf("installation %q after the upgrade", r.InstallationID())
	}
	e, out, err := r.Resolve(ctx, Call{Platform: "codex", CallID: "call_0123456789abcdef", Scope: "scope-a", Tool: "t", RequestHash: "h"})
	if err != nil || out != Continue || e.OperationKey != "hubu:operation:v1:codex:old" {
		t.Fatalf("the old call after the upgrade: %v %v %q", out, err, e.OperationKey)
	}
}
