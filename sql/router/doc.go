// Package routersql carries the router's registry schema, for its two backends: the SQLite
// file a router keeps by default (migrations/, and in routerdb the Go code sqlc compiles from
// queries/) and the Postgres database a router fleet shares (pgmigrations/, and in routerpg the
// code compiled from pgqueries/). The migrations are golang-migrate's, embedded so the router
// binary applies them itself.
package routersql
