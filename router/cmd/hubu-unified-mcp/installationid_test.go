package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"hubu.dev/hubu/router/identity"
	"hubu.dev/hubu/router/registry"
)

// The operator reads the audience of version 2 envelopes from the command; it is the id the
// router itself uses, it is stable, and the env fallback works like the router's.
func TestInstallationIDCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state", "router.db") // the directory does not exist yet
	out, err := exec.Command(binary, "installation-id", "--state", state).Output()
	if err != nil {
		t.Fatalf("installation-id: %v", err)
	}
	id := strings.TrimSuffix(string(out), "\n")
	if !regexp.MustCompile(identity.AudiencePattern).MatchString(id) {
		t.Fatalf("installation-id printed %q, not an audience", out)
	}
	cmd := exec.Command(binary, "installation-id")
	cmd.Env = []string{"ROUTER_STATE=" + state}
	if again, err := cmd.Output(); err != nil || string(again) != string(out) {
		t.Fatalf("second run (ROUTER_STATE): %q %v, want %q", again, err, out)
	}
	stateFile := filepath.Join(dir, "state-url") // as a secret: a database URL holds a password
	if err := os.WriteFile(stateFile, []byte(state+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(binary, "installation-id")
	cmd.Env = []string{"ROUTER_STATE_FILE=" + stateFile}
	if again, err := cmd.Output(); err != nil || string(again) != string(out) {
		t.Fatalf("third run (ROUTER_STATE_FILE): %q %v, want %q", again, err, out)
	}
	reg, err := registry.Open(context.Background(), state, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if reg.InstallationID() != id {
		t.Fatalf("the router's installation id is %s, the command printed %s", reg.InstallationID(), id)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"installation-id", "--state", dir + "/bad?.db"}, "may not contain"},
		{[]string{"installation-id", "extra"}, "unexpected argument"},
	} {
		cmd := exec.Command(binary, c.args...)
		cmd.Env = []string{"ROUTER_STATE=" + state}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("%v: %v %q, want one line saying %q", c.args, err, out, c.want)
		}
	}
	if out, err := exec.Command(binary, "installation-id", "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "audience") {
		t.Errorf("installation-id --help: %v %s", err, out)
	}
}
