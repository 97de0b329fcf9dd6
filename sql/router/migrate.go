package routersql

import (
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

// Migrate brings the registry at path, opened as db, to the latest schema. Several router
// processes may share one registry file, and golang-migrate's SQLite lock is per process,
// so an exclusive lock on path+".lock" makes them take turns.
func Migrate(db *sql.DB, path string) error {
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open the registry lock: %w", err)
	}
	defer lock.Close()
	unlock, err := lockFile(lock)
	if err != nil {
		return fmt.Errorf("lock the registry: %w", err)
	}
	defer unlock() //nolint:errcheck // closing the file releases the lock too

	src, err := iofs.New(Migrations(), ".")
	if err != nil {
		return err
	}
	driver, err := sqlite.WithInstance(db, &sqlite.Config{})
	if err != nil {
		return fmt.Errorf("registry migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "sqlite", driver)
	if err != nil {
		return fmt.Errorf("registry migrations: %w", err)
	}
	// m.Close would close db, which the caller keeps using.
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate the registry: %w", err)
	}
	return nil
}
