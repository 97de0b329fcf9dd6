package hubusql_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/migrator"
	"hubu.dev/hubu/sql/sqltest"
)

func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
	dbURL := sqltest.NewEmptyDatabase(t, "hubu")
	latest, err := migrator.Latest(hubusql.Migrations())
	if err != nil || latest == 0 {
		t.Fatalf("latest: %d %v", latest, err)
	}
	tables := func() int {
		conn, err := pgx.Connect(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for round := range 2 {
		if err := migrator.Up(dbURL, hubusql.Migrations()); err != nil {
			t.Fatalf("round %d up: %v", round, err)
		}
		if st, err := migrator.Version(dbURL, hubusql.Migrations()); err != nil || st.Version != latest || st.Dirty {
			t.Fatalf("round %d after up: %+v %v", round, st, err)
		}
		if n := tables(); n != 15 {
			t.Fatalf("round %d: %d tables after up, want 15", round, n)
		}
		if err := migrator.Up(dbURL, hubusql.Migrations()); err != nil {
			t.Fatalf("round %d: a second up is not a no-op: %v", round, err)
		}
		if err := migrator.Down(dbURL, hubusql.Migrations(), 0); err != nil {
			t.Fatalf("round %d down: %v", round, err)
		}
		if st, err := migrator.Version(dbURL, hubusql.Migrations()); err != nil || st.Version != 0 {
			t.Fatalf("round %d after down: %+v %v", round, st, err)
		}
		if n := tables(); n != 0 {
			t.Fatalf("round %d: %d tables left after down", round, n)
		}
	}
}

func TestSeededCatalog(t *testing.T) {
	t.Parallel()
	pool, _ := sqltest.NewPool(t, "hubu", hubusql.Migrations())
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM prices WHERE provider = 'bfl'").Scan(&n); err != nil || n < 4 {
		t.Fatalf("seeded prices: %d %v", n, err)
	}
}

// Each test gets a database of its own: what one writes, another never sees.
func TestDatabasesAreIsolated(t *testing.T) {
	t.Parallel()
	a, urlA := sqltest.NewPool(t, "hubu", hubusql.Migrations())
	b, urlB := sqltest.NewPool(t, "hubu", hubusql.Migrations())
	if urlA == urlB {
		t.Fatal("two tests share a database")
	}
	ctx := context.Background()
	if _, err := a.Exec(ctx, "DELETE FROM prices"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM prices").Scan(&n); err != nil || n == 0 {
		t.Fatalf("the other database saw the delete: %d %v", n, err)
	}
}

// Credentials made before they had ids (a revoked one among them) get one each on upgrade,
// and keep their revocation.
func TestCredentialIDsOnUpgrade(t *testing.T) {
	t.Parallel()
	dbURL := sqltest.NewEmptyDatabase(t, "hubu")
	if err := migrator.Up(dbURL, hubusql.Migrations()); err != nil {
		t.Fatal(err)
	}
	latest, err := migrator.Latest(hubusql.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	toVersion2 := int(latest) - 2 // before the ids
	if err := migrator.Down(dbURL, hubusql.Migrations(), toVersion2); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO credentials (token_hash, kind, name, created_at, revoked_at) VALUES
		('\x01', 'operator', 'alice', now(), NULL), ('\x02', 'service', 'gongbu', now(), now())`); err != nil {
		t.Fatal(err)
	}
	if err := migrator.Up(dbURL, hubusql.Migrations()); err != nil {
		t.Fatal(err)
	}
	var ids, revoked int
	if err := conn.QueryRow(ctx, `SELECT count(DISTINCT id), count(revoked_at) FROM credentials`).Scan(&ids, &revoked); err != nil {
		t.Fatal(err)
	}
	if ids != 2 || revoked != 1 {
		t.Fatalf("after the upgrade: %d distinct ids, %d revoked; want 2 and 1", ids, revoked)
	}
	// A replica of the previous version, still serving during a rolling upgrade, inserts
	// credentials without an id: they get one.
	if _, err := conn.Exec(ctx, `INSERT INTO credentials (token_hash, kind, name, created_at) VALUES ('\x03', 'operator', 'bob', now())`); err != nil {
		t.Fatalf("an insert of the previous version: %v", err)
	}

	// Rolling back ends every rotation's overlap: the previous version knows only revoked_at,
	// and would take a rotated-out token for a valid one.
	if _, err := conn.Exec(ctx, `UPDATE credentials SET expires_at = now() + interval '1 hour' WHERE name = 'alice'`); err != nil {
		t.Fatal(err)
	}
	if err := migrator.Down(dbURL, hubusql.Migrations(), toVersion2); err != nil {
		t.Fatal(err)
	}
	var aliceRevoked bool
	if err := conn.QueryRow(ctx, `SELECT revoked_at IS NOT NULL FROM credentials WHERE name = 'alice'`).Scan(&aliceRevoked); err != nil || !aliceRevoked {
		t.Fatalf("a credential in its rotation's overlap is valid after a rollback: revoked %v, %v", aliceRevoked, err)
	}
}

// An operation's budget row exists by the schema: the upgrade gives every operation of a
// database edited by hand its row (with nothing used), and no row an operation names can be
// deleted after.
func TestBudgetUsageReference(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := sqltest.NewEmptyDatabase(t, "hubu")
	if err := migrator.Up(dbURL, hubusql.Migrations()); err != nil {
		t.Fatal(err)
	}
	latest, err := migrator.Latest(hubusql.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if err := migrator.Down(dbURL, hubusql.Migrations(), int(latest)-3); err != nil { // to version 3
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `
		INSERT INTO agents (id, name, account, created_at) VALUES ('00000000-0000-0000-0000-000000000001', 'a', 'acct:a', now());
		INSERT INTO operations (id, agent_id, operation_key, public_handle, tool, arguments, request_hash, account,
		                        provider, model, size, amount_micros, currency, state, budget_day, created_at, updated_at)
		VALUES ('00000000-0000-0000-0000-000000000002', '00000000-0000-0000-0000-000000000001', 'k', 'h', 'generate_image',
		        '{}', 'x', 'acct:a', 'bfl', 'flux-dev', '*', 0, 'USD', 'pending_approval', '2026-11-30', now(), now())`); err != nil {
		t.Fatal(err)
	}
	if err := migrator.Up(dbURL, hubusql.Migrations()); err != nil {
		t.Fatalf("upgrade with an operation whose budget row is missing: %v", err)
	}
	var used int64
	if err := conn.QueryRow(ctx, `SELECT used_micros FROM budget_usage WHERE day = '2026-11-30'`).Scan(&used); err != nil || used != 0 {
		t.Fatalf("the missing budget row after the upgrade: %d %v", used, err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM budget_usage`); err == nil {
		t.Fatal("an operation's budget row could be deleted")
	}
}

