//go:build images

// Package images_test proves the container images (make images): it builds them with
// deploy/build-images.sh, runs the migrations and the whole stack as containers on the host's
// network against the test Postgres, and sends a spend through the router's container.
//
// It builds only with the images tag (make images-test, which CI runs): it needs a Docker
// daemon, and building the images costs more than the rest of an ordinary test run, so `make
// test` does not compile it rather than skipping it. It is a package of its own so that
// it does not wait for the e2e suite's failpoint build, which it does not use.
package images_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"hubu.dev/hubu/e2e/stack"
	"hubu.dev/hubu/kit/waitfor"
	"hubu.dev/hubu/sql/sqltest"
)

const unprivileged = "65532"

func TestImages(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	d := &docker{t: t}

	// Images of this run's own, so that nothing else's images are used or replaced.
	tag := "e2e-" + id
	image := func(name string) string { return "hubu/" + name + ":" + tag }
	start := time.Now()
	build := exec.Command(filepath.Join(repo, "deploy", "build-images.sh"))
	build.Env = append(os.Environ(), "HUBU_IMAGE_PREFIX=hubu/", "HUBU_IMAGE_TAG="+tag)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("deploy/build-images.sh: %v\n%s", err, out)
	} else {
		t.Logf("built the images in %v:\n%s", time.Since(start).Round(time.Second), out)
	}
	names := []string{"hubu", "gongbu", "mockflux", "hubu-unified-mcp"}
	t.Cleanup(func() {
		for _, n := range names {
			_, _ = exec.Command("docker", "rmi", image(n)).CombinedOutput()
		}
	})
	for _, n := range names {
		if user := d.output(nil, "image", "inspect", "--format", "{{.Config.User}}", image(n)); user != unprivileged+":"+unprivileged {
			t.Errorf("%s runs as %q, want %s:%s", image(n), user, unprivileged, unprivileged)
		}
	}
	checkVersions(t, d, repo, image, names)

	// The databases are empty: the images' own migrations make them.
	hubuDB, gongbuDB := sqltest.NewEmptyDatabase(t, "hubu_img"), sqltest.NewEmptyDatabase(t, "gongbu_img")
	d.output([]string{"HUBU_DATABASE_URL=" + hubuDB}, "run", "--rm", "--network", "host", "-e", "HUBU_DATABASE_URL", image("hubu"), "migrate", "up")
	d.output([]string{"GONGBU_DATABASE_URL=" + gongbuDB}, "run", "--rm", "--network", "host", "-e", "GONGBU_DATABASE_URL", image("gongbu"), "migrate", "up")
	operatorToken := d.output([]string{"HUBU_DATABASE_URL=" + hubuDB}, "run", "--rm", "--network", "host", "-e", "HUBU_DATABASE_URL", image("hubu"),
		"operator", "create", "--name", "operator")
	gongbuAtHubu := d.output([]string{"HUBU_DATABASE_URL=" + hubuDB}, "run", "--rm", "--network", "host", "-e", "HUBU_DATABASE_URL", image("hubu"),
		"service", "create", "--name", "gongbu")

	addr := map[string]string{}
	for _, n := range names {
		if addr[n], err = stack.FreeAddr(); err != nil {
			t.Fatal(err)
		}
	}
	hubuAtGongbu, fluxKey, routerToken := "hubu-to-gongbu-"+uuid.NewString(), "flux-"+uuid.NewString(), "router-"+uuid.NewString()
	containers := map[string]string{}
	containers["mockflux"] = d.detach(image("mockflux"), []string{"MOCKFLUX_LISTEN=" + addr["mockflux"]}, "serve")
	containers["gongbu"] = d.detach(image("gongbu"), []string{"GONGBU_LISTEN=" + addr["gongbu"], "GONGBU_DATABASE_URL=" + gongbuDB,
		"GONGBU_HUBU_URL=http://" + addr["hubu"], "GONGBU_HUBU_TOKEN=" + gongbuAtHubu, "GONGBU_SERVICE_TOKEN=" + hubuAtGongbu,
		"GONGBU_FLUX_URL=http://" + addr["mockflux"], "GONGBU_FLUX_KEY=" + fluxKey, "GONGBU_FLUX_IDEMPOTENT=true", "GONGBU_POLL_INTERVAL=200ms",
		// mockflux, like BFL, answers polling and result URLs on another host than the API's.
		"GONGBU_FLUX_POLLING_HOSTS=" + stack.MockfluxOtherHost("http://"+addr["mockflux"]),
		"GONGBU_FLUX_SAMPLE_HOSTS=" + stack.MockfluxOtherHost("http://"+addr["mockflux"])}, "serve")
	containers["hubu"] = d.detach(image("hubu"), []string{"HUBU_LISTEN=" + addr["hubu"], "HUBU_DATABASE_URL=" + hubuDB,
		"HUBU_GONGBU_URL=http://" + addr["gongbu"], "HUBU_GONGBU_TOKEN=" + hubuAtGongbu}, "serve")
	for _, n := range []string{"mockflux", "gongbu", "hubu"} {
		d.waitHealthy(containers[n], "http://"+addr[n]+"/healthz")
	}

	// hubuctl lives in the hubu image.
	created := d.output([]string{"HUBU_URL=http://" + addr["hubu"], "HUBU_APPROVER_TOKEN=" + operatorToken},
		"run", "--rm", "--network", "host", "-e", "HUBU_URL", "-e", "HUBU_APPROVER_TOKEN", "--entrypoint", "/usr/local/bin/hubuctl", image("hubu"),
		"agent", "create", "--name", "images", "--json", "--auto-approve-micros", "50000", "--ceiling-micros", "1000000", "--budget-micros", "5000000", "--period", "day")
	var agent struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(created), &agent); err != nil || agent.Token == "" {
		t.Fatalf("hubuctl agent create printed no token: %v", err)
	}
	containers["hubu-unified-mcp"] = d.detach(image("hubu-unified-mcp"), []string{"HUBU_AGENT_TOKEN=" + agent.Token, "ROUTER_MCP_TOKEN=" + routerToken},
		"--hubu-url", "http://"+addr["hubu"], "--gongbu-url", "http://"+addr["gongbu"], "--http", addr["hubu-unified-mcp"], "--allow-private-image-hosts")
	d.waitHealthy(containers["hubu-unified-mcp"], "http://"+addr["hubu-unified-mcp"]+"/healthz")

	// A spend through the router's container, then the same call again: charged once.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "images-test"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: "http://" + addr["hubu-unified-mcp"] + "/mcp", HTTPClient: &http.Client{Transport: stack.Bearer(routerToken)}, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		t.Fatalf("connect to the router's container: %v", err)
	}
	defer cs.Close()
	args := map[string]any{"prompt": "a container ship folded from paper", "model": "flux-dev", "width": 1024, "height": 1024}
	meta := mcp.Meta{"callId": "call_images_" + id + "_0001"}
	for i, want := range []bool{false, true} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "generate_image", Arguments: args, Meta: meta})
		if err != nil {
			t.Fatalf("generate_image (delivery %d): %v", i+1, err)
		}
		var sc struct {
			Status   string `json:"status"`
			Replayed bool   `json:"replayed"`
		}
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &sc)
		if res.IsError || sc.Status != "succeeded" || sc.Replayed != want {
			t.Fatalf("generate_image (delivery %d): error %v, status %q, replayed %v; want succeeded, replayed %v: %s", i+1, res.IsError, sc.Status, sc.Replayed, want, raw)
		}
	}
	if n := charges(t, "http://"+addr["mockflux"]); n != 1 {
		t.Errorf("mockflux recorded %d charges for one call delivered twice, want 1", n)
	}

	// The registry's backup as the compose recipe takes it (docs/operations.md): the router's own
	// command in its running container, which has no shell and no sqlite3, the copy on stdout.
	backup := exec.Command("docker", "exec", containers["hubu-unified-mcp"], "/usr/local/bin/hubu-unified-mcp", "backup", "--to", "-")
	var backupLog bytes.Buffer
	backup.Stderr = &backupLog
	if copied, err := backup.Output(); err != nil || !bytes.HasPrefix(copied, []byte("SQLite format 3\x00")) ||
		!strings.HasPrefix(backupLog.String(), "backed up 1 calls (0 not final) to stdout: ") {
		t.Errorf("hubu-unified-mcp backup --to - in the router's container: %v, %d bytes that begin %q; it said: %s",
			err, len(copied), copied[:min(16, len(copied))], backupLog.String())
	}

	// Every process in every container runs as the unprivileged user, whatever the image says.
	for n, c := range containers {
		pid := d.output(nil, "inspect", "--format", "{{.State.Pid}}", c)
		status, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		for _, l := range strings.Split(string(status), "\n") {
			if k, v, _ := strings.Cut(l, ":"); k == "Uid" || k == "Gid" {
				if f := strings.Fields(v); len(f) != 4 || f[0] != unprivileged || f[1] != unprivileged || f[2] != unprivileged || f[3] != unprivileged {
					t.Errorf("%s's process has %s %v, want %s throughout", n, k, f, unprivileged)
				}
			}
		}
	}
}

