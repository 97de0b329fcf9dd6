// Package postgres stores Gongbu's executions in PostgreSQL through the sqlc queries in
// hubu.dev/hubu/sql/gongbu/gongbudb. Each change is one statement guarded by the execution's
// state and lease, so no multi-statement transaction is needed.
package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// uniqueViolation reports whether err is a unique violation of the named constraint.
func uniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}