// An operation's agent exists by the schema, through the operation's budget row (migration 6
// leaves that reference the only one): an operation of an agent that does not exist is refused,
// and so is deleting an agent that has operations.
func TestOperationsNeedTheirAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := sqltest.NewPool(t, "hubu", hubusql.Migrations())
	const agent, unknown = "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000009"
	if _, err := pool.Exec(ctx, `INSERT INTO agents (id, name, account, created_at) VALUES ($1, 'a', 'acct:a', now())`, agent); err != nil {
		t.Fatal(err)
	}
	operation := func(id, agentID string) error {
		_, err := pool.Exec(ctx, `
			WITH budget AS (
				INSERT INTO budget_usage (agent_id, day, used_micros) VALUES ($2, '2026-11-30', 0) ON CONFLICT DO NOTHING
			)
			INSERT INTO operations (id, agent_id, operation_key, public_handle, tool, arguments, request_hash, account,
			                        provider, model, size, amount_micros, currency, state, budget_day, created_at, updated_at)
			VALUES ($1::uuid, $2, $1::text, $1::text, 'generate_image', '{}', 'x', 'acct:a', 'bfl', 'flux-dev', '*', 0, 'USD',
			        'pending_approval', '2026-11-30', now(), now())`, id, agentID)
		return err
	}
	if err := operation("00000000-0000-0000-0000-000000000002", agent); err != nil {
		t.Fatalf("an operation of an agent: %v", err)
	}
	if err := operation("00000000-0000-0000-0000-000000000003", unknown); err == nil {
		t.Fatal("an operation of an agent that does not exist was recorded")
	}
	if _, err := pool.Exec(ctx, `DELETE FROM agents WHERE id = $1`, agent); err == nil {
		t.Fatal("an agent with operations was deleted")
	}
}

// Every committed change to credentials or prices is announced on its channel, and nothing
// of a change that was rolled back.
func TestChangesAreNotified(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dbURL := sqltest.NewPool(t, "hubu", hubusql.Migrations())
	listener, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	for _, ch := range []string{"hubu_credentials", "hubu_prices"} {
		if _, err := listener.Exec(ctx, "LISTEN "+ch); err != nil {
			t.Fatal(err)
		}
	}
	next := func(what, channel string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := listener.WaitForNotification(wctx)
		if err != nil || n.Channel != channel {
			t.Fatalf("%s: notification %+v, %v; want one on %s", what, n, err, channel)
		}
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO credentials (token_hash, kind, name, created_at) VALUES ('\x01', 'operator', 'alice', now())`)
	next("a new credential", "hubu_credentials")
	exec(`UPDATE credentials SET revoked_at = now()`)
	next("a revocation", "hubu_credentials")
	exec(`UPDATE prices SET amount_micros = amount_micros + 1`)
	next("a price change", "hubu_prices")
	exec(`BEGIN; DELETE FROM prices; ROLLBACK`)
	exec(`DELETE FROM credentials`)
	next("a deletion after a rolled-back change", "hubu_credentials")
}
