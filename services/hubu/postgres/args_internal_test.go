package postgres

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// uuid.UUID and *uuid.UUID arguments go to pgx as pgtype.UUID, a nil pointer as NULL; every
// other argument as it is; and the caller's slice is left alone.
func TestPgArgs(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	var none *uuid.UUID
	args := []any{id, &id, none, "text", 7}
	got := pgArgs(args)
	want := []any{pgtype.UUID{Bytes: id, Valid: true}, pgtype.UUID{Bytes: id, Valid: true}, pgtype.UUID{}, "text", 7}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("argument %d: %#v, want %#v", i, got[i], want[i])
		}
	}
	if args[0] != any(id) || args[1] != any(&id) {
		t.Errorf("the caller's arguments changed: %#v", args)
	}
	plain := []any{"text", 7}
	if got := pgArgs(plain); &got[0] != &plain[0] {
		t.Error("arguments with nothing to convert were copied")
	}
}

// What the conversion hands pgx is what Postgres stores: the uuid itself, and NULL for a nil
// pointer.
func TestPgArgsInPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := argsDB{newPipePool(t)}
	id := uuid.New()
	var none *uuid.UUID
	var text string
	var isNull bool
	if err := db.QueryRow(ctx, "SELECT $1::uuid::text, $2::uuid IS NULL", id, none).Scan(&text, &isNull); err != nil {
		t.Fatal(err)
	}
	if text != id.String() || !isNull {
		t.Fatalf("Postgres got %s and null=%v, want %s and null", text, isNull, id)
	}
}
