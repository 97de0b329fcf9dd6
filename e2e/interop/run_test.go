package interop_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// harnessRuns runs a harness once per tool call the fake model makes, keeping what it
// printed for the secret scan.
type harnessRuns struct {
	st      *interopStack
	name    string // the harness's command, for failure messages
	model   *script
	runOnce func() string
	printed strings.Builder
}

// call plans the fake's next tool call, runs the harness and returns what the router answered
// the call, as the harness sent it back to the model.
func (h *harnessRuns) call(callID, args string) toolOutcome {
	t := h.st.t
	t.Helper()
	h.model.plan(callID, args)
	out := h.runOnce()
	h.printed.WriteString(out)
	raw := h.model.result(callID)
	if raw == "" {
		t.Fatalf("%s sent no result for call %s back to the model (fake: %s)\n%s", h.name, callID, h.model.summary(), out)
	}
	o, ok := outcome(raw)
	if !ok {
		t.Fatalf("call %s: no structured content in the tool result %s sent back: %s", callID, h.name, raw)
	}
	return o
}

// requireNewCalls makes a call under an id the fake issues (prefix and 24 characters), then
// one with the same arguments in a new run: each is a new call, which the router accepts with
// verdict under the _meta key, charged once. It returns the first call's id.
func (h *harnessRuns) requireNewCalls(prefix, args, key, verdict string) (first string) {
	h.st.t.Helper()
	for i, what := range []string{"first call", "the same prompt in a new run"} {
		id := newID(prefix, 24)
		if o := h.call(id, args); o.Status != "succeeded" || o.Replayed {
			h.st.t.Fatalf("%s: %+v, want succeeded and not replayed", what, o)
		}
		h.st.requireDiagnosed(key, id, verdict)
		h.st.requireCharges(i + 1)
		if first == "" {
			first = id
		}
	}
	return first
}

// runHarness runs a harness command to completion in home/work, with HOME (and the XDG
// directories) under home, never the user's, no stdin, and the environment limited to PATH and
// env. It fails the test when the command fails or takes more than three minutes, and returns
// what it printed.
func runHarness(t *testing.T, home string, env []string, name string, args ...string) string {
	t.Helper()
	return runHarnessIn(t, home, "work", env, name, args...)
}

// runHarnessIn is runHarness in the directory home/dir: a user's other repository, say.
func runHarnessIn(t *testing.T, home, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	work := filepath.Join(home, dir)
	noError(t, os.MkdirAll(work, 0o700))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = work
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + os.TempDir(),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		// Anything but loopback goes to a closed port, so an update check or telemetry fails
		// here instead of leaving the machine.
		"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "ALL_PROXY=http://127.0.0.1:9",
		"http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9", "all_proxy=http://127.0.0.1:9",
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s: %.1fs", filepath.Base(name), strings.Join(args[:1], " "), time.Since(start).Seconds())
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(name), err, out.String())
	}
	return out.String()
}

// noError fails the test at once when err is set.
func noError(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
