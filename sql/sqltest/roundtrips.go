package sqltest

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RoundTrips counts what a service's pool sends to Postgres: round trips as the wire sees them
// (a read that answers what was written since the last one) and statements as pgx sends them
// (a batch's each, BEGIN and COMMIT included). It is deterministic: the pool it configures has
// one connection, so pgx's statement cache is warm after a path's first run, and never pings it.
// Tests pin a hot path's round trips with it, so that one more cannot creep in unnoticed.
type RoundTrips struct {
	mu                sync.Mutex
	trips, statements int
	unflushed         int      // transactions told to commit without waiting for the disk
	written           bool     // something was written since the last counted read
	queries           []string // the sqlc names of the statements sent
}

// Reset starts the counts over.
func (r *RoundTrips) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips, r.statements, r.unflushed, r.queries = 0, 0, 0, nil
}

// Queries returns the names of the sqlc queries sent since the last Reset, in order (the
// "-- name:" that sqlc puts at the head of each); other statements are left out.
func (r *RoundTrips) Queries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.queries)
}

// Counts returns the round trips and statements since the last Reset.
func (r *RoundTrips) Counts() (trips, statements int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.trips, r.statements
}

// Unflushed returns how many transactions since the last Reset set synchronous_commit off
// (their commit does not wait for the disk): with SET LOCAL, or with set_config(…, true) in
// the statement itself.
func (r *RoundTrips) Unflushed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unflushed
}

func (r *RoundTrips) statement(sql string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statements++
	if name, ok := strings.CutPrefix(sql, "-- name: "); ok {
		name, _, _ = strings.Cut(name, " ")
		r.queries = append(r.queries, name)
	}
	if lower := strings.ToLower(sql); strings.Contains(lower, "synchronous_commit = off") ||
		strings.Contains(lower, "set_config('synchronous_commit', 'off', true)") {
		r.unflushed++
	}
}

// configure makes cfg's pool one connection whose traffic r counts.
func (r *RoundTrips) configure(cfg *pgxpool.Config) {
	cfg.MaxConns, cfg.MinConns = 1, 0
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, r: r}, nil
	}
	cfg.ConnConfig.Tracer = r
}

func (r *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.statement(data.SQL)
	return ctx
}

func (r *RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *RoundTrips) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	r.statement(data.SQL)
}

func (r *RoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// countingConn counts a round trip at each read that returns data after a write.
type countingConn struct {
	net.Conn
	r *RoundTrips
}

// Write marks the write before it starts: the answer can arrive while it is still returning.
// pgx reads in a goroutine of its own when a write takes longer than a few milliseconds (a
// loaded machine), and that read may return the answer before this Write does; marked after, the
// round trip would go uncounted.
func (c *countingConn) Write(b []byte) (int, error) {
	if len(b) > 0 {
		c.r.mu.Lock()
		c.r.written = true
		c.r.mu.Unlock()
	}
	return c.Conn.Write(b)
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.r.mu.Lock()
		if c.r.written {
			c.r.trips, c.r.written = c.r.trips+1, false
		}
		c.r.mu.Unlock()
	}
	return n, err
}

// NewCountedPool is a pool on dbURL whose traffic r counts, closed when the test ends.
func NewCountedPool(t testing.TB, dbURL string, r *RoundTrips) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	r.configure(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
