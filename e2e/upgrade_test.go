package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
// money agree. The previous release is the last release tag (testdata/previous-release),
// built from this repository's history.
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
	// The router says it found services that answer only HTTP/1.1 (it speaks h2c to this
	// release's), naming each.
	routerLog := string(must(os.ReadFile(filepath.Join(s.Config.Dir, "router-stdio.log")))(t))
	for _, p := range []*harness.Process{s.Hubu, s.Gongbu} {
		host := must(url.Parse(p.URL()))(t).Host
		if !slices.ContainsFunc(strings.Split(routerLog, "\n"), func(line string) bool {
			return strings.Contains(line, `"level":"WARN","msg":"backend answers only HTTP/1.1`) && strings.Contains(line, `"host":"`+host+`"`)
		}) {
			t.Fatalf("the router did not log that %s (%s) answers only HTTP/1.1:\n%s", p.Name, host, routerLog)
		}
	}

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

// buildPreviousRelease builds the binaries of the previous release from this repository's
// history: the release tag testdata/previous-release names, at the commit it records.
func buildPreviousRelease(t *testing.T) harness.Binaries {
	t.Helper()
	root := must(filepath.Abs(".."))(t)
	tag, commit := previousRelease(t, root)
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("the previous release %s (%s) is not in this clone's history (a shallow clone? fetch it): %v %s", tag, commit, err, out)
	}
	src := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", commit)
	var tarball bytes.Buffer
	archive.Stdout = &tarball
	noError(t, archive.Run())
	untar := exec.Command("tar", "-x", "-C", src)
	untar.Stdin = &tarball
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v %s", tag, err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return must(harness.Build(ctx, src, t.TempDir(), false))(t)
}

// previousRelease reads testdata/previous-release: a line "TAG COMMIT", the last release before
// this code and the commit its tag names. The commit is recorded so that a clone without tags
// still builds the release; where the clone has tags, the tag must name that commit (a release's
// tag never moves), and the file must name the newest release tag behind HEAD: once a new
// release is cut, the upgrade to test is from it.
func previousRelease(t *testing.T, root string) (tag, commit string) {
	t.Helper()
	raw := must(os.ReadFile(filepath.Join("testdata", "previous-release")))(t)
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			f := strings.Fields(line)
			if len(f) != 2 {
				t.Fatalf("testdata/previous-release: %q is not \"TAG COMMIT\"", line)
			}
			tag, commit = f[0], f[1]
		}
	}
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		return strings.TrimSpace(string(out)), err
	}
	tagged, err := git("rev-parse", "-q", "--verify", "refs/tags/"+tag+"^{commit}")
	if err != nil {
		t.Logf("this clone has no tag %s: building the commit testdata/previous-release records for it, %s", tag, commit)
		return tag, commit
	}
	if tagged != commit {
		t.Fatalf("the tag %s names %s, but testdata/previous-release records %s for it: a release's tag never moves", tag, tagged, commit)
	}
	// The newest release tag behind HEAD (a release commit itself is not behind HEAD: its own
	// upgrade test still starts from the release before it).
	if newest, err := git("describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", "HEAD^"); err == nil && newest != tag {
		if at, _ := git("rev-parse", newest+"^{commit}"); at != commit {
			t.Fatalf("the last release is %s, but testdata/previous-release names %s: move it to %s and that tag's commit", newest, tag, newest)
		}
	}
	return tag, commit
}
