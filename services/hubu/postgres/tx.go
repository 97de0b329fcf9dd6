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
)

// withTxV runs fn in a transaction and commits it. The rollback after a failure still runs
// when the caller's context is cancelled, so no transaction is left open on the connection.
func withTxV[T any](ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) (T, error)) (T, error) {
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
	out, err := fn(tx)
	if err != nil {
		return zero, err
	}
	if err := tx.Commit(ctx); err != nil {
		return zero, fmt.Errorf("commit: %w", err)
	}
	return out, nil
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
