package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	harness "hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/proctest"
)

// The runbook's consistent backup and its restore (docs/runbooks.md), run for real with the
// tools it names: with nothing in flight, pg_dump of both databases and `hubu-unified-mcp
// backup` of the registry (the router's images have no sqlite3, so the runbook uses the
// router's own); a spend after the backup; the disaster; pg_restore, the registry copied back,
// `gongbu renew-epoch`, and the services started in the runbook's order. A call recorded before
// the backup is replayed, never charged again. A call recorded only after it is the cost the
// runbook warns of: delivered again, it is a new operation and is charged again, and
// reconciliation names the provider's first charge as belonging to nothing, for the operator
// to settle with the provider's billing.
func TestBackupAndRestoreByTheRunbook(t *testing.T) {
	t.Parallel()
	su := newSuite(t)
	s := su.s
	dir := s.Config.Dir
	cs := su.router()
	const before, after = "call_backupBeforeX7q2Lm9Vw4Ns", "call_backupAfterR5t8Kp3Zd6Hc"
	first := su.mustSucceed(cs, foxArgs, codexMeta(before), "before the backup")

	// The consistent backup: nothing in flight, then all three.
	su.settleAndReconcile(1)
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	hubuDump, gongbuDump := filepath.Join(dir, "hubu.dump"), filepath.Join(dir, "gongbu.dump")
	registry, registryBackup := filepath.Join(dir, "router.db"), filepath.Join(dir, "router-backup.db")
	run("pg_dump", "--format=custom", "--file", hubuDump, s.HubuDBURL)
	run("pg_dump", "--format=custom", "--file", gongbuDump, s.GongbuDBURL)
	run(bin.Path("hubu-unified-mcp"), "backup", "--state", registry, "--to", registryBackup)

	lost := su.mustSucceed(cs, foxArgs, codexMeta(after), "after the backup")

	// The disaster, and the restore: stop every router, Hubu and Gongbu; restore the three
	// from the same backup; renew Gongbu's epoch; start Gongbu, then Hubu, then the routers.
	noError(t, cs.Close())
	for _, p := range []*harness.Process{s.Router, s.Hubu, s.Gongbu} {
		noError(t, p.Stop(15*time.Second))
	}
	run("pg_restore", "--clean", "--if-exists", "--no-owner", "--dbname", s.HubuDBURL, hubuDump)
	run("pg_restore", "--clean", "--if-exists", "--no-owner", "--dbname", s.GongbuDBURL, gongbuDump)
	for _, f := range []string{registry + "-wal", registry + "-shm"} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	noError(t, os.Rename(registryBackup, registry))
	run(bin.Path("gongbu"), "renew-epoch", "--database-url", s.GongbuDBURL)
	for _, p := range []*harness.Process{s.Gongbu, s.Hubu, s.Router} {
		proctest.Start(t, p)
	}

	cs = su.router()
	again := su.mustCall(cs, "generate_image", foxArgs, codexMeta(before))
	if again["replayed"] != true || again.handle() != first.handle() {
		t.Fatalf("the call recorded before the backup, delivered again: %v, want the replay of %s", again, first.handle())
	}
	anew := su.mustSucceed(cs, foxArgs, codexMeta(after), "the call the restore forgot, delivered again")
	if anew.handle() == lost.handle() {
		t.Fatalf("the registry restored from before %s was recorded still knows it", after)
	}
	if n := su.charges().Count; n != 3 {
		t.Fatalf("%d provider charges, want 3: the first call once, the forgotten one twice", n)
	}
	noError(t, poll(30*time.Second, 200*time.Millisecond, func() error {
		r, err := su.reconcileReport()
		if err != nil {
			return err
		}
		if len(r.InFlight) > 0 || len(r.Mismatches) != 1 || !strings.Contains(r.Mismatches[0], "belongs to no Gongbu execution") {
			return fmt.Errorf("want exactly the forgotten call's first charge named, got:\n%s", r)
		}
		return nil
	}))
}
