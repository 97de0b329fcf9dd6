package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hubu.dev/hubu/router/registry"
	"hubu.dev/hubu/sql/sqltest"
)

// pruneFixture is a registry with three final calls from 40 days ago, one final call from an
// hour ago and one call from 40 days ago that never got a result, and what identifies them
// (none of which prune may print).
type pruneFixture struct {
	state   string
	old     []registry.Call
	entries []registry.Entry
	secrets []string // keys, handles and call ids
}

func newPruneFixture(t *testing.T, state string) *pruneFixture {
	t.Helper()
	ctx := context.Background()
	f := &pruneFixture{state: state}
	var now time.Time
	reg, err := registry.Open(ctx, state, &registry.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	add := func(name string, age time.Duration, final bool) registry.Call {
		c := registry.Call{Platform: "codex", CallID: "call_pruneCommand_" + name, Tool: "generate_image", RequestHash: "h"}
		now = time.Now().Add(-age)
		e, out, err := reg.Resolve(ctx, c)
		if err != nil || out != registry.New {
			t.Fatalf("%s: %v %v", name, out, err)
		}
		if final {
			if _, err := reg.Finish(ctx, c, []byte(`{"final":true}`)); err != nil {
				t.Fatal(err)
			}
		}
		f.entries = append(f.entries, e)
		f.secrets = append(f.secrets, c.CallID, e.OperationKey, e.PublicHandle)
		return c
	}
	for i := range 3 {
		f.old = append(f.old, add(fmt.Sprintf("old%02d", i), 40*24*time.Hour, true))
	}
	add("recent", time.Hour, true)
	add("unfinished", 40*24*time.Hour, false)
	return f
}

// counts are the registry's calls now, as a prune of calls older than 30 days counts them.
func (f *pruneFixture) counts(t *testing.T) registry.Counts {
	t.Helper()
	reg, err := registry.Open(context.Background(), f.state, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	c, err := reg.Count(context.Background(), time.Now().Add(-30*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runPrune runs the subcommand as main runs it, and fails the test if its output holds a key,
// a handle or a call id.
func (f *pruneFixture) runPrune(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := prune(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	if err != nil {
		out += err.Error()
	}
	for _, s := range f.secrets {
		if strings.Contains(out, s) {
			t.Fatalf("prune %v printed a key, handle or call id:\n%s", args, out)
		}
	}
	return stdout.String(), err
}

var fixtureCounts = registry.Counts{Calls: 5, NotFinal: 1, Prunable: 3}

func TestPruneFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := newPruneFixture(t, filepath.Join(dir, "state", "router.db"))
	existing := filepath.Join(dir, "existing.db")
	if err := os.WriteFile(existing, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "backup.db")

	// Refused, and nothing changed.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--state", f.state, "--backup", backup}, "needs --older-than"},
		{[]string{"--state", f.state, "--backup", backup, "--older-than", "0s"}, "needs --older-than"},
		{[]string{"--state", f.state, "--backup", backup, "--older-than", "23h"}, "below the floor of 24h0m0s"},
		{[]string{"--state", f.state, "--backup", backup, "--older-than", "-720h"}, "below the floor"},
		{[]string{"--state", f.state, "--older-than", "720h"}, "needs --backup FILE"},
		{[]string{"--state", f.state, "--older-than", "720h", "--backup-taken"}, "--backup-taken is for a Postgres registry"},
		{[]string{"--state", f.state, "--older-than", "720h", "--backup", existing}, "does not exist yet"},
		{[]string{"--state", filepath.Join(dir, "missing.db"), "--older-than", "720h", "--backup", backup}, "no such file"},
		{[]string{"--state", f.state, "--older-than", "720h", "--backup", backup, "extra"}, "unexpected argument"},
	} {
		if _, err := f.runPrune(t, nil, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	if got := f.counts(t); got != fixtureCounts {
		t.Fatalf("after the refusals: %+v, want %+v", got, fixtureCounts)
	}
	if data, _ := os.ReadFile(existing); string(data) != "keep me" {
		t.Fatal("a refused prune wrote over an existing file")
	}
	for _, p := range []string{backup, filepath.Join(dir, "missing.db")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused prune made %s: %v", p, err)
		}
	}

	// A dry run says what it would do, and does nothing.
	out, err := f.runPrune(t, nil, "--state", f.state, "--older-than", "720h", "--backup", backup, "--dry-run")
	if err != nil || !strings.Contains(out, "would prune 3 final calls older than 720h0m0s") || !strings.Contains(out, "2 calls would be kept (1 not final)") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if got := f.counts(t); got != fixtureCounts {
		t.Fatalf("after a dry run: %+v, want %+v", got, fixtureCounts)
	}
	if _, err := os.Stat(backup); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dry run made the backup: %v", err)
	}

	// The prune: a backup first, then the old final calls, and only them. The state falls back
	// to ROUTER_STATE, like the router's.
	out, err = f.runPrune(t, map[string]string{"ROUTER_STATE": f.state}, "--older-than", "720h", "--backup", backup)
	if err != nil || !strings.Contains(out, "backed up 5 calls to "+backup) ||
		!strings.Contains(out, "pruned 3 final calls older than 720h0m0s") || !strings.Contains(out, "2 calls kept (1 not final)") {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	if want := (registry.Counts{Calls: 2, NotFinal: 1}); f.counts(t) != want {
		t.Fatalf("after the prune: %+v, want %+v", f.counts(t), want)
	}
	if st, err := os.Stat(backup); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the backup: %v %v", st.Mode(), err)
	}
	// The backup is the registry before the prune: restored, it replays the pruned calls.
	restored, err := registry.Open(context.Background(), backup, &registry.Options{FinalsBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	for i, c := range f.old {
		if e, res, err := restored.Resolve(context.Background(), c); err != nil || res != registry.Replay || e.OperationKey != f.entries[i].OperationKey {
			t.Fatalf("a pruned call in the backup: %v %v", res, err)
		}
	}
	// A second prune needs a new backup file, and finds nothing more to delete.
	if _, err := f.runPrune(t, nil, "--state", f.state, "--older-than", "720h", "--backup", backup); err == nil {
		t.Fatal("a prune reused a backup file")
	}
	out, err = f.runPrune(t, nil, "--state", f.state, "--older-than", "720h", "--backup", filepath.Join(dir, "backup2.db"))
	if err != nil || !strings.Contains(out, "pruned 0 final calls") {
		t.Fatalf("second prune: %v\n%s", err, out)
	}
}

// A Postgres registry is pruned only on the operator's word that it was backed up: prune
// cannot back a database server up.
func TestPrunePostgres(t *testing.T) {
	t.Parallel()
	f := newPruneFixture(t, sqltest.NewEmptyDatabase(t, "router_prune"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--state", f.state, "--older-than", "720h"}, "pass --backup-taken"},
		{[]string{"--state", f.state, "--older-than", "720h", "--backup", filepath.Join(t.TempDir(), "b.db")}, "--backup is for a registry file"},
		{[]string{"--state", f.state, "--older-than", "1h", "--backup-taken"}, "below the floor"},
	} {
		if _, err := f.runPrune(t, nil, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	out, err := f.runPrune(t, nil, "--state", f.state, "--older-than", "720h", "--dry-run")
	if err != nil || !strings.Contains(out, "would prune 3 final calls") || f.counts(t) != fixtureCounts {
		t.Fatalf("dry run: %v, %+v\n%s", err, f.counts(t), out)
	}
	out, err = f.runPrune(t, nil, "--state", f.state, "--older-than", "720h", "--backup-taken")
	if err != nil || !strings.Contains(out, "pruned 3 final calls") || !strings.Contains(out, "2 calls kept (1 not final)") {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	if want := (registry.Counts{Calls: 2, NotFinal: 1}); f.counts(t) != want {
		t.Fatalf("after the prune: %+v, want %+v", f.counts(t), want)
	}
}

func TestPruneHelp(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	// Through the command's dispatch, as `hubu-unified-mcp prune --help` runs it.
	err := run(context.Background(), []string{"prune", "--help"}, func(string) string { return "" }, nil, &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"24h", "pg_dump", "--backup-taken", "VACUUM INTO", "charges it again", "in memory"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the help does not say %q:\n%s", want, stderr.String())
		}
	}
}
