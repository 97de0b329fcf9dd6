package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"hubu.dev/hubu/services/gongbu"
	"hubu.dev/hubu/services/gongbu/gongbutest"
	"hubu.dev/hubu/services/gongbu/postgres"
	"hubu.dev/hubu/services/gongbu/vendorkey"
	gongbusql "hubu.dev/hubu/sql/gongbu"
	"hubu.dev/hubu/sql/sqltest"
)

// `gongbu resolve` records an operator's verdict on an indeterminate execution; the running
// Gongbu reports it to Hubu. Bad input is one clear line, and nothing but an indeterminate
// execution is ever changed.
func TestResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dbURL := sqltest.NewPool(t, "gongbu", gongbusql.Migrations())
	store := postgres.NewStore(pool)
	now := time.Now()
	record := func(state gongbu.State) gongbu.Decision {
		t.Helper()
		d := gongbutest.NewDecision()
		x, _, _, err := store.Insert(ctx, d, vendorkey.For("bfl", d.DecisionID), now, now)
		if err != nil {
			t.Fatal(err)
		}
		if state == gongbu.StateIndeterminate {
			msg := "the provider call failed and the provider does not honour idempotency keys"
			if _, err := store.Finish(ctx, x, gongbu.Indeterminate(msg), now); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	charged, free, submitting := record(gongbu.StateIndeterminate), record(gongbu.StateIndeterminate), record(gongbu.StateSubmitting)
	lost := record(gongbu.StateIndeterminate)
	env := []string{"GONGBU_DATABASE_URL=" + dbURL}
	id := charged.DecisionID.String()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no decision", []string{"--not-charged"}, "--decision must be a decision id (a UUID)"},
		{"a decision that is no UUID", []string{"--decision", "fox", "--not-charged"}, "--decision must be a decision id (a UUID)"},
		{"no verdict", []string{"--decision", id}, "give exactly one of --charged-micros N, --not-charged and --job-id JOB"},
		{"two verdicts", []string{"--decision", id, "--not-charged", "--charged-micros", "25000"}, "give exactly one of --charged-micros N, --not-charged and --job-id JOB"},
		{"a zero charge", []string{"--decision", id, "--charged-micros", "0"}, "--charged-micros must be more than 0; use --not-charged"},
		{"a negative charge", []string{"--decision", id, "--charged-micros", "-5"}, "--charged-micros must be more than 0"},
		{"a charge that is no number", []string{"--decision", id, "--charged-micros", "lots"}, "-charged-micros"},
		{"a charge above the authorized amount", []string{"--decision", id, "--charged-micros", "25001"}, "between 0 and the decision's authorized 25000 micros"},
		{"an unknown decision", []string{"--decision", uuid.NewString(), "--not-charged"}, "no execution for decision"},
		{"an execution that is not indeterminate", []string{"--decision", submitting.DecisionID.String(), "--not-charged"}, "is submitting, not indeterminate"},
		{"a stray argument", []string{"--decision", id, "--not-charged", "now"}, `unexpected argument "now"`},
		{"a job and a charge", []string{"--decision", id, "--job-id", "j", "--charged-micros", "25000"}, "give exactly one of"},
		{"an empty job", []string{"--decision", id, "--job-id", " "}, "--job-id must not be empty"},
		{"a polling URL without a job", []string{"--decision", id, "--not-charged", "--polling-url", "https://api.eu2.bfl.ai/v1/get_result?id=j"}, "go with --job-id"},
		{"a polling URL that is none", []string{"--decision", id, "--job-id", "j", "--polling-url", "api.eu2.bfl.ai"}, "polling-url"},
		{"a job for an execution that is not indeterminate", []string{"--decision", submitting.DecisionID.String(), "--job-id", "j"}, "is submitting, not indeterminate"},
	} {
		_, _, err := runGongbu(t, env, append([]string{"resolve"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: err = %v, want one line saying %q", c.name, err, c.want)
		}
	}
	for _, d := range []gongbu.Decision{charged, free, submitting, lost} {
		x, err := store.Get(ctx, d.DecisionID)
		if err != nil || x.ResolvedAt != nil || (x.State != gongbu.StateIndeterminate && x.State != gongbu.StateSubmitting) {
			t.Fatalf("a refused resolve changed %s: %+v %v", d.DecisionID, x, err)
		}
	}

	out, _, err := runGongbu(t, env, "resolve", "--decision", id, "--charged-micros", "25000")
	if err != nil || !strings.Contains(out, "resolved: succeeded, the provider charged 25000 micros") {
		t.Fatalf("resolve charged: %q %v", out, err)
	}
	x, err := store.Get(ctx, charged.DecisionID)
	if err != nil || x.State != gongbu.StateSucceeded || x.ChargedMicros == nil || *x.ChargedMicros != 25_000 || x.Reported || x.ResolvedAt == nil ||
		x.Error == nil || !strings.Contains(*x.Error, "resolved by an operator") || !strings.Contains(*x.Error, "does not honour") {
		t.Fatalf("after resolve: %+v %v", x, err)
	}
	if _, _, err := runGongbu(t, env, "resolve", "--decision", id, "--not-charged"); err == nil || !strings.Contains(err.Error(), "is succeeded, not indeterminate") {
		t.Fatalf("resolving twice: %v", err)
	}

	// The flag wins over the environment, as everywhere.
	out, _, err = runGongbu(t, []string{"GONGBU_DATABASE_URL=postgres://nobody@127.0.0.1:1/x"}, "resolve", "--database-url", dbURL,
		"--decision", free.DecisionID.String(), "--not-charged")
	if err != nil || !strings.Contains(out, "resolved: failed, nothing charged") {
		t.Fatalf("resolve not charged: %q %v", out, err)
	}
	x, err = store.Get(ctx, free.DecisionID)
	if err != nil || x.State != gongbu.StateFailed || x.ChargedMicros == nil || *x.ChargedMicros != 0 || x.Reported || x.ResolvedAt == nil {
		t.Fatalf("after resolve: %+v %v", x, err)
	}

	// The provider took the job but its record failed: the operator gives it the job from the
	// log line, and the execution is submitted again, polled at once by a running Gongbu.
	const pollingURL = "https://api.eu2.bfl.ai/v1/get_result?id=job-7"
	out, _, err = runGongbu(t, env, "resolve", "--decision", lost.DecisionID.String(), "--job-id", "job-7", "--polling-url", pollingURL)
	if err != nil || !strings.Contains(out, "resolved: submitted as job job-7") {
		t.Fatalf("resolve with a job: %q %v", out, err)
	}
	x, err = store.Get(ctx, lost.DecisionID)
	if err != nil || x.State != gongbu.StateSubmitted || x.ProviderJobID == nil || *x.ProviderJobID != "job-7" || x.PollingURL == nil ||
		*x.PollingURL != pollingURL || x.Error != nil || x.PollDeadline == nil || x.ResolvedAt == nil {
		t.Fatalf("after resolve with a job: %+v %v", x, err)
	}
	if open, err := store.ListClaimable(ctx, time.Now(), 10); err != nil || len(open) != 2 {
		t.Fatalf("claimable after resolve with a job: %+v %v; want it beside the one still submitting", open, err)
	}
	if _, _, err := runGongbu(t, env, "resolve", "--decision", lost.DecisionID.String(), "--job-id", "job-8"); err == nil ||
		!strings.Contains(err.Error(), "is submitted, not indeterminate") {
		t.Fatalf("resolving with a job twice: %v", err)
	}
	other := record(gongbu.StateIndeterminate)
	if _, _, err := runGongbu(t, env, "resolve", "--decision", other.DecisionID.String(), "--job-id", "job-7"); err == nil ||
		!strings.Contains(err.Error(), "is the job of decision "+lost.DecisionID.String()) {
		t.Fatalf("a job that is another execution's: %v", err)
	}

	unreported, err := store.ListUnreported(ctx, 10)
	if err != nil || len(unreported) != 2 {
		t.Fatalf("unreported after resolving: %d %v; a running Gongbu reports both", len(unreported), err)
	}
}

// `gongbu renew-epoch`, run after a restore from a backup, starts a new epoch of the database.
func TestRenewEpoch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dbURL := sqltest.NewPool(t, "gongbu", gongbusql.Migrations())
	store := postgres.NewStore(pool)
	before, err := store.Epoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := runGongbu(t, []string{"GONGBU_DATABASE_URL=" + dbURL}, "renew-epoch")
	if err != nil {
		t.Fatal(err)
	}
	after, err := store.Epoch(ctx)
	if err != nil || after.ID == before.ID || !after.BeganAt.After(before.BeganAt) {
		t.Fatalf("epoch %+v after %+v: %v", after, before, err)
	}
	if !strings.Contains(out, after.ID.String()) || !strings.Contains(out, "possibly submitted") {
		t.Fatalf("output %q", out)
	}
	if _, _, err := runGongbu(t, nil, "renew-epoch"); err == nil || !strings.Contains(err.Error(), "database") {
		t.Fatalf("without a database URL: %v", err)
	}
	if _, _, err := runGongbu(t, []string{"GONGBU_DATABASE_URL=" + dbURL}, "renew-epoch", "extra"); err == nil {
		t.Fatal("an extra argument was accepted")
	}
}
