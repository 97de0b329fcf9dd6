package registry

import (
	"context"
	"database/sql"
	"sync"

	"hubu.dev/hubu/sql/router/routerdb"
)

// stmtCache is a routerdb.DBTX that compiles each query once and reuses the statement.
// SQLite otherwise compiles the SQL on every use, and under a few hundred concurrent calls
// that was about a tenth of the router's CPU, much of it inside the write lock that every
// new call waits its turn for. database/sql prepares a statement again on each connection
// that needs it, so the cache stays right across the pool's connections.
type stmtCache struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*sql.Stmt{}}
}

// stmt is the statement for query, prepared on first use (outside the lock: preparing may wait
// for a connection); nil when it cannot be prepared (the caller then runs the query
// unprepared, which reports the error).
func (c *stmtCache) stmt(ctx context.Context, query string) *sql.Stmt {
	c.mu.Lock()
	st, ok := c.stmts[query]
	c.mu.Unlock()
	if ok {
		return st
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if first, ok := c.stmts[query]; ok { // another call prepared it meanwhile
		_ = st.Close()
		return first
	}
	c.stmts[query] = st
	return st
}

func (c *stmtCache) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.db.ExecContext(ctx, query, args...)
}

func (c *stmtCache) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return c.db.PrepareContext(ctx, query)
}

func (c *stmtCache) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.db.QueryContext(ctx, query, args...)
}

func (c *stmtCache) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.db.QueryRowContext(ctx, query, args...)
}

// in is the cache's statements within tx (on tx's connection).
func (c *stmtCache) in(tx *sql.Tx) routerdb.DBTX { return txStmts{tx: tx, c: c} }

type txStmts struct {
	tx *sql.Tx
	c  *stmtCache
}

func (t txStmts) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.c.stmt(ctx, query); st != nil {
		return t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, query, args...)
}

func (t txStmts) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.tx.PrepareContext(ctx, query)
}

func (t txStmts) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.c.stmt(ctx, query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, query, args...)
}

func (t txStmts) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.c.stmt(ctx, query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, query, args...)
}

// close closes every statement; the database is closed after.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.stmts {
		_ = st.Close()
		delete(c.stmts, q)
	}
}
