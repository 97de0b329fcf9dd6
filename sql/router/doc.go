// Package routersql carries the router's SQLite registry schema: golang-migrate migrations,
// embedded so the router binary applies them itself, and (in routerdb) the Go code sqlc
// compiles from queries/.
package routersql
