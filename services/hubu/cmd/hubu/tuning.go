package main

import (
	"errors"
	"net/url"
	"runtime"
	"strconv"
	"strings"
)

// gcPercent is hubu serve's GOGC unless the environment sets one. Hubu's live heap is a few
// MB (its caches are bounded), so at Go's default of 100 it collected every few MB allocated:
// some 20 times a second at 2,000 authorizations a second, a tenth of its CPU. At 400 the heap
// may grow to five times what is live, some 10 MB more, and the collector runs a quarter as often.
const gcPercent = 400

// memoryLimit is hubu serve's soft memory limit unless the environment sets GOMEMLIMIT. At
// GOGC 400 the heap may grow to five times what is live, which under a few hundred requests
// in flight (some 15 MB live) is well past what Hubu needs: near the limit the collector runs
// as often as it must instead, so Hubu's memory stays bounded under load while a quiet Hubu
// still collects rarely.
const memoryLimit = 48 << 20

// defaultPoolSize is the size of hubu serve's connection pool when the database URL sets no
// pool_max_conns: four connections per CPU, at least 8. An authorization holds its connection
// through two round trips and its commit's flush to disk, time in which neither Hubu nor
// Postgres uses a CPU, so pgx's default of one connection per CPU (at least 4) left the CPUs
// idle while requests queued for a connection: on 2 CPUs, 8 concurrent clients got a third
// more authorizations a second from 8 connections than from 4.
func defaultPoolSize() int { return max(8, 4*runtime.GOMAXPROCS(0)) }

// poolURLs returns dbURL for the pool, with pool_max_conns at defaultPoolSize unless dbURL
// sets it, and for the connections that are not the pool's (the schema version check, the
// cache's listener), without the pool's settings: Postgres refuses a pool_* parameter, which
// only pgxpool reads.
func poolURLs(dbURL string) (pool, single string, err error) {
	// Never the parser's message: it quotes the URL, which may hold a password.
	bad := errors.New("--database-url is not a valid PostgreSQL URL")
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", "", bad
	}
	q, err := url.ParseQuery(u.RawQuery) // u.Query() would drop what does not parse
	if err != nil {
		return "", "", bad
	}
	others := url.Values{}
	for k, v := range q {
		if !strings.HasPrefix(k, "pool_") {
			others[k] = v
		}
	}
	if !q.Has("pool_max_conns") {
		q.Set("pool_max_conns", strconv.Itoa(defaultPoolSize()))
	}
	p, s := *u, *u
	p.RawQuery, s.RawQuery = q.Encode(), others.Encode()
	return p.String(), s.String(), nil
}
