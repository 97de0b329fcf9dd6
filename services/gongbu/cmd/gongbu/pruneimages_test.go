package main

import (
	"context"
	"fmt"
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

// `gongbu prune-images` deletes only images fetched longer ago than --older-than (at least a
// day), with the executions' description of them, and touches nothing about money.
func TestPruneImages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dbURL := sqltest.NewPool(t, "gongbu", gongbusql.Migrations())
	store := postgres.NewStore(pool)
	now := time.Now()
	succeeded := func() gongbu.Decision {
		t.Helper()
		d := gongbutest.NewDecision()
		x, _, _, err := store.Insert(ctx, d, vendorkey.For("bfl", d.DecisionID), now, now)
		if err != nil {
			t.Fatal(err)
		}
		if x, err = store.MarkSubmitted(ctx, x, gongbu.Job{ID: "job-" + d.DecisionID.String()}, now.Add(time.Hour), now, now); err != nil {
			t.Fatal(err)
		}
		img, err := gongbu.NewImage("image/png", gongbutest.TinyPNG)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Finish(ctx, x, gongbu.Succeeded("https://provider.test/s.png", d.AmountMicros).WithImage(&img), now); err != nil {
			t.Fatal(err)
		}
		return d
	}
	old1, old2, fresh := succeeded(), succeeded(), succeeded()
	if _, err := pool.Exec(ctx, "UPDATE execution_images SET fetched_at = now() - interval '48 hours' WHERE decision_id = ANY($1)",
		[]string{old1.DecisionID.String(), old2.DecisionID.String()}); err != nil {
		t.Fatal(err)
	}
	env := []string{"GONGBU_DATABASE_URL=" + dbURL}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no age", nil, "--older-than must be at least 24h0m0s"},
		{"an age below the floor", []string{"--older-than", "1h"}, "--older-than must be at least 24h0m0s"},
	} {
		if _, _, err := runGongbu(t, env, append([]string{"prune-images"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	out, _, err := runGongbu(t, env, "prune-images", "--older-than", "24h", "--dry-run")
	want := fmt.Sprintf("would delete 2 images (%d bytes)", 2*len(gongbutest.TinyPNG)) + " fetched more than 24h0m0s ago\n"
	if err != nil || out != want {
		t.Fatalf("dry run: %q %v, want %q", out, err, want)
	}
	if out, _, err = runGongbu(t, env, "prune-images", "--older-than", "24h"); err != nil || out != "deleted 2 images fetched more than 24h0m0s ago\n" {
		t.Fatalf("prune: %q %v", out, err)
	}
	for _, d := range []gongbu.Decision{old1, old2, fresh} {
		x, err := store.Get(ctx, d.DecisionID)
		if err != nil {
			t.Fatal(err)
		}
		_, _, imgErr := store.ImageByHandle(ctx, d.PublicHandle)
		kept := d.DecisionID == fresh.DecisionID
		if (x.Image != nil) != kept || (imgErr == nil) != kept {
			t.Fatalf("%s: described %v, served err %v, want kept %v", d.DecisionID, x.Image, imgErr, kept)
		}
		if x.State != gongbu.StateSucceeded || x.ChargedMicros == nil || *x.ChargedMicros != d.AmountMicros || x.ResultURL == nil {
			t.Fatalf("pruning changed the execution: %+v", x)
		}
	}
	// A pruned image is not downloaded again, however recent its execution's last change.
	retry := postgres.ImageRetry{Since: now.Add(-time.Hour), MaxAttempts: 5, Backoff: 15 * time.Second}
	if missing, err := store.ListImagesMissing(ctx, retry, time.Now(), 10); err != nil || len(missing) != 0 {
		t.Fatalf("after the prune, images to download again: %v %v", missing, err)
	}
	if out, _, err = runGongbu(t, env, "prune-images", "--older-than", "24h"); err != nil || out != "deleted 0 images fetched more than 24h0m0s ago\n" {
		t.Fatalf("a second prune: %q %v", out, err)
	}
}
