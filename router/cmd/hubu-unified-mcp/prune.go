package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"hubu.dev/hubu/kit/command"
	"hubu.dev/hubu/router/registry"
)

const pruneUsage = `usage: hubu-unified-mcp prune --state FILE|URL --older-than DURATION (--backup FILE | --backup-taken) [--dry-run]
Deletes from the registry the calls whose answer is recorded (final) and that were created and last updated
more than DURATION ago (at least 24h; 2160h is 90 days). A call without a final answer is never deleted,
however old: a redelivery must continue it. Routers may run meanwhile: prune deletes 1000 calls per
transaction and leaves the database to them between batches.

Every deleted call is one the registry no longer recognises: delivered again, it gets a new operation key,
and Hubu charges it again. Harnesses redeliver within a session (a request retried after a lost answer, a
conversation resumed), and a session can last hours: hence the floor of 24h. Choose far more than the
longest redelivery you expect.

A registry file is backed up first, to --backup FILE (a new file, made 0600 with SQLite's VACUUM INTO
while routers run, synced, then opened, checked and counted); nothing is deleted unless that backup holds
every call to be deleted. A Postgres registry cannot be backed up by the router: back its database up
first (pg_dump, or check that point-in-time recovery covers now), then say so with --backup-taken.
With --dry-run nothing is changed and no backup made: prune prints what it would delete.

A router keeps the final answers it saw last in memory for up to an hour, and may replay one for that long
after its row is deleted: it is the recorded answer, never rewritten. The file does not shrink: SQLite
reuses the freed pages for new calls. Only counts are printed, never keys, handles or call ids.`

// minPruneAge is the youngest final call prune may delete. Harnesses redeliver a call within its
// session, which can last hours, and a deleted call delivered again is charged again.
const minPruneAge = 24 * time.Hour

// pruneBatch is how many calls one transaction deletes: a short write lock on a registry file
// (routers wait for it), a small transaction on Postgres, however large the registry.
const pruneBatch = 1000

// pruneSettings are prune's flags, checked.
type pruneSettings struct {
	state       string
	olderThan   time.Duration
	backup      string
	backupTaken bool
	dryRun      bool
}

// prune deletes the registry's final calls older than --older-than, after a backup. Its
// settings other than --state have no environment fallback: what a destructive command
// deletes, and the backup it relies on, are said on its own command line, not left over
// from an environment. --state falls back to ROUTER_STATE, so a Postgres password can stay
// out of the command line.
func prune(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	s, err := parsePrune(args, getenv, stderr)
	if err != nil {
		return err
	}
	shown := registry.Redact(s.state)
	reg, err := registry.Open(ctx, s.state, &registry.Options{FinalsBytes: -1})
	if err != nil {
		return fmt.Errorf("--state %s: %v", shown, err)
	}
	defer reg.Close()

	before := time.Now().Add(-s.olderThan)
	age := fmt.Sprintf("older than %s (created and last updated before %s)", s.olderThan, before.UTC().Format(time.RFC3339))
	if s.dryRun {
		counts, err := reg.Count(ctx, before)
		if err != nil {
			return fmt.Errorf("--state %s: %v", shown, err)
		}
		if s.backup != "" {
			fmt.Fprintf(stdout, "dry run: would back the registry up to %s first\n", s.backup)
		}
		_, err = fmt.Fprintf(stdout, "dry run: would prune %d final calls %s; %d calls would be kept (%d not final)\n",
			counts.Prunable, age, counts.Calls-counts.Prunable, counts.NotFinal)
		return err
	}
	if s.backup != "" {
		if err := backUpForPrune(ctx, reg, s.backup, before, stdout); err != nil {
			return err
		}
	}
	deleted, err := reg.Prune(ctx, before, pruneBatch)
	if err != nil {
		return fmt.Errorf("--state %s: pruned %d final calls %s, then stopped: %v", shown, deleted, age, err)
	}
	after, err := reg.Count(ctx, before)
	if err != nil {
		return fmt.Errorf("--state %s: pruned %d final calls %s, then: %v", shown, deleted, age, err)
	}
	_, err = fmt.Fprintf(stdout, "pruned %d final calls %s; %d calls kept (%d not final)\n", deleted, age, after.Calls, after.NotFinal)
	return err
}