// checkVersions asks each image for its version, once the binaries answer --version (kit/command
// does, when kit/buildinfo is in the tree): the line must name the binary.
func checkVersions(t *testing.T, d *docker, repo string, image func(string) string, names []string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repo, "kit", "buildinfo")); err != nil {
		t.Log("the binaries do not answer --version yet (no kit/buildinfo): not checked")
		return
	}
	for _, n := range names {
		if out := d.output(nil, "run", "--rm", image(n), "--version"); !strings.HasPrefix(out, n+" ") {
			t.Errorf("docker run %s --version printed %q, want a line starting with %q", image(n), out, n+" ")
		}
	}
	if out := d.output(nil, "run", "--rm", "--entrypoint", "/usr/local/bin/hubuctl", image("hubu"), "--version"); !strings.HasPrefix(out, "hubuctl ") {
		t.Errorf("hubuctl --version in the hubu image printed %q", out)
	}
}

// docker runs the docker client for one test; values of secret settings go through its
// environment (docker run -e NAME), never its command line.
type docker struct{ t *testing.T }

// output runs docker to completion and returns its trimmed standard output, failing the test
// when it fails.
func (d *docker) output(env []string, args ...string) string {
	d.t.Helper()
	cmd := exec.Command("docker", args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		d.t.Fatalf("docker %s: %v: %s", strings.Join(args[:min(2, len(args))], " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out))
}

// detach starts a container of image on the host's network with env and returns its id; it
// is removed when the test ends, after its log is shown if the test failed.
func (d *docker) detach(image string, env []string, args ...string) string {
	d.t.Helper()
	run := []string{"run", "--detach", "--network", "host"}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		run = append(run, "-e", k)
	}
	id := d.output(env, append(append(run, image), args...)...)
	d.t.Cleanup(func() {
		if d.t.Failed() {
			logs, _ := exec.Command("docker", "logs", "--tail", "50", id).CombinedOutput()
			d.t.Logf("%s's log:\n%s", image, logs)
		}
		_, _ = exec.Command("docker", "rm", "--force", id).CombinedOutput()
	})
	return id
}

// waitHealthy waits (30 s at most) until url answers 200, and fails early if the container
// stopped.
func (d *docker) waitHealthy(container, url string) {
	d.t.Helper()
	if !waitfor.Within(30*time.Second, func() bool {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		if running := d.output(nil, "inspect", "--format", "{{.State.Running}}", container); running != "true" {
			logs, _ := exec.Command("docker", "logs", container).CombinedOutput()
			d.t.Fatalf("the container for %s stopped:\n%s", url, logs)
		}
		return false
	}) {
		d.t.Fatalf("%s did not answer within 30 s", url)
	}
}

func charges(t *testing.T, fluxURL string) int {
	t.Helper()
	resp, err := http.Get(fluxURL + "/_mock/charges")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Count int `json:"count"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(fmt.Errorf("mockflux charges: %v", err))
	}
	return body.Count
}
