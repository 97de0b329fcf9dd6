package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/postgres"
	"hubu.dev/hubu/services/gongbu/vendorkey"
	gongbusql "hubu.dev/hubu/sql/gongbu"
	"hubu.dev/hubu/sql/sqltest"
)

func newStore(t *testing.T) *postgres.Store {
	t.Helper()
	pool, _ := sqltest.NewPool(t, "gongbu", gongbusql.Migrations())
	return postgres.NewStore(pool)
}

// Concurrent inserts of one decision: one creates it, every other gets it back, and none
// fails. ON CONFLICT (decision_id) alone does not cover a race that trips over the other
// unique columns (public handle, vendor key) first.
func TestConcurrentInsertsOfOneDecision(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for round := range 30 {
		d := gongbutest.NewDecision()
		const n = 20
		created := make([]bool, n)
		errs := make([]error, n)
		gongbutest.AtOnce(n, func(i int) {
			x, _, c, err := store.Insert(context.Background(), d, vendorkey.For("bfl", d.DecisionID), now.Add(time.Minute), now)
			if err == nil && x.DecisionID != d.DecisionID {
				t.Errorf("got execution %s", x.DecisionID)
			}
			created[i], errs[i] = c, err
		})
		nc := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d: insert %d: %v", round, i, errs[i])
			}
			if created[i] {
				nc++
			}
		}
		if nc != 1 {
			t.Fatalf("round %d: %d inserts created the row", round, nc)
		}
	}
}

