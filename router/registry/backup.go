package registry

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"hubu.dev/hubu/sql/router/routerdb"
)

// FileBackup is what BackupFile copied.
type FileBackup struct {
	Calls    int   // every call in the copy
	NotFinal int   // of them, calls without a final result
	Bytes    int64 // the copy's size
}

// BackupFile writes a consistent copy of the registry file at state to path, a file that must
// not exist yet, as Registry.Backup does: made 0600 with SQLite's VACUUM INTO from one read
// transaction, so that routers go on writing meanwhile (in WAL mode a reader never waits for a
// writer, nor a writer for it); synced; then opened read-only, checked with integrity_check and
// counted. A copy that fails a step is removed.
//
// Unlike Open, it opens the registry read-only and neither creates nor migrates it: a backup
// is the registry as its routers left it, whichever release takes it, so that the one taken
// before an upgrade is one to roll back to. Of a Postgres registry it returns ErrBackupPostgres.
func BackupFile(ctx context.Context, state, path string) (FileBackup, error) {
	switch {
	case keywordDSN(state):
		return FileBackup{}, errKeywordDSN
	case IsPostgres(state):
		return FileBackup{}, ErrBackupPostgres
	}
	abs, err := filepath.Abs(state)
	if err != nil {
		return FileBackup{}, err
	}
	if err := safePath(abs); err != nil {
		return FileBackup{}, err
	}
	// mode=ro would not create a missing file, but it would say only "unable to open".
	if st, err := os.Stat(abs); err != nil {
		return FileBackup{}, fmt.Errorf("the registry: %w", err)
	} else if !st.Mode().IsRegular() {
		return FileBackup{}, fmt.Errorf("the registry %s is not a file", abs)
	}
	db, err := sql.Open("sqlite", "file:"+abs+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return FileBackup{}, fmt.Errorf("open the registry: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	id, err := routerdb.New().GetInstallation(ctx, db)
	if err != nil {
		return FileBackup{}, fmt.Errorf("read the registry's installation id (is it a router registry?): %w", err)
	}
	counts, err := backupSQLite(ctx, db, id, path, time.Time{})
	if err != nil {
		return FileBackup{}, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return FileBackup{}, fmt.Errorf("the backup: %w", err)
	}
	return FileBackup{Calls: counts.Calls, NotFinal: counts.NotFinal, Bytes: st.Size()}, nil
}
