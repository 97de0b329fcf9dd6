// Package gongbusql carries Gongbu's database schema: the golang-migrate migrations, embedded
// so the gongbu binary can apply them, and (in gongbudb) the Go code sqlc compiles from queries/.
package gongbusql
