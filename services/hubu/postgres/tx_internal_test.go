package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	hubusql "hubu.dev/hubu/sql/hubu"
	"hubu.dev/hubu/sql/sqltest"
)

// newPipePool is a one-connection pool on a database of its own with a table t(id int
// primary key): a transaction left open would show in the next test step.
func newPipePool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(sqltest.NewDatabase(t, "hubu", hubusql.Migrations()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), "CREATE TABLE t (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return pool
}

// rows are the ids in t.
func rows(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	rs, err := pool.Query(context.Background(), "SELECT id FROM t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rs, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func wantRows(t *testing.T, pool *pgxpool.Pool, what string, want ...int) {
	t.Helper()
	got := rows(t, pool)
	if len(got) != len(want) {
		t.Fatalf("%s: rows %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: rows %v, want %v", what, got, want)
		}
	}
}

// insert queues an insert of id and sends it with a read of the transaction's own rows,
// committing with it when commit is set; it returns how many rows the transaction sees.
func insert(ctx context.Context, p *pipe, id int, commit bool) (int, error) {
	p.queue("INSERT INTO t VALUES ($1)", id)
	if commit {
		p.thenCommit()
	}
	var n int
	err := p.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n)
	return n, err
}

func TestPipeCommitsWithTheLastStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPipePool(t)
	n, err := withPipeTx(ctx, pool, func(p *pipe) (int, error) {
		if n, err := insert(ctx, p, 1, false); err != nil || n != 1 {
			return n, err
		}
		n, err := insert(ctx, p, 2, true)
		if err == nil && !p.committed {
			err = errors.New("the last statement's COMMIT was not read")
		}
		return n, err
	})
	if err != nil || n != 2 {
		t.Fatalf("%d rows seen, %v", n, err)
	}
	wantRows(t, pool, "after the pipelined commit", 1, 2)

	// Without thenCommit, withPipeTx commits after fn, with what fn left queued.
	if _, err := withPipeTx(ctx, pool, func(p *pipe) (struct{}, error) {
		_, err := insert(ctx, p, 3, false)
		p.queue("INSERT INTO t VALUES (4)")
		return struct{}{}, err
	}); err != nil {
		t.Fatal(err)
	}
	wantRows(t, pool, "after the commit that followed", 1, 2, 3, 4)
}

// A statement that fails takes the COMMIT sent after it with it: nothing of the transaction
// is kept, whichever of its statements failed, and the connection is clean for the next one.
func TestPipeFailureRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPipePool(t)
	if _, err := pool.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		fn   func(p *pipe) (struct{}, error)
	}{
		{"the statement before COMMIT", func(p *pipe) (struct{}, error) {
			if _, err := insert(ctx, p, 2, false); err != nil {
				return struct{}{}, err
			}
			_, err := insert(ctx, p, 1, true) // a duplicate
			return struct{}{}, err
		}},
		{"a queued statement", func(p *pipe) (struct{}, error) {
			p.queue("INSERT INTO t VALUES (1)")
			var one int
			return struct{}{}, p.QueryRow(ctx, "SELECT 1").Scan(&one)
		}},
		{"fn's own error after a sent statement", func(p *pipe) (struct{}, error) {
			if _, err := insert(ctx, p, 2, false); err != nil {
				return struct{}{}, err
			}
			return struct{}{}, errors.New("refused")
		}},
		{"a failure fn did not return", func(p *pipe) (struct{}, error) {
			_, _ = insert(ctx, p, 1, false) // aborts the transaction; the COMMIT after fn is a ROLLBACK
			return struct{}{}, nil
		}},
	} {
		if _, err := withPipeTx(ctx, pool, c.fn); err == nil {
			t.Fatalf("%s: no error", c.name)
		}
		wantRows(t, pool, "after a failure in "+c.name, 1)
	}
}

// A COMMIT that fails (here a deferred constraint, checked at commit) is the error of the
// statement it was sent with; and fn cannot turn it into success by ignoring it.
func TestPipeFailedCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPipePool(t)
	if _, err := pool.Exec(ctx, "CREATE TABLE d (id int UNIQUE DEFERRABLE INITIALLY DEFERRED)"); err != nil {
		t.Fatal(err)
	}
	for _, ignore := range []bool{false, true} {
		_, err := withPipeTx(ctx, pool, func(p *pipe) (struct{}, error) {
			p.queue("INSERT INTO d VALUES (1), (1)")
			p.thenCommit()
			var n int
			err := p.QueryRow(ctx, "SELECT count(*) FROM d").Scan(&n)
			if err == nil || p.committed {
				t.Errorf("the failed commit: %v, committed %v", err, p.committed)
			}
			if ignore {
				return struct{}{}, nil
			}
			return struct{}{}, err
		})
		if err == nil {
			t.Fatalf("a failed commit (ignored by fn: %v) succeeded", ignore)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM d").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows after failed commits, %v", n, err)
	}
}

// fn may end before sending anything: no transaction was begun, and none is ended.
func TestPipeWithNothingSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPipePool(t)
	refusal := errors.New("refused before any query")
	if _, err := withPipeTx(ctx, pool, func(*pipe) (int, error) { return 0, refusal }); !errors.Is(err, refusal) {
		t.Fatalf("err = %v, want fn's", err)
	}
	if n, err := withPipeTx(ctx, pool, func(*pipe) (int, error) { return 7, nil }); err != nil || n != 7 {
		t.Fatalf("%d %v", n, err)
	}
	wantRows(t, pool, "after transactions that sent nothing")
}

// A statement that finds no row is no failure: its COMMIT ran, and the caller sees
// pgx.ErrNoRows (a new authorization whose key was recorded meanwhile writes nothing so).
func TestPipeNoRowsStillCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPipePool(t)
	_, err := withPipeTx(ctx, pool, func(p *pipe) (struct{}, error) {
		p.queue("INSERT INTO t VALUES (1)")
		p.thenCommit()
		var id int
		err := p.QueryRow(ctx, "SELECT id FROM t WHERE id = 2").Scan(&id)
		if !isNoRows(err) || !p.committed {
			t.Errorf("no row: %v, committed %v", err, p.committed)
		}
		return struct{}{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, pool, "after a commit with a statement that found nothing", 1)
}

// A query of many rows runs in the transaction, in a round trip of its own: it sees the
// transaction's own writes, and is refused while statements wait to be sent before it.
func TestPipeQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPipePool(t)
	_, err := withPipeTx(ctx, pool, func(p *pipe) (struct{}, error) {
		if _, err := p.Query(ctx, "SELECT id FROM t"); err == nil {
			t.Error("a query was sent before the queued BEGIN")
		}
		if _, err := insert(ctx, p, 1, false); err != nil {
			return struct{}{}, err
		}
		rs, err := p.Query(ctx, "SELECT id FROM t WHERE id = ANY($1)", []int{1, 2})
		if err != nil {
			return struct{}{}, err
		}
		ids, err := pgx.CollectRows(rs, pgx.RowTo[int])
		if err != nil || len(ids) != 1 || ids[0] != 1 {
			t.Errorf("the transaction's rows: %v %v", ids, err)
		}
		p.thenCommit()
		if _, err := p.Query(ctx, "SELECT id FROM t"); err == nil {
			t.Error("a query was sent where COMMIT was asked for with the next statement")
		}
		var n int
		return struct{}{}, p.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, pool, "after a transaction with a query", 1)
}
