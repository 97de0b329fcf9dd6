package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testClock is a registry's clock that a test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

var pruneEpoch = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// pruneCall is the i-th call of a prune test, under a name that says what it is.
func pruneCall(name string, i int) Call {
	return Call{Platform: "codex", CallID: fmt.Sprintf("call_prune_%s_%08d", name, i), Tool: "generate_image", RequestHash: "h"}
}

// record resolves c as new at created and, unless finished is zero, records its result then.
func record(t *testing.T, r *Registry, clock *testClock, c Call, created, finished time.Time) Entry {
	t.Helper()
	ctx := context.Background()
	clock.Set(created)
	e, out, err := r.Resolve(ctx, c)
	if err != nil || out != New {
		t.Fatalf("%s: %v %v", c.CallID, out, err)
	}
	if !finished.IsZero() {
		clock.Set(finished)
		if _, err := r.Finish(ctx, c, []byte(`{"final":"`+c.CallID+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// Prune deletes the final calls created and last updated before the cutoff, in batches of at
// most the size asked, and nothing else: a call without a result is kept however old, and so
// are a final call created or finished after the cutoff. A router then still resolves every
// kept call from the database as before; a pruned call is new again (what pruning costs).
func TestPrune(t *testing.T) {
	t.Parallel()
	onBothBackends(t, testPrune)
}

func testPrune(t *testing.T, newState func() string) {
	ctx := context.Background()
	state := newState()
	clock := &testClock{now: pruneEpoch}
	r := open(t, state, &Options{Now: clock.Now})
	cutoff := pruneEpoch.Add(48 * time.Hour)

	const oldFinals = 6
	var pruned []Entry
	for i := range oldFinals {
		pruned = append(pruned, record(t, r, clock, pruneCall("oldFinal", i), pruneEpoch, pruneEpoch.Add(time.Hour)))
	}
	type keptCall struct {
		entry Entry
		want  Resolution // of a redelivery after pruning
	}
	kept := map[Call]keptCall{}
	for i, created := range []time.Time{pruneEpoch, pruneEpoch.Add(-30 * 24 * time.Hour)} { // never finished
		c := pruneCall("open", i)
		kept[c] = keptCall{record(t, r, clock, c, created, time.Time{}), Continue}
	}
	lateFinal := pruneCall("lateFinal", 0) // created long ago, finished after the cutoff
	kept[lateFinal] = keptCall{record(t, r, clock, lateFinal, pruneEpoch, cutoff.Add(time.Hour)), Replay}
	recent := pruneCall("recent", 0)
	kept[recent] = keptCall{record(t, r, clock, recent, cutoff.Add(time.Hour), cutoff.Add(2*time.Hour)), Replay}
	atCutoff := pruneCall("atCutoff", 0) // not before the cutoff
	kept[atCutoff] = keptCall{record(t, r, clock, atCutoff, cutoff, cutoff), Replay}

	want := Counts{Calls: oldFinals + len(kept), NotFinal: 2, Prunable: oldFinals}
	if got, err := r.Count(ctx, cutoff); err != nil || got != want {
		t.Fatalf("before pruning: %+v %v, want %+v", got, err, want)
	}
	// One batch deletes no more than it may.
	if n, err := r.store.prune(ctx, cutoff, 4); err != nil || n != 4 {
		t.Fatalf("a batch of 4: deleted %d, %v", n, err)
	}
	// Prune goes on batch after batch until none is left: here two full batches, and a third
	// that finds nothing.
	if n, err := r.Prune(ctx, cutoff, 1); err != nil || n != oldFinals-4 {
		t.Fatalf("prune in batches of 1: deleted %d, %v; want %d", n, err, oldFinals-4)
	}
	if n, err := r.Prune(ctx, cutoff, 1000); err != nil || n != 0 {
		t.Fatalf("prune again: deleted %d, %v", n, err)
	}
	want = Counts{Calls: len(kept), NotFinal: 2, Prunable: 0}
	if got, err := r.Count(ctx, cutoff); err != nil || got != want {
		t.Fatalf("after pruning: %+v %v, want %+v", got, err, want)
	}
	if _, err := r.Prune(ctx, cutoff, 0); err == nil {
		t.Fatal("a batch of 0 was accepted")
	}

	// Another router, which keeps nothing in memory, resolves the kept calls from their rows.
	router := open(t, state, &Options{FinalsBytes: -1})
	for c, k := range kept {
		got, out, err := router.Resolve(ctx, c)
		if err != nil || out != k.want || got.OperationKey != k.entry.OperationKey {
			t.Errorf("%s after pruning: %v %v, same key %v; want %v", c.CallID, out, err, got.OperationKey == k.entry.OperationKey, k.want)
		}
		if k.want == Replay && string(got.Result) != `{"final":"`+c.CallID+`"}` {
			t.Errorf("%s after pruning replays %s", c.CallID, got.Result)
		}
	}
	if _, found, err := router.OperationKeyFor(ctx, "", pruned[0].PublicHandle); err != nil || found {
		t.Fatalf("a pruned call's handle: found %v, %v", found, err)
	}
	again, out, err := router.Resolve(ctx, pruneCall("oldFinal", 0))
	if err != nil || out != New || again.OperationKey == pruned[0].OperationKey {
		t.Fatalf("a pruned call delivered again: %v %v (new key %v)", out, err, again.OperationKey != pruned[0].OperationKey)
	}
}

// Pruning while routers record new calls and results on the same registry (for SQLite,
// another connection pool, as another process has): the routers see no error, and every call
// they recorded is kept.
func TestPruneWhileRoutersRun(t *testing.T) {
	t.Parallel()
	onBothBackends(t, func(t *testing.T, newState func() string) {
		ctx := context.Background()
		state := newState()
		clock := &testClock{now: pruneEpoch}
		old := open(t, state, &Options{Now: clock.Now})
		const oldFinals = 120
		for i := range oldFinals {
			record(t, old, clock, pruneCall("old", i), pruneEpoch, pruneEpoch)
		}
		router := open(t, state, nil) // today's clock
		pruner := open(t, state, nil)

		const routerCalls = 60
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := range routerCalls {
				c := pruneCall("live", i)
				if _, _, err := router.Resolve(ctx, c); err != nil {
					t.Errorf("a router's call during pruning: %v", err)
					return
				}
				if i%2 == 0 {
					if _, err := router.Finish(ctx, c, []byte(`{}`)); err != nil {
						t.Errorf("a router's result during pruning: %v", err)
						return
					}
				}
			}
		})
		n, err := pruner.Prune(ctx, pruneEpoch.Add(time.Hour), 5)
		wg.Wait()
		if err != nil || n != oldFinals {
			t.Fatalf("pruned %d, %v; want %d", n, err, oldFinals)
		}
		want := Counts{Calls: routerCalls, NotFinal: routerCalls / 2}
		if got, err := pruner.Count(ctx, pruneEpoch.Add(time.Hour)); err != nil || got != want {
			t.Fatalf("after pruning: %+v %v, want %+v", got, err, want)
		}
	})
}

// A backup of a registry file is a consistent, private copy with the same installation and
// calls, checked and counted; an existing file is never overwritten; a backup that fails is
// removed. A Postgres registry is not backed up by the router.
func TestBackup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "router.db")
	clock := &testClock{now: pruneEpoch}
	r := open(t, state, &Options{Now: clock.Now})
	finished := record(t, r, clock, pruneCall("backup", 0), pruneEpoch, pruneEpoch)
	unfinished := record(t, r, clock, pruneCall("backup", 1), pruneEpoch, time.Time{})
	cutoff := pruneEpoch.Add(time.Hour)

	path := filepath.Join(dir, "router-backup.db")
	counts, err := r.Backup(ctx, path, cutoff)
	if want := (Counts{Calls: 2, NotFinal: 1, Prunable: 1}); err != nil || counts != want {
		t.Fatalf("backup: %+v %v, want %+v", counts, err, want)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v %v", st.Mode(), err)
	}
	before, _ := os.ReadFile(path)
	if _, err := r.Backup(ctx, path, cutoff); err == nil {
		t.Fatal("a backup overwrote an existing file")
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("a refused backup changed the existing file")
	}

	// Restored, the backup is the registry as it was: pruning the original changes nothing in it.
	if n, err := r.Prune(ctx, cutoff, 10); err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
	restored := open(t, path, &Options{FinalsBytes: -1})
	if restored.InstallationID() != r.InstallationID() {
		t.Fatal("the backup has another installation id")
	}
	if e, out, err := restored.Resolve(ctx, pruneCall("backup", 0)); err != nil || out != Replay || e.OperationKey != finished.OperationKey {
		t.Fatalf("the pruned call in the backup: %v %v", out, err)
	}
	if e, out, err := restored.Resolve(ctx, pruneCall("backup", 1)); err != nil || out != Continue || e.OperationKey != unfinished.OperationKey {
		t.Fatalf("the unfinished call in the backup: %v %v", out, err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	failed := filepath.Join(dir, "failed.db")
	if _, err := r.Backup(cancelled, failed, cutoff); err == nil {
		t.Fatal("a cancelled backup succeeded")
	}
	if _, err := os.Stat(failed); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed backup left its file: %v", err)
	}

	pg := open(t, backends[1].newState(t), nil)
	if _, err := pg.Backup(ctx, filepath.Join(dir, "pg.db"), cutoff); !errors.Is(err, ErrBackupPostgres) {
		t.Fatalf("backup of a Postgres registry: %v", err)
	}
}
