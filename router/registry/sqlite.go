package registry

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	routersql "hubu.dev/hubu/sql/router"
	"hubu.dev/hubu/sql/router/routerdb"
)

// sqliteStore is a registry file. Several router processes may share it: every decision is an
// IMMEDIATE transaction.
type sqliteStore struct {
	db             *sql.DB
	stmts          *stmtCache // the calls' queries, compiled once
	q              *routerdb.Queries
	installationID string
	now            func() time.Time
	// writes queues this process's writers in Go. SQLite lets one writer in at a time and
	// makes the others retry on a timer (busy_timeout), which under a few hundred concurrent
	// calls is unfair enough to starve one past its timeout; queued here, each waits its
	// turn, and only writers in other processes still meet the busy timeout.
	writes sync.Mutex
}

// maxConns bounds the registry's SQLite connections. Each has a page cache of its own (up
// to 2 MiB, SQLite's default), and database/sql would otherwise open one per concurrent
// call: under a few hundred of them, dozens of connections whose caches together are tens
// of megabytes. Writers take turns anyway (writes), and a read holds a connection for
// tens of microseconds, so a few are enough for both.
const maxConns = 4

// openSQLite opens (creating if needed) the registry file at path with 0600 permissions in a
// 0700 directory, migrates it, and makes or reads its installation id.
func openSQLite(ctx context.Context, path string, now func() time.Time) (*sqliteStore, string, error) {
	if err := safePath(path); err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, "", fmt.Errorf("create the state directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("open the registry: %w", err)
	}
	f.Close()
	if err := os.Chmod(path, 0o600); err != nil { // a file made by someone else keeps no wider mode
		return nil, "", fmt.Errorf("secure the registry: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, "", fmt.Errorf("open the registry: %w", err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	if err := routersql.Migrate(db, path); err != nil {
		db.Close()
		return nil, "", err
	}
	s := &sqliteStore{db: db, stmts: newStmtCache(db), q: routerdb.New(), now: now}
	if err := s.q.InsertInstallation(ctx, db, routerdb.InsertInstallationParams{InstallationID: uuid.NewString(), CreatedAt: now().UnixMilli()}); err != nil {
		db.Close()
		return nil, "", fmt.Errorf("make the installation id: %w", err)
	}
	if s.installationID, err = s.q.GetInstallation(ctx, db); err != nil {
		db.Close()
		return nil, "", fmt.Errorf("read the installation id: %w", err)
	}
	return s, s.installationID, nil
}

// dsn is the SQLite URI of a file: every connection is IMMEDIATE, WAL, synchronous=FULL.
func dsn(path string) string {
	return "file:" + path + "?_txlock=immediate&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"
}

// safePath refuses paths SQLite would read as URI syntax: they would open another file
// without the settings above.
func safePath(path string) error {
	if strings.ContainsAny(path, "?#%") {
		return fmt.Errorf("the path %q may not contain ?, # or %%", path)
	}
	return nil
}

func (s *sqliteStore) close() error {
	s.stmts.close()
	return s.db.Close()
}

func (s *sqliteStore) call(ctx context.Context, k callKey) (seenRow, bool, error) {
	return s.get(ctx, s.stmts, k)
}

func (s *sqliteStore) get(ctx context.Context, db routerdb.DBTX, k callKey) (seenRow, bool, error) {
	row, err := s.q.GetCall(ctx, db, routerdb.GetCallParams{Agent: k.agent, Platform: k.platform, InstallationID: s.installationID, HarnessCallID: k.callID})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return seenRow{}, false, nil
	case err != nil:
		return seenRow{}, false, err
	}
	return sqliteRow(row), true, nil
}

