// Package postgres stores Hubu's state in PostgreSQL through the sqlc queries in
// hubu.dev/hubu/sql/hubu/hubudb. Every method that changes money runs in one transaction.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"hubu.dev/hubu/services/hubu"
	"hubu.dev/hubu/sql/hubu/hubudb"
)

// withTxV runs fn in a transaction and commits it. The rollback after a failure still runs
// when the caller's context is cancelled, so no transaction is left open on the connection.
// fn's queries take their arguments through pgArgs.
func withTxV[T any](ctx context.Context, pool *pgxpool.Pool, fn func(hubudb.DBTX) (T, error)) (T, error) {
	var zero T
	tx, err := pool.Begin(ctx)
	if err != nil {
		return zero, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx) // a no-op after commit
	}()
	out, err := fn(argsDB{tx})
	if err != nil {
		return zero, err
	}
	if err := tx.Commit(ctx); err != nil {
		return zero, fmt.Errorf("commit: %w", err)
	}
	return out, nil
}

// withPipeTx runs fn in a transaction on one connection, as withTxV does, in two round trips
// fewer: BEGIN goes to Postgres with fn's first query, and COMMIT with its last write when fn
// says so (pipe.thenCommit); otherwise withPipeTx commits after fn, with anything fn left
// queued. It is for the hot paths, where the time a lock is held is the throughput: a
// decision of one agent is taken under its policy lock, which is then held for one round trip.
// Once a statement was sent with COMMIT the transaction is over: an error fn returns after it
// (a row that did not decode) leaves committed what was.
func withPipeTx[T any](ctx context.Context, pool *pgxpool.Pool, fn func(*pipe) (T, error)) (T, error) {
	var zero T
	c, err := pool.Acquire(ctx)
	if err != nil {
		return zero, fmt.Errorf("acquire a connection: %w", err)
	}
	// A connection released inside a transaction (a rollback that failed) is closed by the
	// pool, never handed out again.
	defer c.Release()
	p := &pipe{conn: c.Conn()}
	p.queue("begin")
	out, err := fn(p)
	if err != nil {
		p.rollback(ctx)
		return zero, err
	}
	if err := p.commit(ctx); err != nil {
		p.rollback(ctx)
		return zero, err
	}
	return out, nil
}

// pipe runs sqlc queries on one connection in as few round trips as their results allow. It
// is a hubudb.DBTX: Exec only queues its statement, and QueryRow sends everything queued, its
// own statement, and COMMIT when thenCommit was called, as one pgx.Batch, whose results its
// Row reads in order. A statement whose result nothing needs (BEGIN, a lock) so rides with the
// next one that returns a row, and its error is that one's. Postgres runs the statements of a
// batch one after the other, each with the snapshot of its own start, exactly as if they had
// been sent one by one: only the waiting between them is saved.
type pipe struct {
	conn      *pgx.Conn
	queued    []queuedQuery
	commitNow bool // send COMMIT after the next QueryRow's statement
	sent      bool // something reached Postgres: a transaction is open or was ended
	committed bool
}

type queuedQuery struct {
	sql  string
	args []any
}

var _ hubudb.DBTX = (*pipe)(nil)

// Exec queues sql; it is sent with the next QueryRow (or the commit).
func (p *pipe) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p.queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

// queue keeps sql and its arguments (through pgArgs) for the next batch.
func (p *pipe) queue(sql string, args ...any) {
	p.queued = append(p.queued, queuedQuery{sql, pgArgs(args)})
}

// Query runs a query of many rows in a round trip of its own: it is refused while statements
// are queued (their results would come before its rows) or COMMIT is asked for.
func (p *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if len(p.queued) > 0 || p.commitNow {
		return nil, errors.New("pipe: a query of many rows cannot be pipelined with other statements")
	}
	p.sent = true
	return p.conn.Query(ctx, sql, pgArgs(args)...)
}

// thenCommit makes the next QueryRow send COMMIT after its statement: that statement is the
// transaction's last.
func (p *pipe) thenCommit() { p.commitNow = true }

// QueryRow sends what is queued, sql, and COMMIT if asked for.
func (p *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	p.queue(sql, args...)
	row := &pipeRow{p: p, before: len(p.queued) - 1, commit: p.commitNow}
	row.br = p.send(ctx, p.commitNow)
	return row
}

// send sends the queued statements, and COMMIT after them when commit is set.
func (p *pipe) send(ctx context.Context, commit bool) pgx.BatchResults {
	b := &pgx.Batch{}
	for _, q := range p.queued {
		b.Queue(q.sql, q.args...)
	}
	if commit {
		b.Queue("commit")
	}
	p.queued, p.commitNow, p.sent = nil, false, true
	return p.conn.SendBatch(ctx, b)
}

// commit ends the transaction unless a QueryRow did: it sends what is still queued with
// COMMIT. When nothing was ever sent and nothing but BEGIN is queued, there is nothing to end.
func (p *pipe) commit(ctx context.Context) error {
	switch {
	case p.committed || (!p.sent && len(p.queued) <= 1):
		return nil
	case p.sent && p.conn.PgConn().TxStatus() == 'I':
		// A failed COMMIT ended it, and fn went on as if it had not: a COMMIT now would be
		// outside any transaction, and succeed.
		return errors.New("commit: the transaction ended without committing")
	}
	n := len(p.queued)
	br := p.send(ctx, true)
	err := execAll(br, n)
	if cerr := p.checkCommit(br.Exec()); err == nil {
		err = cerr
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// checkCommit reads COMMIT's result: Postgres answers ROLLBACK to the COMMIT of a transaction
// that an error had already aborted.
func (p *pipe) checkCommit(tag pgconn.CommandTag, err error) error {
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	p.committed = err == nil
	return err
}

// rollback ends a transaction that is still open, even when ctx was cancelled. A connection
// it cannot roll back stays in its transaction and is closed by the pool on release.
func (p *pipe) rollback(ctx context.Context) {
	if p.conn.PgConn().TxStatus() == 'I' {
		return // never begun, or ended by a failed COMMIT
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = p.conn.Exec(rctx, "rollback")
}

// pipeRow reads a QueryRow's batch: the statements queued before it, its row, and COMMIT.
type pipeRow struct {
	p      *pipe
	br     pgx.BatchResults
	before int
	commit bool
}

func (r *pipeRow) Scan(dest ...any) error {
	err := r.scan(dest)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

func (r *pipeRow) scan(dest []any) error {
	if err := execAll(r.br, r.before); err != nil {
		return err
	}
	err := r.br.QueryRow().Scan(dest...)
	if !r.commit {
		return err
	}
	// COMMIT's result is read whatever the row's: a statement that failed in Postgres took the
	// COMMIT after it along, but one that only found no row, or whose row did not decode, was
	// committed.
	if cerr := r.p.checkCommit(r.br.Exec()); cerr != nil && (err == nil || isNoRows(err)) {
		return fmt.Errorf("commit: %w", cerr)
	}
	return err
}

// execAll reads the results of the next n statements of br, stopping at the first error.
func execAll(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// each converts every element of xs with f; the result is never nil.
func each[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// queryError is what the caller of a failed query that reads one row sees: notFound when
// there was no row, else an internal error about what.
func queryError(err error, what string, notFound *hubu.Error) error {
	if isNoRows(err) {
		return notFound
	}
	return fmt.Errorf("%s: %w", what, err)
}

// uniqueViolation reports whether err is a unique violation of the named constraint.
func uniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}
