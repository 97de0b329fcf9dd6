package mcpserver_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// BenchmarkRouter measures a spend through the router over the SDK's in-memory transport,
// with a loopback fake Hubu and Gongbu: a new call (identity, hash, a durable registry
// insert, the forward, the final-result write) and a redelivery (identity, hash, a registry
// read, the recorded answer, no backend). BenchmarkSQLiteCommit is one durable commit on
// the same kind of file, the unit the new call pays twice.
func BenchmarkRouter(b *testing.B) {
	b.Run("new call", func(b *testing.B) {
		e := setup(b, nil)
		b.ResetTimer()
		for i := range b.N {
			res := e.call(b, "generate_image", fox, codex(fmt.Sprintf("call_benchnew%016d", i)))
			if res.IsError {
				b.Fatal(text(res))
			}
		}
	})
	b.Run("redelivery", func(b *testing.B) {
		e := setup(b, nil)
		if res := e.call(b, "generate_image", fox, codex("call_benchagainKCafBphPMEgBuQ")); res.IsError {
			b.Fatal(text(res))
		}
		b.ResetTimer()
		for range b.N {
			if res := e.call(b, "generate_image", fox, codex("call_benchagainKCafBphPMEgBuQ")); res.IsError {
				b.Fatal(text(res))
			}
		}
	})
	b.Run("backend round trip alone", func(b *testing.B) {
		e := setup(b, nil)
		b.ResetTimer()
		for range b.N {
			if res := e.call(b, "capabilities", `{}`, nil); res.IsError {
				b.Fatal(text(res))
			}
		}
	})
}

func BenchmarkSQLiteCommit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "commit.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES (?, ?)", fmt.Sprint(i), "x"); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}
