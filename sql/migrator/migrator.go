// Package migrator applies a database's embedded golang-migrate migrations. Every service
// binary uses it for its `migrate up|down|version` commands, and tests use it to build templates.
package migrator

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers the pgx5:// driver
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

// Status is where a database stands in its migrations.
type Status struct {
	Version uint // 0 when no migration has been applied
	Dirty   bool // a migration failed half-way; an operator must repair it
}

// Up applies every migration not yet applied.
func Up(databaseURL string, migrations fs.FS) error {
	return run(databaseURL, migrations, func(m *migrate.Migrate) error { return m.Up() })
}

// Down rolls back the given number of migrations, or all of them when steps is 0.
func Down(databaseURL string, migrations fs.FS, steps int) error {
	return run(databaseURL, migrations, func(m *migrate.Migrate) error {
		if steps == 0 {
			return m.Down()
		}
		return m.Steps(-steps)
	})
}

// Version reports the applied version.
func Version(databaseURL string, migrations fs.FS) (Status, error) {
	var st Status
	err := run(databaseURL, migrations, func(m *migrate.Migrate) error {
		v, dirty, err := m.Version()
		if errors.Is(err, migrate.ErrNilVersion) {
			return nil
		}
		st = Status{Version: v, Dirty: dirty}
		return err
	})
	return st, err
}

func run(databaseURL string, migrations fs.FS, do func(*migrate.Migrate) error) error {
	driverURL, err := pgx5URL(databaseURL)
	if err != nil {
		return err
	}
	src, err := iofs.New(migrations, ".")
	if err != nil {
		return fmt.Errorf("read migrations: %w", err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, driverURL)
	if err != nil {
		return fmt.Errorf("connect for migrations: %w", redact(err, databaseURL))
	}
	defer m.Close()
	if err := do(m); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// pgx5URL turns a libpq URL (postgres:// or postgresql://) into the one golang-migrate's
// pgx/v5 driver expects.
func pgx5URL(databaseURL string) (string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "", errors.New("database URL is not a valid URL")
	}
	switch u.Scheme {
	case "postgres", "postgresql":
		u.Scheme = "pgx5"
	default:
		return "", fmt.Errorf("database URL scheme %q is not postgres://", u.Scheme)
	}
	// A service's URL may carry pgxpool's settings (pool_max_conns, ...): the migration's
	// single connection would send them to Postgres, which refuses unknown parameters.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", errors.New("database URL has a query that does not parse")
	}
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// redact keeps a password that the driver may echo out of error messages.
func redact(err error, databaseURL string) error {
	u, perr := url.Parse(databaseURL)
	if perr != nil || u.User == nil {
		return err
	}
	if _, ok := u.User.Password(); !ok {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), u.User.String(), u.User.Username()+":xxxxx"))
}

// Latest is the highest version among the migration files: the version a binary built with
// them expects its database to be at.
func Latest(migrations fs.FS) (uint, error) {
	names, err := fs.Glob(migrations, "*.up.sql")
	if err != nil {
		return 0, err
	}
	var latest uint
	for _, name := range names {
		var v uint
		if _, err := fmt.Sscanf(name, "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest, nil
}
