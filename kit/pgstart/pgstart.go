// Package pgstart opens a binary's PostgreSQL pool at start. It is apart from package
// command so that binaries without PostgreSQL (the router) do not link the driver.
package pgstart

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Open opens a pool on url and checks, within 10 s, that the database answers. Its errors
// are one line and never hold the URL, which may hold a password.
//
// Every connection of the pool commits durably (synchronous_commit=on, whatever the server's,
// the database's or the role's default): Hubu's authorization record and Gongbu's record that
// it is about to submit are the evidence that a decision was (or was not) sent to a provider,
// and a commit acknowledged before it reached the disk could be lost after the provider
// charged. A write that is evidence of nothing may still opt out for its own transaction
// (SET LOCAL synchronous_commit = off).
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errors.New("--database-url is not a valid PostgreSQL URL")
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, errors.New("--database-url is not a valid PostgreSQL URL")
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach the database: %v", Summary(err))
	}
	return pool, nil
}

// Summary keeps a connection error to its last cause, without the driver's account of
// where it connected.
func Summary(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.Contains(msg, "failed to connect") {
		return "failed to connect: " + msg[i+2:]
	}
	return msg
}
