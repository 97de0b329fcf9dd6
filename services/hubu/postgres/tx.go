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
)

// withTx runs fn in a transaction and commits it. The rollback after a failure still runs
// when the caller's context is cancelled, so no transaction is left open on the connection.
func withTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx) // a no-op after commit
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// withTxV is withTx for a function that returns a value.
func withTxV[T any](ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) (T, error)) (T, error) {
	var out T
	err := withTx(ctx, pool, func(tx pgx.Tx) error {
		v, err := fn(tx)
		out = v
		return err
	})
	return out, err
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// uniqueViolation reports whether err is a unique violation of the named constraint.
func uniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}
