package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"hubu.dev/hubu/kit/command"
	"hubu.dev/hubu/router/registry"
)

const backupUsage = `usage: hubu-unified-mcp backup [--state FILE] --to FILE|-
Writes a consistent copy of the registry file (env ROUTER_STATE; the router's default file when unset)
to --to FILE, a new file made 0600 (the registry holds private operation keys), while routers go on
running: SQLite's VACUUM INTO copies it from one read transaction, with what is still in the WAL. The
copy is synced, then opened read-only and checked (PRAGMA integrity_check) and counted; a copy that
fails is removed. The registry is opened read-only: never created, never migrated. Prints one line:
the calls copied and the copy's size, never keys, handles or call ids.

--to - writes the checked copy to stdout instead (it is made first in a temporary file, in TMPDIR),
for an image without a shell: docker compose exec -T router hubu-unified-mcp backup --to - > FILE.
The line then goes to stderr. A terminal is refused.

A Postgres registry (--state postgres://...) is backed up with the database's own tools: pg_dump of its
database, or point-in-time recovery. To restore a copy, stop every router, put the copy in place of the
registry file and delete the FILE-wal and FILE-shm beside it.`

// backup copies the registry file to --to, or to stdout. --to has no environment fallback,
// as prune's --backup has none: where a copy of private keys goes is said on the command
// line. --state falls back to ROUTER_STATE (and ROUTER_STATE_FILE), as the router's does.
func backup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	getenv, err := stateSecret(getenv)
	if err != nil {
		return err
	}
	fs := command.NewFlagSet("hubu-unified-mcp backup", getenv, stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, backupUsage); fs.PrintDefaults() }
	state := stateFlag(fs)
	var to string
	fs.StringVar(&to, "to", "", "the backup: a new file, or - for stdout")
	if err := fs.ParseNoArgs(args); err != nil {
		return err
	}
	if *state, err = statePath(*state, getenv); err != nil {
		return err
	}
	if registry.IsPostgres(*state) {
		return errors.New("--state is a Postgres registry: back its database up with pg_dump (the connection in PG* variables " +
			"or ~/.pgpass, not on the command line) or your point-in-time recovery; backup copies a registry file")
	}
	switch {
	case to == "":
		return errors.New("backup needs --to FILE, a new file, or --to - for stdout")
	case to == "-":
		if isTerminal(stdout) {
			return errors.New("--to - writes the registry, private keys and all, to stdout, which is a terminal: redirect it to a file")
		}
		return backupToStream(ctx, *state, stdout, stderr)
	}
	if _, err := os.Stat(to); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--to %s: give a file that does not exist yet (%v)", to, existsOr(err))
	}
	b, err := registry.BackupFile(ctx, *state, to)
	if err != nil {
		return fmt.Errorf("backup of %s to %s: %v", registry.Redact(*state), to, err)
	}
	return backedUp(stdout, b, to)
}

// backupToStream backs the registry up to a temporary file, checks it, and copies it to w.
// VACUUM INTO writes a file it can seek in and read back, never a stream.
func backupToStream(ctx context.Context, state string, w, stderr io.Writer) error {
	dir, err := os.MkdirTemp("", "hubu-router-backup-") // 0700
	if err != nil {
		return fmt.Errorf("a temporary directory for the backup: %v", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "router.db")
	b, err := registry.BackupFile(ctx, state, path)
	if err != nil {
		return fmt.Errorf("backup of %s: %v", registry.Redact(state), err)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if n, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("write the backup to stdout: %v, after %d of %d bytes; what was written is no backup", err, n, b.Bytes)
	}
	return backedUp(stderr, b, "stdout")
}

func backedUp(w io.Writer, b registry.FileBackup, to string) error {
	_, err := fmt.Fprintf(w, "backed up %d calls (%d not final) to %s: %d bytes, integrity_check ok\n", b.Calls, b.NotFinal, to, b.Bytes)
	return err
}

// isTerminal says whether w is a terminal (a character device other than the null device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(st, null)
}
