package registry

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Pruning deletes old rows, and a deleted row is a call the registry no longer recognises: if
// it is ever delivered again it gets a new operation key, and Hubu charges it again. So only a
// final call (its answer recorded, its outcome fixed) is ever deleted, and only one created and
// last updated before a time the operator chose. A call without a result (in flight, held for
// approval, crashed) is kept however old it is: its redelivery must continue it.

// Counts are a registry's calls as pruning sees them.
type Counts struct {
	Calls    int // every call recorded
	NotFinal int // calls without a final result: never pruned
	Prunable int // final calls created and last updated before the time counted for
}

// Count counts the calls of the registry's installation, and the final ones that Prune(before)
// would delete.
func (r *Registry) Count(ctx context.Context, before time.Time) (Counts, error) {
	c, err := r.store.count(ctx, before)
	if err != nil {
		return Counts{}, fmt.Errorf("count the calls: %w", err)
	}
	return c, nil
}

// Prune deletes the final calls created and last updated before before, at most batch of them
// in each transaction, and returns how many it deleted (those of the batches committed, also
// when it fails or ctx ends). Routers may go on using the registry meanwhile: a batch is a short
// transaction, and after each Prune waits as long as the batch took (up to maxPrunePause), so
// that the routers waiting for the SQLite file's write lock (which they retry on a timer) get
// it about half the time. New calls and new results are written after before, so they are
// never deleted.
//
// A router that keeps a pruned call's final answer in memory (finals) forgets it within
// finalsMaxAge of caching it, an hour, and a row is pruned a day after its call at the soonest.
func (r *Registry) Prune(ctx context.Context, before time.Time, batch int) (int, error) {
	if batch <= 0 {
		return 0, errors.New("prune: the batch must be at least one call")
	}
	deleted := 0
	for {
		start := time.Now() // the real clock: this measures how long the database was held
		n, err := r.store.prune(ctx, before, batch)
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("prune: %w", err)
		}
		if n < batch {
			return deleted, nil
		}
		if err := pause(ctx, min(time.Since(start), maxPrunePause)); err != nil {
			return deleted, fmt.Errorf("prune: %w", err)
		}
	}
}

// maxPrunePause bounds Prune's wait between batches: a batch that took long was mostly waiting
// for the lock itself, not holding it.
const maxPrunePause = time.Second

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrBackupPostgres is Backup's answer for a Postgres registry: the router cannot back up a
// database server; its operator does (pg_dump, or point-in-time recovery).
var ErrBackupPostgres = errors.New("a Postgres registry is backed up with the database's own tools (pg_dump, or point-in-time recovery), not by the router")

// Backup writes a consistent copy of a registry file to path, which must not exist yet, with
// 0600 permissions (it holds private operation keys), makes it durable, and checks it: it
// opens the copy read-only, checks its pages and indexes (integrity_check), compares its
// installation id, and returns its calls counted as Count(before) counts them. Routers may go
// on using the registry meanwhile. A copy that fails a step is removed. Of a Postgres registry
// it returns ErrBackupPostgres.
func (r *Registry) Backup(ctx context.Context, path string, before time.Time) (Counts, error) {
	s, ok := r.store.(*sqliteStore)
	if !ok {
		return Counts{}, ErrBackupPostgres
	}
	return s.backup(ctx, path, before)
}