func TestInsertAnotherDecisionForOneHandle(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	now := time.Now()
	d := gongbutest.NewDecision()
	if _, _, created, err := store.Insert(context.Background(), d, vendorkey.For("bfl", d.DecisionID), now, now); err != nil || !created {
		t.Fatalf("created=%v err=%v", created, err)
	}
	other := gongbutest.NewDecision()
	other.PublicHandle = d.PublicHandle
	_, _, created, err := store.Insert(context.Background(), other, vendorkey.For("bfl", other.DecisionID), now, now)
	if created || gongbu.ErrorCode(err) != gongbu.CodeDecisionMismatch {
		t.Fatalf("created=%v err=%v, want decision_mismatch", created, err)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	d := gongbutest.NewDecision()
	f := "jpeg"
	d.Arguments.OutputFormat = &f
	x, _, _, err := store.Insert(ctx, d, "k", now.Add(time.Minute), now)
	if err != nil {
		t.Fatal(err)
	}
	if !x.Decision.SameWork(d) || x.State != gongbu.StateSubmitting || x.VendorKey != "k" || !x.CreatedAt.Equal(now) {
		t.Fatalf("%+v", x)
	}
	if _, err := store.Get(ctx, gongbutest.NewDecision().DecisionID); gongbu.ErrorCode(err) != gongbu.CodeNotFound {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := store.GetByHandle(ctx, "hubu:public-operation:v1:nope"); gongbu.ErrorCode(err) != gongbu.CodeNotFound {
		t.Fatalf("get unknown handle: %v", err)
	}
	if got, err := store.GetByHandle(ctx, d.PublicHandle); err != nil || got.DecisionID != d.DecisionID {
		t.Fatalf("by handle: %v %v", got.DecisionID, err)
	}

	// Not claimable while the lease holds; claimable once it ran out, by one claimer only.
	if open, err := store.ListClaimable(ctx, now, 10); err != nil || len(open) != 0 {
		t.Fatalf("claimable under the lease: %v %v", open, err)
	}
	later := now.Add(time.Minute)
	open, err := store.ListClaimable(ctx, later, 10)
	if err != nil || len(open) != 1 || open[0].State != gongbu.StateSubmitting {
		t.Fatalf("claimable: %v %v", open, err)
	}
	if _, ok, err := store.Claim(ctx, d.DecisionID, gongbu.StateSubmitted, later.Add(time.Minute), later); ok || err != nil {
		t.Fatalf("claimed in the wrong state: %v %v", ok, err)
	}
	c, ok, err := store.Claim(ctx, d.DecisionID, gongbu.StateSubmitting, later.Add(time.Minute), later)
	if !ok || err != nil || c.Attempts != 1 || c.LeaseGeneration != x.LeaseGeneration+1 {
		t.Fatalf("claim: %v %v %+v", ok, err, c)
	}
	if _, ok, err := store.Claim(ctx, d.DecisionID, gongbu.StateSubmitting, later.Add(time.Minute), later); ok || err != nil {
		t.Fatalf("claimed twice: %v %v", ok, err)
	}

	s, err := store.MarkSubmitted(ctx, c, gongbu.Job{ID: "job-1", PollingURL: "u"}, later.Add(time.Hour), later, later)
	if err != nil || s.State != gongbu.StateSubmitted || *s.ProviderJobID != "job-1" || *s.PollingURL != "u" || !s.PollDeadline.Equal(later.Add(time.Hour)) {
		t.Fatalf("mark submitted: %v %+v", err, s)
	}
	fin, err := store.Finish(ctx, s, gongbu.Succeeded("https://x/s.png", 25_000), later)
	if err != nil || fin.State != gongbu.StateSucceeded || *fin.ResultURL != "https://x/s.png" || *fin.ChargedMicros != 25_000 || fin.Reported {
		t.Fatalf("finish: %v %+v", err, fin)
	}
	// A final execution stays final.
	if _, err := store.Finish(ctx, s, gongbu.Indeterminate("late"), later); !errors.Is(err, gongbu.ErrLeaseLost) {
		t.Fatalf("finish twice: %v", err)
	}
	if again, err := store.Get(ctx, d.DecisionID); err != nil || again.State != gongbu.StateSucceeded {
		t.Fatalf("after a second finish: %v %+v", err, again)
	}
	if open, err := store.ListClaimable(ctx, later.Add(time.Hour), 10); err != nil || len(open) != 0 {
		t.Fatalf("a final execution is claimable: %v %v", open, err)
	}
	un, err := store.ListUnreported(ctx, 10)
	if err != nil || len(un) != 1 {
		t.Fatalf("unreported: %v %v", un, err)
	}
	if err := store.MarkReported(ctx, d.DecisionID, later); err != nil {
		t.Fatal(err)
	}
	if un, err := store.ListUnreported(ctx, 10); err != nil || len(un) != 0 {
		t.Fatalf("unreported after the report: %v %v", un, err)
	}
	all, err := store.List(ctx)
	if err != nil || len(all) != 1 || !all[0].Reported {
		t.Fatalf("list: %v %+v", err, all)
	}
}

// Every write of an execution's outcome is fenced by the lease it was read under: once another
// worker claimed the execution, the first one can neither record a job, nor extend its lease,
// nor finish it, and what the second one wrote stands.
func TestWritesAreFencedByTheLease(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	d := gongbutest.NewDecision()
	first, _, _, err := store.Insert(ctx, d, "k", now.Add(time.Minute), now)
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(2 * time.Minute) // the first worker's lease ran out
	second, ok, err := store.Claim(ctx, d.DecisionID, gongbu.StateSubmitting, later.Add(time.Minute), later)
	if !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	job := gongbu.Job{ID: "job-1", PollingURL: "u"}
	if _, err := store.MarkSubmitted(ctx, first, job, later.Add(time.Hour), later, later); !errors.Is(err, gongbu.ErrLeaseLost) {
		t.Fatalf("mark submitted by the first worker: %v", err)
	}
	if err := store.ExtendLease(ctx, first, later.Add(time.Hour), later); !errors.Is(err, gongbu.ErrLeaseLost) {
		t.Fatalf("extend by the first worker: %v", err)
	}
	if _, err := store.Finish(ctx, first, gongbu.Failed("a late refusal", 0), later); !errors.Is(err, gongbu.ErrLeaseLost) {
		t.Fatalf("finish by the first worker: %v", err)
	}
	sub, err := store.MarkSubmitted(ctx, second, job, later.Add(time.Hour), later, later)
	if err != nil {
		t.Fatalf("mark submitted by the second worker: %v", err)
	}
	if err := store.ExtendLease(ctx, sub, later.Add(time.Hour), later); err != nil {
		t.Fatalf("extend by the second worker: %v", err)
	}
	if _, err := store.Finish(ctx, first, gongbu.Failed("a late refusal", 0), later); !errors.Is(err, gongbu.ErrLeaseLost) {
		t.Fatalf("finish by the first worker after the second recorded the job: %v", err)
	}
	fin, err := store.Finish(ctx, sub, gongbu.Succeeded("https://x/s.png", 25_000), later)
	if err != nil || fin.State != gongbu.StateSucceeded {
		t.Fatalf("finish by the second worker: %v %+v", err, fin)
	}
}

// The insert reads the database's epoch in the same statement: the epoch comes back with
// the new row (the one a restore's renewal made, once made), none with a row recorded
// before, and a database that lost its epoch row records nothing.
func TestInsertReadsTheEpoch(t *testing.T) {
	t.Parallel()
	pool, _ := sqltest.NewPool(t, "gongbu", gongbusql.Migrations())
	store := postgres.NewStore(pool)
	ctx := context.Background()
	now := time.Now()
	insert := func(d gongbu.Decision) (gongbu.Epoch, bool, error) {
		_, epoch, created, err := store.Insert(ctx, d, vendorkey.For("bfl", d.DecisionID), now, now)
		return epoch, created, err
	}

	first, err := store.Epoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := gongbutest.NewDecision()
	if epoch, created, err := insert(d); err != nil || !created || epoch != first {
		t.Fatalf("new row: epoch %+v created=%v err=%v, want %+v", epoch, created, err, first)
	}
	if epoch, created, err := insert(d); err != nil || created || epoch != (gongbu.Epoch{}) {
		t.Fatalf("recorded before: epoch %+v created=%v err=%v", epoch, created, err)
	}
	renewed, err := store.RenewEpoch(ctx)
	if err != nil || renewed == first {
		t.Fatalf("renew: %+v %v", renewed, err)
	}
	if epoch, created, err := insert(gongbutest.NewDecision()); err != nil || !created || epoch != renewed {
		t.Fatalf("after the renewal: epoch %+v created=%v err=%v, want %+v", epoch, created, err, renewed)
	}

	if _, err := pool.Exec(ctx, "DELETE FROM database_epoch"); err != nil {
		t.Fatal(err)
	}
	lost := gongbutest.NewDecision()
	if _, created, err := insert(lost); err == nil || created || !strings.Contains(err.Error(), "no epoch") {
		t.Fatalf("no epoch row: created=%v err=%v", created, err)
	}
	if _, err := store.Get(ctx, lost.DecisionID); gongbu.ErrorCode(err) != gongbu.CodeNotFound {
		t.Fatalf("no epoch row, yet the decision was recorded: %v", err)
	}
}
