// Package hubusql carries Hubu's database schema: the golang-migrate migrations, embedded so
// the hubu binary can apply them, and (in hubudb) the Go code sqlc compiles from queries/.
package hubusql