// create looks for the call again under the write lock, inside the IMMEDIATE transaction that
// records it: one writer decides at a time, in this process (writes) and across the processes
// sharing the file (SQLite's lock), so the call's keys are made only by the one that records them.
func (s *sqliteStore) create(ctx context.Context, c Call, newEntry func() (Entry, error)) (seenRow, bool, error) {
	s.writes.Lock()
	defer s.writes.Unlock()
	tx, err := s.db.BeginTx(ctx, nil) // IMMEDIATE (see the DSN)
	if err != nil {
		return seenRow{}, false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after commit

	// Another delivery of the call, in this process or another, may have recorded it since.
	if row, found, err := s.get(ctx, s.stmts.in(tx), c.key()); found || err != nil {
		if err != nil {
			return seenRow{}, false, fmt.Errorf("look the call up: %w", err)
		}
		return row, false, nil
	}
	e, err := newEntry()
	if err != nil {
		return seenRow{}, false, err
	}
	now := s.now().UnixMilli()
	if err := s.q.InsertCall(ctx, s.stmts.in(tx), routerdb.InsertCallParams{
		Agent: c.Agent, Platform: c.Platform, InstallationID: s.installationID, HarnessCallID: c.CallID, Tool: c.Tool,
		RequestHash: c.RequestHash, OperationKey: e.OperationKey, PublicHandle: e.PublicHandle, ScopeDigest: c.Scope,
		CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		return seenRow{}, false, fmt.Errorf("record the call: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return seenRow{}, false, fmt.Errorf("commit the call: %w", err)
	}
	return seenRow{entry: e, scope: c.Scope}, true, nil
}

// setResult records a call's final answer without waiting for the disk (synchronous=NORMAL for
// this one commit, on a connection of its own): the answer is a cache of what Hubu and Gongbu
// keep, not evidence. Should the machine lose the commit (a crash of the system, not of the
// router: the write has reached the OS), the call's row stands without it, and its next
// delivery is forwarded under the same operation key and answered from Hubu's and Gongbu's
// records, charging nothing again. Every later commit that waits for the disk (the next call's
// row) flushes the log up to itself, so an answer is never lost while a call recorded after
// it is kept. The connection goes back to the pool at synchronous=FULL, or not at all.
func (s *sqliteStore) setResult(ctx context.Context, k callKey, result []byte) error {
	s.writes.Lock()
	defer s.writes.Unlock()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		return fmt.Errorf("leave the flush out: %w", err)
	}
	err = s.writeResult(ctx, conn, k, result)
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous = FULL"); rerr != nil {
		// A connection that would record a call without flushing it must not be used again.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return errors.Join(err, fmt.Errorf("restore the flush: %w", rerr))
	}
	return err
}

// writeResult is setResult's write, in a transaction on conn: the statement compiled once
// (a connection's own statements are not the cache's).
func (s *sqliteStore) writeResult(ctx context.Context, conn *sql.Conn, k callKey, result []byte) error {
	tx, err := conn.BeginTx(ctx, nil) // IMMEDIATE (see the DSN)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after commit
	r := string(result)
	if err := s.q.SetResult(ctx, s.stmts.in(tx), routerdb.SetResultParams{
		Result: &r, UpdatedAt: s.now().UnixMilli(), Agent: k.agent, Platform: k.platform, InstallationID: s.installationID, HarnessCallID: k.callID,
	}); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *sqliteStore) operationKey(ctx context.Context, agent, publicHandle string) (string, bool, error) {
	row, err := s.q.GetCallByHandle(ctx, s.stmts, routerdb.GetCallByHandleParams{PublicHandle: publicHandle, Agent: agent})
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return row.OperationKey, true, nil
}

func (s *sqliteStore) count(ctx context.Context, before time.Time) (Counts, error) {
	return countSQLite(ctx, s.q, s.db, s.installationID, before)
}

// countSQLite counts an installation's calls in a registry file: the one a store has open, or a
// backup of it.
func countSQLite(ctx context.Context, q *routerdb.Queries, db routerdb.DBTX, installationID string, before time.Time) (Counts, error) {
	all, err := q.CountCalls(ctx, db, installationID)
	if err != nil {
		return Counts{}, err
	}
	prunable, err := q.CountPrunableCalls(ctx, db, routerdb.CountPrunableCallsParams{InstallationID: installationID, Before: before.UnixMilli()})
	if err != nil {
		return Counts{}, err
	}
	return Counts{Calls: int(all.Calls), NotFinal: int(all.Calls - all.Final), Prunable: int(prunable)}, nil
}

// prune deletes a batch in one IMMEDIATE transaction, queued behind this process's other writers.
func (s *sqliteStore) prune(ctx context.Context, before time.Time, limit int) (int, error) {
	s.writes.Lock()
	defer s.writes.Unlock()
	tx, err := s.db.BeginTx(ctx, nil) // IMMEDIATE (see the DSN)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after commit
	n, err := s.q.PruneCalls(ctx, tx, routerdb.PruneCallsParams{InstallationID: s.installationID, Before: before.UnixMilli(), Batch: int64(limit)})
	if err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return int(n), nil
}

// vacuumInto copies the whole database into a new or empty file, from one read transaction, so
// that writers (in this process or others) go on meanwhile. It is written here rather than in
// the sqlc queries because sqlc's SQLite grammar has no VACUUM INTO.
const vacuumInto = `VACUUM INTO ?`

// integrityCheck is SQLite's full check of a database: its pages, and every index against its
// table (which quick_check skips). It answers one row, "ok", when it finds nothing wrong. A
// backup is checked once, when it is made, and that is the moment to find out it is unusable.
// A PRAGMA, which sqlc does not compile either.
const integrityCheck = `PRAGMA integrity_check`

// backup implements Registry.Backup.
func (s *sqliteStore) backup(ctx context.Context, path string, before time.Time) (Counts, error) {
	return backupSQLite(ctx, s.db, s.installationID, path, before)
}

// backupSQLite copies the registry open as db, whose installation is installationID, to path
// (a new file), makes the copy durable, and checks and counts it as Registry.Backup says.
func backupSQLite(ctx context.Context, db *sql.DB, installationID, path string, before time.Time) (Counts, error) {
	abs, err := filepath.Abs(path) // never read as a file: URI by SQLite
	if err != nil {
		return Counts{}, err
	}
	if err := safePath(abs); err != nil { // checkBackup opens it as a URI
		return Counts{}, err
	}
	// Created here, empty and 0600, so that the copy is never readable by others and an existing
	// file is never overwritten; VACUUM INTO fills an empty file.
	f, err := os.OpenFile(abs, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return Counts{}, fmt.Errorf("create the backup file: %w", err)
	}
	f.Close()
	counts, err := writeBackup(ctx, db, installationID, abs, before)
	if err != nil {
		os.Remove(abs) //nolint:errcheck // the error says what went wrong; this file is no backup
		return Counts{}, err
	}
	return counts, nil
}

func writeBackup(ctx context.Context, db *sql.DB, installationID, path string, before time.Time) (Counts, error) {
	if _, err := db.ExecContext(ctx, vacuumInto, path); err != nil {
		return Counts{}, fmt.Errorf("copy the registry: %w", err)
	}
	// SQLite does not sync the file VACUUM INTO writes: a crash could lose a backup that the
	// caller then prunes after.
	if err := syncFile(path); err != nil {
		return Counts{}, fmt.Errorf("sync the backup: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return Counts{}, fmt.Errorf("sync the backup's directory: %w", err)
	}
	return checkBackup(ctx, installationID, path, before)
}

// checkBackup opens a backup read-only, checks it, and counts its calls.
func checkBackup(ctx context.Context, installationID, path string, before time.Time) (Counts, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return Counts{}, fmt.Errorf("open the backup: %w", err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRowContext(ctx, integrityCheck).Scan(&check); err != nil {
		return Counts{}, fmt.Errorf("check the backup: %w", err)
	}
	if check != "ok" {
		return Counts{}, fmt.Errorf("the backup is damaged: %s", check)
	}
	q := routerdb.New()
	id, err := q.GetInstallation(ctx, db)
	if err != nil {
		return Counts{}, fmt.Errorf("read the backup's installation id: %w", err)
	}
	if id != installationID {
		return Counts{}, errors.New("the backup has another installation id than the registry")
	}
	counts, err := countSQLite(ctx, q, db, id, before)
	if err != nil {
		return Counts{}, fmt.Errorf("count the backup's calls: %w", err)
	}
	return counts, nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes a new file's directory entry durable. Windows cannot sync a directory (NTFS
// journals the entry itself).
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

func sqliteRow(row routerdb.Call) seenRow {
	e := Entry{OperationKey: row.OperationKey, PublicHandle: row.PublicHandle, RequestHash: row.RequestHash, Tool: row.Tool}
	if row.Result != nil {
		e.Result = []byte(*row.Result)
	}
	return seenRow{entry: e, scope: row.ScopeDigest}
}
