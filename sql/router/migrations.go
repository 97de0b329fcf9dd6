package routersql

import (
	"embed"
	"io/fs"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

//go:embed pgmigrations/*.sql
var postgresMigrationFiles embed.FS

// Migrations returns the golang-migrate migration files of the router's SQLite registry.
func Migrations() fs.FS { return sub(migrationFiles, "migrations") }

// PostgresMigrations returns the golang-migrate migration files of the router's registry in
// Postgres, the one a router fleet shares. They are numbered on their own: the Postgres schema
// started from what the SQLite one had become.
func PostgresMigrations() fs.FS { return sub(postgresMigrationFiles, "pgmigrations") }

func sub(files embed.FS, dir string) fs.FS {
	s, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // the embedded directory is fixed at build time
	}
	return s
}
