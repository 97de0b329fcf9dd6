package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	harness "hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/proctest"
)

// The upgrade docs/operations.md prescribes, run for real: the previous release serves on its
// own schema; the new migrations run while it keeps serving; it still serves a spend on the new
// schema; then each service is replaced by the new release, one at a time, with a spend after
// each. Every call is charged once, every redelivery names its operation, and the records of
// money agree. The previous release is the commit in testdata/previous-release, built from
// this repository's history.
func TestRollingUpgradeFromThePreviousRelease(t *testing.T) {
	t.Parallel()
	old := buildPreviousRelease(t)
	server, id, dir, idConfig := stackPlace(t)
	su := startSuiteWith(t, old, harness.Config{
		// Gongbu runs as against the real API, which documents no idempotency key (the previous
		// release's mockflux honours keys whatever it is told; Gongbu does not lean on them).
		Dir: dir, ServerURL: server, HubuDB: "hubu_upgrade_" + id, GongbuDB: "gongbu_upgrade_" + id,
		Env: map[string][]string{
			"router": {"ROUTER_IDENTITY_CONFIG=" + idConfig},
			"gongbu": {"GONGBU_LEASE=1s"},
			"hubu":   {"HUBU_RETRY_AFTER=1s"},
		},
	})
	s := su.s
	cs := su.router() // routers are upgraded on their own; this one is the new release
	calls := []string{"call_upgradeA1x9Qm2Vz7Lp4Rt", "call_upgradeB8k3Wn6Yc1Hs5Jd", "call_upgradeM3p8Vd1Ks7Qx2Zf", "call_upgradeC2f7Tb9Xq4Mv6Ng"}
	handles := map[string]string{}
	spend := func(callID, when string) {
		t.Helper()
		r := su.mustSucceed(cs, foxArgs, codexMeta(callID), when)
		handles[callID] = r.handle()
	}
	spend(calls[0], "on the previous release")

	// The new migrations, while the previous release serves.
	for _, svc := range []struct{ name, url string }{{"hubu", s.HubuDBURL}, {"gongbu", s.GongbuDBURL}} {
		out, err := exec.Command(bin.Path(svc.name), "migrate", "up", "--database-url", svc.url).CombinedOutput()
		if err != nil {
			t.Fatalf("%s migrate up: %v\n%s", svc.name, err, out)
		}
	}
	spend(calls[1], "on the previous release, on the new schema")

	// One service at a time: stop the old process, start the new release in its place; a
	// spend in between runs on the new Gongbu and the old Hubu.
	for i, p := range []*harness.Process{s.Gongbu, s.Hubu} {
		noError(t, p.Stop(15*time.Second))
		p.Path = bin.Path(p.Name)
		proctest.Start(t, p)
		spend(calls[2+i], "with "+p.Name+" on the new release")
	}

	for _, c := range calls {
		again := su.mustCall(cs, "generate_image", foxArgs, codexMeta(c))
		if again["status"] != "succeeded" || again.handle() != handles[c] {
			t.Fatalf("redelivery of %s after the upgrade: %v, want operation %s", c, again, handles[c])
		}
	}
	// The new Gongbu downloads the images of the successes the previous release recorded
	// without them, while the provider's links still work.
	conn := must(pgx.Connect(context.Background(), s.GongbuDBURL))(t)
	defer conn.Close(context.Background())
	noError(t, poll(20*time.Second, 100*time.Millisecond, func() error {
		var kept int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM execution_images").Scan(&kept); err != nil {
			return err
		}
		if kept != len(calls) {
			return fmt.Errorf("Gongbu keeps %d images, want %d", kept, len(calls))
		}
		return nil
	}))
	if n := su.charges().Count; n != len(calls) {
		t.Fatalf("%d charges for %d calls", n, len(calls))
	}
	su.settleAndReconcile(len(calls))
}

// buildPreviousRelease builds the binaries of the commit in testdata/previous-release from
// this repository's history.
func buildPreviousRelease(t *testing.T) harness.Binaries {
	t.Helper()
	raw := must(os.ReadFile(filepath.Join("testdata", "previous-release")))(t)
	var commit string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			commit = line
		}
	}
	root := must(filepath.Abs(".."))(t)
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("the previous release %s is not in this clone's history (a shallow clone? fetch it): %v %s", commit, err, out)
	}
	src := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", commit)
	var tarball bytes.Buffer
	archive.Stdout = &tarball
	noError(t, archive.Run())
	untar := exec.Command("tar", "-x", "-C", src)
	untar.Stdin = &tarball
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v %s", commit, err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return must(harness.Build(ctx, src, t.TempDir(), false))(t)
}
