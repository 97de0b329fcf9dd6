package postgres

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"hubu.dev/hubu/sql/hubu/hubudb"
)

// pgArgs is a query's arguments in types pgx encodes directly. pgx encodes a uuid.UUID
// through its driver.Valuer: as text, which its binary uuid encoder refuses, and then, after
// building an error it throws away, parsed back into bytes. That is 3.5 µs and 20 allocations
// an argument against 0.1 µs and one for a pgtype.UUID, and a new authorization has six (the
// agent's id in each statement, the operation's and the decision's). args is never changed:
// a caller may hold on to it.
func pgArgs(args []any) []any {
	var out []any // a copy, made at the first argument to convert
	for i, a := range args {
		var conv pgtype.UUID
		switch v := a.(type) {
		case uuid.UUID:
			conv = pgtype.UUID{Bytes: v, Valid: true}
		case *uuid.UUID:
			if v != nil {
				conv = pgtype.UUID{Bytes: *v, Valid: true}
			}
		default:
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = conv
	}
	if out == nil {
		return args
	}
	return out
}

// argsDB runs the queries of the Store on db, with their arguments through pgArgs.
type argsDB struct{ db hubudb.DBTX }

var _ hubudb.DBTX = argsDB{}

func (d argsDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return d.db.Exec(ctx, sql, pgArgs(args)...)
}

func (d argsDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return d.db.Query(ctx, sql, pgArgs(args)...)
}

func (d argsDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return d.db.QueryRow(ctx, sql, pgArgs(args)...)
}