// parsePrune reads and checks prune's settings; nothing is opened yet.
func parsePrune(args []string, getenv func(string) string, stderr io.Writer) (pruneSettings, error) {
	getenv, err := stateSecret(getenv)
	if err != nil {
		return pruneSettings{}, err
	}
	fs := command.NewFlagSet("hubu-unified-mcp prune", getenv, stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, pruneUsage); fs.PrintDefaults() }
	state := stateFlag(fs)
	var s pruneSettings
	fs.DurationVar(&s.olderThan, "older-than", 0, "delete final calls created and last updated longer ago than this; at least 24h")
	fs.StringVar(&s.backup, "backup", "", "a registry file: back it up to this new file first")
	fs.BoolVar(&s.backupTaken, "backup-taken", false, "a Postgres registry: its database was just backed up (pg_dump, or point-in-time recovery)")
	fs.BoolVar(&s.dryRun, "dry-run", false, "print what would be deleted; change nothing")
	if err := fs.ParseNoArgs(args); err != nil {
		return s, err
	}
	switch {
	case s.olderThan == 0:
		return s, fmt.Errorf("prune needs --older-than, at least %s", minPruneAge)
	case s.olderThan < minPruneAge:
		return s, fmt.Errorf("--older-than %s is below the floor of %s: harnesses redeliver calls within a session, and a pruned call delivered again is charged again", s.olderThan, minPruneAge)
	}
	if s.state, err = statePath(*state, getenv); err != nil {
		return s, err
	}
	if registry.IsPostgres(s.state) {
		return s, checkPostgresPrune(s)
	}
	return s, checkFilePrune(s)
}

func checkPostgresPrune(s pruneSettings) error {
	switch {
	case s.backup != "":
		return errors.New("--backup is for a registry file: back a Postgres registry up with pg_dump or point-in-time recovery, then pass --backup-taken")
	case !s.backupTaken && !s.dryRun:
		return errors.New("a Postgres registry is pruned only after a backup: take one (pg_dump, or check that point-in-time recovery covers now), then pass --backup-taken")
	}
	return nil
}

func checkFilePrune(s pruneSettings) error {
	switch {
	case s.backupTaken:
		return errors.New("--backup-taken is for a Postgres registry: prune backs a registry file up itself, to --backup FILE")
	case s.backup == "" && !s.dryRun:
		return errors.New("pruning a registry file needs --backup FILE, a new file that prune backs the registry up to first")
	}
	// prune never makes a registry: one that does not exist has nothing to prune, and the
	// path is more likely mistyped.
	if _, err := os.Stat(s.state); err != nil {
		return fmt.Errorf("--state %s: %v", s.state, err)
	}
	if s.backup == "" {
		return nil
	}
	if _, err := os.Stat(s.backup); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--backup %s: give a file that does not exist yet (%v)", s.backup, existsOr(err))
	}
	return nil
}

// existsOr says why a path that should not exist may not be used.
func existsOr(err error) error {
	if err == nil {
		return os.ErrExist
	}
	return err
}

// backUpForPrune backs the registry file up to path and checks that the backup holds every call
// the prune is to delete, counted after the backup: those calls are final and old, so none is
// added meanwhile.
func backUpForPrune(ctx context.Context, reg *registry.Registry, path string, before time.Time, stdout io.Writer) error {
	backup, err := reg.Backup(ctx, path, before)
	if err != nil {
		return fmt.Errorf("--backup %s: %v; nothing was pruned", path, err)
	}
	live, err := reg.Count(ctx, before)
	if err != nil {
		return fmt.Errorf("count the calls: %v; nothing was pruned", err)
	}
	if backup.Prunable < live.Prunable {
		return fmt.Errorf("--backup %s holds %d of the %d calls to prune; nothing was pruned", path, backup.Prunable, live.Prunable)
	}
	_, err = fmt.Fprintf(stdout, "backed up %d calls to %s (opened and checked)\n", backup.Calls, path)
	return err
}
